"""fluid.data: Fluid 1.6's input declaration, beside layers.data.

Unlike layers.data, the shape is taken literally (the batch dimension is part of it; None or -1 for an
unknown dim) and Executor.run checks fed values against it (shape and dtype: core.FeedError, a
ValueError); layers.data variables are not checked (csrc/executor.cc CheckFeeds).
"""
from .framework import VarType, default_main_program

__all__ = ["data"]


def data(name, shape, dtype="float32", lod_level=0):
    """Declares a fed LoDTensor variable `name` of `shape` (None -> -1) in the main program's global block."""
    if not isinstance(name, str):
        raise TypeError("fluid.data: name must be a str, got %s" % type(name).__name__)
    if not isinstance(shape, (list, tuple)):
        raise TypeError("fluid.data: shape of '%s' must be a list or tuple, got %s" % (name, type(shape).__name__))
    dims = []
    for d in shape:
        if d is None:
            dims.append(-1)
        elif isinstance(d, bool) or not hasattr(d, "__index__"):
            raise TypeError("fluid.data: shape of '%s' must hold ints or None, got %r" % (name, list(shape)))
        else:
            dims.append(int(d))
    return default_main_program().global_block().create_var(
        name=name, shape=dims, dtype=dtype, type=VarType.LOD_TENSOR, stop_gradient=True, lod_level=lod_level,
        is_data=True, need_check_feed=True)
