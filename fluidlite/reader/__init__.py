"""Fluid 1.x ``paddle.reader``: reader decorators (see decorator.py and docs/data.md)."""
from . import decorator
from .decorator import *  # noqa: F401,F403

__all__ = list(decorator.__all__)
