"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling, softmax, expansion

# ---------------------------------------------------------------- concat, reshape, slice, pad, mask

# ---------------------------------------------------------------- reverse, enumerate, erase, im2sequence, row_conv

# ---------------------------------------------------------------- sequence_conv

# ---------------------------------------------------------------- LoD rewriting: lod_reset, lod_append
