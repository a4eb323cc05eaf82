"""Tensor arrays (Fluid 1.8's layers/control_flow.py): LOD_TENSOR_ARRAY variables, lists of LoDTensors that loops
write one entry per step and read back.

``create_array(dtype)`` declares an empty array; ``array_write(x, i, array)`` writes a copy of ``x`` at index ``i``
(an int64 tensor of shape [1]), growing the array; ``array_read(array, i)`` reads entry ``i``; ``array_length`` is
its length (int64 [1]). Fetching an array returns a list with one numpy array per entry (``return_numpy=False``:
a ``fluid.LoDTensorArray``). ``tensor_array_to_tensor`` joins the entries into one tensor.

Rank tables (LOD_RANK_TABLE, DynamicRNN's machinery): ``lod_rank_table(x, level)`` orders the sequences of a LoD
level by length, longest first; ``lod_tensor_to_array`` splits a LoD tensor into time steps in that order (entry t:
step t of every sequence longer than t) and ``array_to_lod_tensor`` joins them back; ``shrink_memory`` keeps the
rows of the sequences still running at a step; ``reorder_lod_tensor_by_rank`` puts a tensor's sequences in rank
order; ``max_sequence_len`` is the longest length. Fluid 1.8 keeps these five out of ``fluid.layers.__all__``
(DynamicRNN calls them); fluidlite exports them too. See docs/control_flow.md, "Tensor arrays and rank tables".
"""
from .. import core, unique_name
from ..layer_helper import LayerHelper
from .checks import check_dtype, check_variable

__all__ = ["create_array", "array_write", "array_read", "array_length", "tensor_array_to_tensor",
           "reorder_lod_tensor_by_rank", "lod_rank_table", "max_sequence_len", "lod_tensor_to_array",
           "array_to_lod_tensor", "shrink_memory"]

_ARRAY = core.VarDesc.VarType.LOD_TENSOR_ARRAY
_RANK_TABLE = core.VarDesc.VarType.LOD_RANK_TABLE


def _check_array(layer, arg, array):
    """TypeError unless `array` is a LOD_TENSOR_ARRAY Variable (Fluid raises TypeError too)."""
    check_variable(layer, arg, array)
    if array.type != _ARRAY:
        raise TypeError("%s: '%s' (%s) must be a LoDTensorArray variable (layers.create_array), got a %s variable"
                        % (layer, arg, array.name, array.type.name))


def _check_rank_table(layer, arg, table):
    check_variable(layer, arg, table)
    if table.type != _RANK_TABLE:
        raise TypeError("%s: '%s' (%s) must be a LOD_RANK_TABLE variable (layers.lod_rank_table), got a %s variable"
                        % (layer, arg, table.name, table.type.name))


def _check_tensor(layer, arg, x):
    check_variable(layer, arg, x)
    if x.type != core.VarDesc.VarType.LOD_TENSOR:
        raise TypeError("%s: '%s' (%s) must be a LoDTensor variable, got a %s variable"
                        % (layer, arg, x.name, x.type.name))


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



def tensor_array_to_tensor(input, axis=1, name=None, use_stack=False):
    """The entries of the LoDTensorArray `input` joined along `axis`: concatenated (they may differ at axis only), or
    stacked on a new axis with `use_stack` (equal shapes). Returns (out, out_index): out_index is an int32 tensor of
    each entry's size along axis. Note the layer's axis=1 default (the op's is 0), as Fluid's."""
    _check_array("tensor_array_to_tensor", "input", input)
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    out_index = helper.create_variable_for_type_inference(dtype="int32", stop_gradient=True)
    helper.append_op(type="tensor_array_to_tensor", inputs={"X": [input]},
                     outputs={"Out": [out], "OutIndex": [out_index]},
                     attrs={"axis": int(axis), "use_stack": bool(use_stack)})
    return out, out_index


def reorder_lod_tensor_by_rank(x, rank_table):
    """`x`'s sequences (its level-0 sequences, or its rows when it has no LoD) in the order of `rank_table`,
    longest first."""
    _check_tensor("reorder_lod_tensor_by_rank", "x", x)
    _check_rank_table("reorder_lod_tensor_by_rank", "rank_table", rank_table)
    helper = LayerHelper("reorder_lod_tensor_by_rank")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="reorder_lod_tensor_by_rank", inputs={"X": [x], "RankTable": [rank_table]},
                     outputs={"Out": [out]})
    return out


def lod_rank_table(x, level=0):
    """A LOD_RANK_TABLE variable (``lod_rank_table_N``): the sequences of LoD level `level` of `x` ordered by
    length, longest first (equal lengths keep their order), as (index, length) items."""
    _check_tensor("lod_rank_table", "x", x)
    if not isinstance(level, int) or isinstance(level, bool) or level < 0:
        raise ValueError("lod_rank_table: level must be an int >= 0, got %r" % (level,))
    helper = LayerHelper("lod_rank_table")
    table = helper.create_variable(type=_RANK_TABLE, name=unique_name.generate("lod_rank_table"))
    helper.append_op(type="lod_rank_table", inputs={"X": [x]}, outputs={"Out": [table]}, attrs={"level": level})
    return table


def max_sequence_len(rank_table):
    """The length of the longest sequence `rank_table` ranks: an int64 Variable of shape [1]."""
    _check_rank_table("max_sequence_len", "rank_table", rank_table)
    helper = LayerHelper("max_seqence_len")  # sic: Fluid's name, so the variable names match
    out = helper.create_variable_for_type_inference(dtype="int64", stop_gradient=True)
    helper.append_op(type="max_sequence_len", inputs={"RankTable": [rank_table]}, outputs={"Out": [out]})
    return out


def lod_tensor_to_array(x, table):
    """A LoDTensorArray (``lod_tensor_to_array_N``) of `x`'s time steps in the order of the rank table `table`:
    entry t holds step t of every sequence longer than t, longest first."""
    _check_tensor("lod_tensor_to_array", "x", x)
    _check_rank_table("lod_tensor_to_array", "table", table)
    helper = LayerHelper("lod_tensor_to_array")
    array = helper.create_variable(name=unique_name.generate("lod_tensor_to_array"), type=_ARRAY, dtype=x.dtype)
    helper.append_op(type="lod_tensor_to_array", inputs={"X": [x], "RankTable": [table]}, outputs={"Out": [array]})
    return array


def array_to_lod_tensor(x, table):
    """The inverse of lod_tensor_to_array: the steps in the array `x` joined into one LoDTensor in the original
    sequence order, its LoD rebuilt from the rank table `table`."""
    _check_array("array_to_lod_tensor", "x", x)
    _check_rank_table("array_to_lod_tensor", "table", table)
    helper = LayerHelper("array_to_lod_tensor")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="array_to_lod_tensor", inputs={"X": [x], "RankTable": [table]}, outputs={"Out": [out]})
    return out


def shrink_memory(x, i, table):
    """The rows of `x` (in rank order) that belong to the sequences of `table` longer than step `i` (an int64
    Variable of shape [1]): DynamicRNN's memory for step i (op ``shrink_rnn_memory``)."""
    _check_tensor("shrink_memory", "x", x)
    check_dtype("shrink_memory", "i", i, ["int64", "int32"])
    _check_rank_table("shrink_memory", "table", table)
    helper = LayerHelper("shrink_memory")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="shrink_rnn_memory", inputs={"X": [x], "I": [i], "RankTable": [table]},
                     outputs={"Out": [out]})
    return out
