"""Convolution layers (Fluid 1.x names): conv2d."""

__all__ = []
