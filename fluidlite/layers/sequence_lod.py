"""Sequence layers over LoDTensors (Fluid 1.8's layers/sequence_lod.py): each takes a LoDTensor whose last LoD level
marks where each sequence starts, and works per sequence, never across one's end. The ops are in
kernels/sequence_*.cc; LoD reading and its checks in kernels/helpers/lod.h. Each section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- pooling and convolution
# sequence_pool, sequence_first_step, sequence_last_step, sequence_conv

# ---------------------------------------------------------------- softmax, reverse, enumerate, erase, im2sequence, row_conv

# ---------------------------------------------------------------- expansion, concat, reshape, slice, pad, mask

# ---------------------------------------------------------------- LoD rewriting: lod_reset, lod_append
