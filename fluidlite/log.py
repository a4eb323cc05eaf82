"""GLOG-style verbose logging from the Python layer, in the same format and with the same levels as
the C++ core (``GLOG_v``, ``GLOG_vmodule``; module = file basename without extension)."""
import contextlib
import os
import sys

from . import core


def set_vlog_level(level):
    """Like ``GLOG_v=level``, at run time."""
    core.set_vlog_level(int(level))


def get_vlog_level():
    return core.get_vlog_level()


def set_vmodule(spec):
    """Like ``GLOG_vmodule=spec`` (``pattern=N,...``), at run time."""
    core.set_vmodule(spec)


@contextlib.contextmanager
def vlog_guard(level=None, vmodule=None):
    """Temporarily change the verbosity (restores the previous settings afterwards)."""
    old_level, old_vmodule = core.get_vlog_level(), core.get_vmodule()
    try:
        if level is not None:
            core.set_vlog_level(int(level))
        if vmodule is not None:
            core.set_vmodule(vmodule)
        yield
    finally:
        core.set_vlog_level(old_level)
        core.set_vmodule(old_vmodule)


_level_cache = {}


def vlog(level, message, *args):
    """``VLOG(level) << message % args`` from Python; formats only when the level is on."""
    frame = sys._getframe(1)
    filename = frame.f_code.co_filename
    if level > core.vlog_level_for(filename):
        return
    core.log_line("I", filename, frame.f_lineno, message % args if args else message)


def vlog_is_on(level):
    return level <= core.vlog_level_for(sys._getframe(1).f_code.co_filename)


def warning(message):
    frame = sys._getframe(1)
    core.log_line("W", frame.f_code.co_filename, frame.f_lineno, message)


__all__ = ["set_vlog_level", "get_vlog_level", "set_vmodule", "vlog_guard", "vlog", "vlog_is_on"]

del os
