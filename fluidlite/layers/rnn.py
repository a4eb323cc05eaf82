"""The RNN cell API of Fluid 1.7/1.8 (``layers/rnn.py``): cells that map (inputs, states) to (outputs, new states),
and ``rnn``, which unrolls a cell over the time steps of its inputs with ``StaticRNN``.

    cell = fluid.layers.GRUCell(hidden_size=128)
    outputs, final_state = fluid.layers.rnn(cell, inputs=emb, sequence_length=lengths)   # emb: [batch, time, D]

Inputs, states and outputs may be a Variable or any nested structure of Variables (``layers/utils.py``).
``GRUCell`` and ``LSTMCell`` build Fluid 1.8's ``contrib.layers.rnn_impl.BasicGRUUnit`` / ``BasicLSTMUnit``
graphs from ordinary ops, with their parameter names and shapes, so parameters saved by Fluid load:

    GRUCell:  <name>/BasicGRUUnit_N.w_0 [D+H, 2H] (gates r|u), .w_1 [D+H, H] (candidate), .b_0 [2H], .b_1 [H]
    LSTMCell: <name>/BasicLSTMUnit_N.w_0 [D+H, 4H] (gates i|c~|f|o), .b_0 [4H]

(a named ``param_attr``/``bias_attr`` gives GRUCell ``<attr name>_gate`` and ``<attr name>_candidate``).
"""
import copy

from .. import unique_name
from ..framework import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from . import nn, ops, tensor
from .checks import check_dtype, check_variable
from .control_flow import StaticRNN
from .sequence_lod import sequence_mask
from .utils import assert_same_structure, flatten, is_sequence, map_structure, pack_sequence_as

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn", "birnn"]

_FLOATS = ("float32", "float64")


class RNNCell:
    """The base class of cells: ``call(inputs, states, **kwargs)`` returns ``(outputs, new_states)``, where
    ``new_states`` has the structure of ``states``. ``state_shape`` (and optionally ``state_dtype``) describe the
    states, for ``get_initial_states``."""

    def call(self, inputs, states, **kwargs):
        raise NotImplementedError("RNNCell must implent the call function.")

    def __call__(self, inputs, states, **kwargs):
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref, shape=None, dtype=None, init_value=0, batch_dim_idx=0):
        """States filled with `init_value`, shaped `shape` (default ``state_shape``; each shape a list of ints, a
        leading -1 for the batch added when missing), of `dtype` (default ``state_dtype``, else float32; a single
        dtype serves every state), with the batch size read at run time from dim `batch_dim_idx` of the first
        Variable of `batch_ref`."""
        refs = flatten(batch_ref)
        if not refs:
            raise ValueError("RNNCell.get_initial_states: batch_ref holds no Variable")
        check_dtype("RNNCell.get_initial_states", "batch_ref", refs[0], _FLOATS + ("int32", "int64"))
        ref = refs[0]
        if not isinstance(batch_dim_idx, int) or not -len(ref.shape) <= batch_dim_idx < len(ref.shape):
            raise ValueError("RNNCell.get_initial_states: batch_dim_idx %r is not a dim of batch_ref %s %s"
                             % (batch_dim_idx, ref.name, list(ref.shape)))
        shapes = _map_shapes(_with_batch_dim, self.state_shape if shape is None else shape)
        if dtype is None:
            try:
                dtype = self.state_dtype
            except NotImplementedError:
                dtype = "float32"
        dtypes = flatten(dtype)
        if len(dtypes) == 1:
            dtype = map_structure(lambda _: dtypes[0], shapes)
        return map_structure(
            lambda s, dt: tensor.fill_constant_batch_size_like(input=ref, shape=s.dims, dtype=dt, value=init_value,
                                                               input_dim_idx=batch_dim_idx % len(ref.shape)),
            shapes, dtype)

    @property
    def state_shape(self):
        raise NotImplementedError("Please add implementaion for `state_shape` in the used cell.")

    @property
    def state_dtype(self):
        raise NotImplementedError("Please add implementaion for `state_dtype` in the used cell.")


class _Shape:
    """One state's shape as a leaf of a structure (a bare list of ints would be walked as a sequence)."""

    def __init__(self, dims):
        self.dims = dims


def _with_batch_dim(dims):
    dims = [int(d) for d in dims]
    return _Shape(dims if dims and dims[0] == -1 else [-1] + dims)


def _map_shapes(fn, shapes):
    """`shapes` (a list of ints, or any nesting of such lists) with each list of ints replaced by fn(list)."""
    if isinstance(shapes, (list, tuple)) and all(isinstance(d, int) for d in shapes):
        return fn(shapes)
    if isinstance(shapes, dict):
        return type(shapes)((k, _map_shapes(fn, v)) for k, v in shapes.items())
    if is_sequence(shapes):
        children = [_map_shapes(fn, s) for s in shapes]
        return type(shapes)(*children) if hasattr(shapes, "_fields") else type(shapes)(children)
    raise TypeError("RNNCell.get_initial_states: a state shape must be a list or tuple of ints, got %r" % (shapes,))


class _CellParams:
    """The parameters of Fluid 1.8's BasicGRUUnit / BasicLSTMUnit: named after ``unique_name(<name>/<unit>)`` as
    that dygraph Layer's static-graph helper names them, created on the cell's first call, when the input width
    is known (Layer._build_once)."""

    def __init__(self, name_scope, unit):
        unique_name.generate(name_scope)  # the dygraph Layer's own name, drawn too in Fluid (keeps counters equal)
        self.helper = LayerHelper(unit, name=unique_name.generate(name_scope + "/" + unit))

    def create(self, attr, suffix, shape, dtype, is_bias=False):
        """A parameter of `shape`; a named `attr` gets `suffix` appended to its name (suffix None: unchanged)."""
        attr = ParamAttr._to_attr(attr)
        if attr is False:
            return None
        if suffix and attr.name is not None:
            attr = copy.deepcopy(attr)
            attr.name += suffix
        return self.helper.create_parameter(attr=attr, shape=shape, dtype=dtype, is_bias=is_bias)


def _add_bias(x, bias):
    return x if bias is None else nn.elementwise_add(x, bias)


def _input_width(layer, x):
    width = x.shape[-1] if x.shape else -1
    if width <= 0:
        raise ValueError("%s: the last dim of inputs %s %s must be known when the cell is first called (its weights "
                         "are [input width + hidden_size, ...])" % (layer, x.name, list(x.shape)))
    return width


class GRUCell(RNNCell):
    """Gated recurrent unit (Fluid 1.8 GRUCell over BasicGRUUnit), in the "origin" form:

        r, u = act_g([x, h] W_gate + b_gate)              (split in this order)
        c    = act_c([x, r * h] W_candidate + b_candidate)
        h'   = u * h + (1 - u) * c

    ``gate_activation`` / ``activation`` are layer functions (default ``layers.sigmoid`` / ``layers.tanh``).
    ``call`` returns ``(h', h')``; ``state_shape`` is ``[hidden_size]``."""

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None, activation=None,
                 dtype="float32", name="GRUCell"):
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
            raise TypeError("GRUCell: hidden_size must be a positive int, got %r" % (hidden_size,))
        if dtype not in _FLOATS:
            raise TypeError("GRUCell: dtype must be float32 or float64, got %r" % (dtype,))
        self.hidden_size = hidden_size
        self._param_attr, self._bias_attr = param_attr, bias_attr
        self._gate_activation = gate_activation or ops.sigmoid
        self._activation = activation or ops.tanh
        self._dtype = dtype
        self._params = _CellParams(name, "BasicGRUUnit")
        self._weights = None

    def _build(self, inputs):
        h, d = self.hidden_size, _input_width("GRUCell", inputs)
        p = self._params
        self._weights = (p.create(self._param_attr, "_gate", [d + h, 2 * h], self._dtype),
                         p.create(self._param_attr, "_candidate", [d + h, h], self._dtype),
                         p.create(self._bias_attr, "_gate", [2 * h], self._dtype, is_bias=True),
                         p.create(self._bias_attr, "_candidate", [h], self._dtype, is_bias=True))

    def call(self, inputs, states):
        check_dtype("GRUCell", "inputs", inputs, _FLOATS)
        check_dtype("GRUCell", "states", states, _FLOATS)
        if self._weights is None:
            self._build(inputs)
        gate_w, cand_w, gate_b, cand_b = self._weights
        gates = self._gate_activation(_add_bias(nn.matmul(tensor.concat([inputs, states], 1), gate_w), gate_b))
        r, u = nn.split(gates, num_or_sections=2, dim=1)
        c = self._activation(_add_bias(nn.matmul(tensor.concat([inputs, r * states], 1), cand_w), cand_b))
        new_hidden = u * states + (1 - u) * c
        return new_hidden, new_hidden

    @property
    def state_shape(self):
        return [self.hidden_size]

    @property
    def state_dtype(self):
        return self._dtype


class LSTMCell(RNNCell):
    """Long short-term memory (Fluid 1.8 LSTMCell over BasicLSTMUnit):

        i, c~, f, o = split([x, h] W + b, 4)
        c' = c * act_g(f + forget_bias) + act_g(i) * act_c(c~)
        h' = act_c(c') * act_g(o)

    ``forget_bias`` is a [1] constant created with the cell. ``call(inputs, [h, c])`` returns ``(h', [h', c'])``;
    ``state_shape`` is ``[[hidden_size], [hidden_size]]``."""

    def __init__(self, hidden_size, param_attr=None, bias_attr=None, gate_activation=None, activation=None,
                 forget_bias=1.0, dtype="float32", name="LSTMCell"):
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
            raise TypeError("LSTMCell: hidden_size must be a positive int, got %r" % (hidden_size,))
        if dtype not in _FLOATS:
            raise TypeError("LSTMCell: dtype must be float32 or float64, got %r" % (dtype,))
        self.hidden_size = hidden_size
        self._param_attr, self._bias_attr = param_attr, bias_attr
        self._gate_activation = gate_activation or ops.sigmoid
        self._activation = activation or ops.tanh
        self._dtype = dtype
        self._params = _CellParams(name, "BasicLSTMUnit")
        self._forget_bias = tensor.fill_constant([1], dtype=dtype, value=forget_bias)
        self._forget_bias.stop_gradient = False  # as in Fluid
        self._weights = None

    def _build(self, inputs):
        h, d = self.hidden_size, _input_width("LSTMCell", inputs)
        p = self._params
        self._weights = (p.create(self._param_attr, None, [d + h, 4 * h], self._dtype),
                         p.create(self._bias_attr, None, [4 * h], self._dtype, is_bias=True))

    def call(self, inputs, states):
        check_dtype("LSTMCell", "inputs", inputs, _FLOATS)
        if not isinstance(states, list) or len(states) != 2:
            raise TypeError("LSTMCell: 'states' must be a list [hidden, cell] of two Variables, got %r" % (states,))
        for i, s in enumerate(states):
            check_dtype("LSTMCell", "states[%d]" % i, s, _FLOATS)
        if self._weights is None:
            self._build(inputs)
        weight, bias = self._weights
        pre_hidden, pre_cell = states
        gates = _add_bias(nn.matmul(tensor.concat([inputs, pre_hidden], 1), weight), bias)
        i, j, f, o = nn.split(gates, num_or_sections=4, dim=-1)
        act_g, act_c = self._gate_activation, self._activation
        new_cell = nn.elementwise_add(nn.elementwise_mul(pre_cell, act_g(nn.elementwise_add(f, self._forget_bias))),
                                      nn.elementwise_mul(act_g(i), act_c(j)))
        new_hidden = act_c(new_cell) * act_g(o)
        return new_hidden, [new_hidden, new_cell]

    @property
    def state_shape(self):
        return [[self.hidden_size], [self.hidden_size]]

    @property
    def state_dtype(self):
        return self._dtype


# ------------------------------------------------------------------ rnn


def _transpose_batch_time(x):
    return nn.transpose(x, [1, 0] + list(range(2, len(x.shape))))


def _index0(x, i):
    """x[i] along dim 0, the dim dropped (Fluid's Variable.__getitem__ with an int: slice with decrease_axis)."""
    helper = LayerHelper("slice")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="slice", inputs={"Input": [x]}, outputs={"Out": [out]},
                     attrs={"axes": [0], "starts": [i], "ends": [i + 1 if i != -1 else 10000000],
                            "decrease_axis": [0]})
    return out


def _maybe_copy(state, new_state, step_mask):
    """new_state where step_mask (a [batch] 1/0 vector) is 1, state where it is 0, as Fluid writes it:
    new * m - state * (m - 1)."""
    return nn.elementwise_sub(nn.elementwise_mul(new_state, step_mask, axis=0),
                              nn.elementwise_mul(state, step_mask - 1, axis=0))


def rnn(cell, inputs, initial_states=None, sequence_length=None, time_major=False, is_reverse=False, **kwargs):
    """Unrolls `cell` over the time steps of `inputs` with StaticRNN: ``(final_outputs, final_states)``.

    `inputs`: a Variable or nested structure, each ``[batch, time, ...]`` (``[time, batch, ...]`` if
    `time_major`). `initial_states` default to ``cell.get_initial_states(inputs)``. With `sequence_length` (int
    [batch]), a step past a sequence's length keeps its previous states (its outputs are still computed). With
    `is_reverse` the steps run from the last to the first and the outputs are put back in input order. `kwargs` go
    to ``cell.call`` (Variables outside the step, e.g. an encoder output for attention). `final_outputs` stack every
    step's outputs in `inputs`' layout; `final_states` are the states after the last step (with
    `sequence_length`, each sequence's states after its own last step)."""
    if not isinstance(cell, RNNCell) and not callable(getattr(cell, "call", None)):
        raise TypeError("rnn: 'cell' must be an RNNCell (or have a call method), got %s" % type(cell).__name__)
    if not isinstance(inputs, (Variable, list, tuple, dict)):
        raise TypeError("rnn: 'inputs' must be a Variable or a nested structure of Variables, got %s"
                        % type(inputs).__name__)
    flat_inputs = flatten(inputs)
    if not flat_inputs:
        raise ValueError("rnn: 'inputs' holds no Variable")
    for i, x in enumerate(flat_inputs):
        check_dtype("rnn", "inputs[%d]" % i, x, _FLOATS)
        if len(x.shape) < 2:
            raise ValueError("rnn: inputs[%d] %s %s needs a batch and a time dim" % (i, x.name, list(x.shape)))
    if initial_states is not None and not isinstance(initial_states, (Variable, list, tuple, dict)):
        raise TypeError("rnn: 'initial_states' must be None, a Variable or a nested structure of Variables, got %s"
                        % type(initial_states).__name__)
    if sequence_length is not None:
        check_dtype("rnn", "sequence_length", sequence_length, ("int32", "int64"))

    if initial_states is None:
        initial_states = cell.get_initial_states(batch_ref=inputs, batch_dim_idx=1 if time_major else 0)
    for s in flatten(initial_states):
        check_variable("rnn", "initial_states", s)
        s.stop_gradient = False  # gradients flow into given initial states (Fluid's _switch_grad)

    if not time_major:
        inputs = map_structure(_transpose_batch_time, inputs)
    mask = None
    if sequence_length is not None:
        max_seq_len = _index0(nn.shape(flatten(inputs)[0]), 0)
        mask = sequence_mask(sequence_length, maxlen=max_seq_len, dtype=flatten(initial_states)[0].dtype)
        mask = nn.transpose(mask, [1, 0])  # [time, batch]
    if is_reverse:
        inputs = map_structure(lambda x: tensor.reverse(x, axis=[0]), inputs)
        if mask is not None:
            mask = tensor.reverse(mask, axis=[0])

    static_rnn = StaticRNN()
    with static_rnn.step():
        step_inputs = map_structure(static_rnn.step_input, inputs)
        states = map_structure(static_rnn.memory, initial_states)
        outputs, new_states = cell.call(step_inputs, map_structure(lambda x: x, states), **kwargs)
        assert_same_structure(states, new_states)
        if mask is not None:
            step_mask = static_rnn.step_input(mask)
            new_states = map_structure(lambda s, n: _maybe_copy(s, n, step_mask), states, new_states)
        map_structure(static_rnn.update_memory, states, new_states)
        flat_outputs = flatten(outputs)
        map_structure(static_rnn.step_output, outputs)
        map_structure(static_rnn.step_output, new_states)

    stacked = static_rnn()
    stacked = stacked if isinstance(stacked, list) else [stacked]
    final_outputs = pack_sequence_as(outputs, stacked[:len(flat_outputs)])
    final_states = pack_sequence_as(new_states, [_index0(x, -1) for x in stacked[len(flat_outputs):]])
    if is_reverse:
        final_outputs = map_structure(lambda x: tensor.reverse(x, axis=[0]), final_outputs)
    if not time_major:
        final_outputs = map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_states


def birnn(cell_fw, cell_bw, inputs, initial_states=None, sequence_length=None, time_major=False, **kwargs):
    """A forward and a reverse ``rnn`` over the same inputs (Paddle 2.0's ``fluid.layers.birnn``; Fluid 1.8 has
    none): ``(outputs, (states_fw, states_bw))``, the two outputs concatenated on the last axis.
    `initial_states` is ``(states_fw, states_bw)`` or None (each cell's own ``get_initial_states``)."""
    if initial_states is None:
        states_fw = cell_fw.get_initial_states(batch_ref=inputs, batch_dim_idx=1 if time_major else 0)
        states_bw = cell_bw.get_initial_states(batch_ref=inputs, batch_dim_idx=1 if time_major else 0)
    else:
        if not isinstance(initial_states, (list, tuple)) or len(initial_states) != 2:
            raise TypeError("birnn: 'initial_states' must be (states_fw, states_bw), got %r" % (initial_states,))
        states_fw, states_bw = initial_states
    outputs_fw, states_fw = rnn(cell_fw, inputs, states_fw, sequence_length, time_major=time_major, **kwargs)
    outputs_bw, states_bw = rnn(cell_bw, inputs, states_bw, sequence_length, time_major=time_major, is_reverse=True,
                                **kwargs)
    outputs = map_structure(lambda x, y: tensor.concat([x, y], -1), outputs_fw, outputs_bw)
    return outputs, (states_fw, states_bw)
