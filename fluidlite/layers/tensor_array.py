"""Tensor arrays (Fluid 1.8's layers/control_flow.py): LOD_TENSOR_ARRAY variables, lists of LoDTensors that loops
write one entry per step and read back.

``create_array(dtype)`` declares an empty array; ``array_write(x, i, array)`` writes a copy of ``x`` at index ``i``
(an int64 tensor of shape [1]), growing the array; ``array_read(array, i)`` reads entry ``i``; ``array_length`` is
its length (int64 [1]). Fetching an array returns a list with one numpy array per entry (``return_numpy=False``:
a ``fluid.LoDTensorArray``). See docs/control_flow.md, "Tensor arrays and rank tables".
"""
from .. import core
from ..layer_helper import LayerHelper
from .checks import check_dtype, check_variable

__all__ = ["create_array", "array_write", "array_read", "array_length"]

_ARRAY = core.VarDesc.VarType.LOD_TENSOR_ARRAY


def _check_array(layer, arg, array):
    """TypeError unless `array` is a LOD_TENSOR_ARRAY Variable (Fluid raises TypeError too)."""
    check_variable(layer, arg, array)
    if array.type != _ARRAY:
        raise TypeError("%s: '%s' (%s) must be a LoDTensorArray variable (layers.create_array), got a %s variable"
                        % (layer, arg, array.name, array.type.name))


def create_array(dtype):
    """An empty LOD_TENSOR_ARRAY variable (``array_N.out``) whose entries are of `dtype`."""
    helper = LayerHelper("array")
    return helper.create_variable(name="{0}.out".format(helper.name), type=_ARRAY, dtype=dtype)


def array_write(x, i, array=None):
    """Writes `x` at index `i` (an int64 Variable of shape [1]) of `array` and returns the array: entry i becomes a
    copy of x with its LoD, and an array shorter than i + 1 grows to i + 1 entries. `array` None: a new one
    (``array_write_N.out``, of x's dtype)."""
    check_dtype("array_write", "i", i, ["int64"])
    check_variable("array_write", "x", x)
    helper = LayerHelper("array_write")
    if array is not None:
        _check_array("array_write", "array", array)
    else:
        array = helper.create_variable(name="{0}.out".format(helper.name), type=_ARRAY, dtype=x.dtype)
    helper.append_op(type="write_to_array", inputs={"X": [x], "I": [i]}, outputs={"Out": [array]})
    return array


def array_read(array, i):
    """Entry `i` (an int64 Variable of shape [1]) of `array`: a copy, with its LoD. Reading beyond the array's
    length raises when the program runs."""
    check_dtype("array_read", "i", i, ["int64"])
    _check_array("array_read", "array", array)
    helper = LayerHelper("array_read")
    out = helper.create_variable_for_type_inference(dtype=array.dtype)
    helper.append_op(type="read_from_array", inputs={"X": [array], "I": [i]}, outputs={"Out": [out]})
    return out


def array_length(array):
    """The number of entries of `array`: an int64 Variable of shape [1] (no gradient flows through it)."""
    _check_array("array_length", "array", array)
    helper = LayerHelper("array_length")
    out = helper.create_variable_for_type_inference(dtype="int64", stop_gradient=True)
    helper.append_op(type="lod_array_length", inputs={"X": [array]}, outputs={"Out": [out]})
    return out

