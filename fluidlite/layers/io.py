"""layers.data: declare an input variable that Executor.run must feed; the py_reader family (its
runtime lives in fluidlite/dataloader.py)."""
from ..dataloader import create_py_reader_by_data, double_buffer, py_reader, read_file  # noqa: F401
from ..framework import VarType, default_main_program

__all__ = ["data", "py_reader", "create_py_reader_by_data", "read_file", "double_buffer"]


def data(name, shape, append_batch_size=True, dtype="float32", lod_level=0, type=VarType.LOD_TENSOR,
         stop_gradient=True):
    """Declares a fed variable. With append_batch_size (Fluid's default) a -1 batch dim is prepended,
    unless the shape has a None (read as -1) or a negative dim. Fed values are not checked against the
    declaration (as in Fluid): their shape and dtype win; fluid.data declares checked inputs."""
    shape = [-1 if s is None else int(s) for s in shape]
    if append_batch_size and all(s >= 0 for s in shape):
        shape = [-1] + shape
    return default_main_program().global_block().create_var(
        name=name, shape=shape, dtype=dtype, type=type, stop_gradient=stop_gradient, lod_level=lod_level,
        is_data=True)
