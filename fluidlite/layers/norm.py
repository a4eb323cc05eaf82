"""Pooling, normalisation and regularisation layers (Fluid 1.x names): pool2d, batch_norm, dropout, ..."""

__all__ = []
