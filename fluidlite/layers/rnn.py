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
import collections
import copy

import numpy as np

from .. import unique_name
from ..framework import Variable, VarType, default_main_program, dtype_to_str
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from . import nn, ops, tensor
from .checks import check_dtype, check_variable
from .control_flow import StaticRNN
from .sequence_lod import sequence_mask
from .utils import assert_same_structure, flatten, is_sequence, map_structure, pack_sequence_as

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn", "birnn", "Decoder", "BeamSearchDecoder", "dynamic_decode",
           "DecodeHelper", "TrainingHelper", "GreedyEmbeddingHelper", "SampleEmbeddingHelper", "BasicDecoder"]

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
        max_seq_len = nn.shape(flatten(inputs)[0])[0]
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
    final_states = pack_sequence_as(new_states, [x[-1] for x in stacked[len(flat_outputs):]])
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


# ------------------------------------------------------------------ decoders


class Decoder:
    """The interface ``dynamic_decode`` drives: ``initialize(inits)`` -> ``(initial_inputs, initial_states,
    finished)``; ``step(time, inputs, states, **kwargs)`` -> ``(outputs, next_states, next_inputs, finished)``;
    optionally ``finalize(outputs, final_states, sequence_lengths)`` -> ``(final_outputs, final_states)``.
    ``tracks_own_finished`` says the decoder keeps its finished flags and lengths itself (beams get reordered), so
    dynamic_decode does not OR in the previous step's flags."""

    def initialize(self, inits):
        raise NotImplementedError

    def step(self, time, inputs, states, **kwargs):
        raise NotImplementedError

    def finalize(self, outputs, final_states, sequence_lengths):
        raise NotImplementedError

    @property
    def tracks_own_finished(self):
        return False


class BeamSearchDecoder(Decoder):
    """Beam search over a cell (Fluid 1.8): every step merges the batch and beam dims, calls the cell (then
    `output_fn`), takes log_softmax scores, forces finished beams onto `end_token`, adds the beams' scores, keeps
    the `beam_size` best of the beam_size * vocab candidates of each batch entry (top_k) and reorders the cell
    states, finished flags and lengths by the chosen beams (gather_nd). ``finalize`` traces the beams back with
    gather_tree. Tensors of shape [batch, ...] that the cell reads besides its states (an encoder output) must be
    tiled first: ``BeamSearchDecoder.tile_beam_merge_with_batch(x, beam_size)``."""

    class OutputWrapper(collections.namedtuple("OutputWrapper", ("scores", "predicted_ids", "parent_ids"))):
        """``step``'s outputs: each [batch, beam] (float32, int64, int64)."""

    class StateWrapper(collections.namedtuple("StateWrapper", ("cell_states", "log_probs", "finished", "lengths"))):
        """``step``'s states: the cell states [batch, beam, ...], the beams' scores, finished flags and lengths."""

    def __init__(self, cell, start_token, end_token, beam_size, embedding_fn=None, output_fn=None):
        for arg, v in (("start_token", start_token), ("end_token", end_token), ("beam_size", beam_size)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("BeamSearchDecoder: %s must be an int, got %r" % (arg, v))
        if beam_size < 1:
            raise ValueError("BeamSearchDecoder: beam_size must be >= 1, got %d" % beam_size)
        self.cell = cell
        self.embedding_fn = embedding_fn
        self.output_fn = output_fn
        self.start_token = start_token
        self.end_token = end_token
        self.beam_size = beam_size

    @staticmethod
    def tile_beam_merge_with_batch(x, beam_size):
        """x [batch, ...] -> [batch * beam_size, ...], each batch entry repeated beam_size times in a row."""
        check_variable("BeamSearchDecoder.tile_beam_merge_with_batch", "x", x)
        x = nn.unsqueeze(x, [1])  # [batch, 1, ...]
        expand_times = [1] * len(x.shape)
        expand_times[1] = beam_size
        x = nn.expand(x, expand_times)  # [batch, beam, ...]
        # [..., batch, beam] -> [..., batch * beam] -> [batch * beam, ...]: no -1 but the merged dim at build time
        x = nn.transpose(x, list(range(2, len(x.shape))) + [0, 1])
        x = nn.reshape(x, shape=[0] * (len(x.shape) - 2) + [-1])
        return nn.transpose(x, [len(x.shape) - 1] + list(range(0, len(x.shape) - 1)))

    def _split_batch_beams(self, x):
        return nn.reshape(x, shape=[-1, self.beam_size] + list(x.shape[1:]))

    def _merge_batch_beams(self, x):
        return nn.reshape(x, shape=[-1] + list(x.shape[2:]))

    def _expand_to_beam_size(self, x):
        x = nn.unsqueeze(x, [1])
        expand_times = [1] * len(x.shape)
        expand_times[1] = self.beam_size
        return nn.expand(x, expand_times)

    def _mask_probs(self, probs, finished):
        """Finished beams get 0 for end_token and -1e9 elsewhere; the others keep their log probabilities."""
        finished = tensor.cast(finished, dtype=probs.dtype)
        # [batch, beam, 1] * [vocab] broadcasts both ways: no [batch, beam, vocab] expand as Fluid builds first
        return nn.elementwise_sub(nn.elementwise_mul(nn.unsqueeze(finished, [2]), self.noend_mask_tensor, axis=-1),
                                  nn.elementwise_mul(probs, (finished - 1), axis=0))

    def _gather(self, x, indices, batch_size):
        """x [batch, beam, ...] reordered along the beam dim: out[b, k] = x[b, indices[b, k]]."""
        if batch_size.dtype != indices.dtype:
            batch_size = tensor.cast(batch_size, indices.dtype)
        batch_size.stop_gradient = True
        batch_pos = nn.expand(nn.unsqueeze(tensor.range(0, batch_size, 1, dtype=indices.dtype), [1]),
                              [1, self.beam_size])
        coordinates = nn.stack([batch_pos, indices], axis=2)
        coordinates.stop_gradient = True
        return nn.gather_nd(x, coordinates)

    def initialize(self, initial_cell_states):
        """Inputs: start_token ids [batch, beam] (through embedding_fn); states: the cell states tiled to
        [batch, beam, ...], log_probs [[0, -1e9, ...]] per batch entry (only beam 0 is live), finished False,
        lengths 0; finished."""
        self.kinf = 1e9
        state = flatten(initial_cell_states)[0]
        self.batch_size = nn.shape(state)[0]
        self.start_token_tensor = tensor.fill_constant(shape=[1], dtype="int64", value=self.start_token)
        self.end_token_tensor = tensor.fill_constant(shape=[1], dtype="int64", value=self.end_token)
        init_cell_states = map_structure(self._expand_to_beam_size, initial_cell_states)
        init_inputs = nn.expand(nn.unsqueeze(nn.expand(self.start_token_tensor, [self.batch_size]), [1]),
                                [1, self.beam_size])
        log_probs = nn.expand(tensor.assign(np.array([[0.0] + [-self.kinf] * (self.beam_size - 1)], "float32")),
                              [self.batch_size, 1])
        init_finished = tensor.fill_constant_batch_size_like(input=state, shape=[-1, self.beam_size], dtype="bool",
                                                             value=False, force_cpu=True)
        init_lengths = tensor.zeros_like(init_inputs)
        init_inputs = self.embedding_fn(init_inputs) if self.embedding_fn else init_inputs
        return init_inputs, self.StateWrapper(init_cell_states, log_probs, init_finished, init_lengths), init_finished

    def _beam_search_step(self, time, logits, next_cell_states, beam_state):
        self.vocab_size = logits.shape[-1]
        if self.vocab_size <= 0:
            raise ValueError("BeamSearchDecoder: the vocabulary size (the last dim of the cell's output, after "
                             "output_fn) must be known, got %s %s" % (logits.name, list(logits.shape)))
        if not 0 <= self.end_token < self.vocab_size:
            raise ValueError("BeamSearchDecoder: end_token %d is not in the vocabulary [0, %d)"
                             % (self.end_token, self.vocab_size))
        self.vocab_size_tensor = tensor.fill_constant(shape=[1], dtype="int64", value=self.vocab_size)
        noend = [-self.kinf] * self.vocab_size
        noend[self.end_token] = 0
        self.noend_mask_tensor = tensor.assign(np.array(noend, "float32"))
        step_log_probs = ops.log(nn.softmax(logits))
        step_log_probs = self._mask_probs(step_log_probs, beam_state.finished)
        log_probs = nn.elementwise_add(x=step_log_probs, y=beam_state.log_probs, axis=0)
        scores = nn.reshape(log_probs, [-1, self.beam_size * self.vocab_size])  # no length penalty, as in Fluid
        topk_scores, topk_indices = nn.topk(input=scores, k=self.beam_size)
        beam_indices = nn.elementwise_floordiv(topk_indices, self.vocab_size_tensor)
        token_indices = nn.elementwise_mod(topk_indices, self.vocab_size_tensor)
        next_log_probs = self._gather(nn.reshape(log_probs, [-1, self.beam_size * self.vocab_size]), topk_indices,
                                      self.batch_size)
        next_cell_states = map_structure(lambda x: self._gather(x, beam_indices, self.batch_size), next_cell_states)
        next_finished = self._gather(beam_state.finished, beam_indices, self.batch_size)
        next_lengths = self._gather(beam_state.lengths, beam_indices, self.batch_size)
        next_lengths = next_lengths + tensor.cast(nn.logical_not(next_finished), beam_state.lengths.dtype)
        next_finished = nn.logical_or(next_finished, nn.equal(token_indices, self.end_token_tensor))
        return (self.OutputWrapper(topk_scores, token_indices, beam_indices),
                self.StateWrapper(next_cell_states, next_log_probs, next_finished, next_lengths))

    def step(self, time, inputs, states, **kwargs):
        """One beam search step: ``(OutputWrapper, StateWrapper, next_inputs, finished)``."""
        inputs = map_structure(self._merge_batch_beams, inputs)
        cell_states = map_structure(self._merge_batch_beams, states.cell_states)
        cell_outputs, next_cell_states = self.cell(inputs, cell_states, **kwargs)
        cell_outputs = map_structure(self._split_batch_beams, cell_outputs)
        next_cell_states = map_structure(self._split_batch_beams, next_cell_states)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        beam_search_output, beam_search_state = self._beam_search_step(time=time, logits=cell_outputs,
                                                                       next_cell_states=next_cell_states,
                                                                       beam_state=states)
        finished = beam_search_state.finished
        sample_ids = beam_search_output.predicted_ids
        sample_ids.stop_gradient = True
        next_inputs = self.embedding_fn(sample_ids) if self.embedding_fn else sample_ids
        return beam_search_output, beam_search_state, next_inputs, finished

    def finalize(self, outputs, final_states, sequence_lengths):
        """The full beams: gather_tree(predicted_ids, parent_ids), [time, batch, beam] int64."""
        from .beam_search import gather_tree
        return gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states

    @property
    def tracks_own_finished(self):
        return True


def _tensor_array_layers():
    from . import tensor_array
    return tensor_array


def dynamic_decode(decoder, inits=None, max_step_num=None, output_time_major=False, impute_finished=False,
                   is_test=False, return_length=False, **kwargs):
    """Runs ``decoder.step`` in a While loop until every entry is finished or, with `max_step_num`, the step index
    exceeds it (so at most max_step_num + 1 steps): ``(final_outputs, final_states)``, plus the sequence lengths
    with `return_length`.

    Training (``is_test=False``) keeps every step's inputs and states in tensor arrays, so the loop trains;
    `is_test` overwrites them in place. `impute_finished` copies finished entries' states through unchanged.
    The steps' outputs are stacked [time, batch, ...] (tensor_array_to_tensor), passed to ``decoder.finalize`` if
    it has one, and made batch-major unless `output_time_major`. `kwargs` go to ``decoder.step``."""
    if not isinstance(decoder, Decoder) and not callable(getattr(decoder, "step", None)):
        raise TypeError("dynamic_decode: 'decoder' must be a Decoder, got %s" % type(decoder).__name__)
    if max_step_num is not None and (not isinstance(max_step_num, int) or isinstance(max_step_num, bool)):
        raise TypeError("dynamic_decode: max_step_num must be None or an int, got %r" % (max_step_num,))
    from .control_flow import While
    ta = _tensor_array_layers()
    initial_inputs, initial_states, initial_finished = decoder.initialize(inits)
    global_inputs, global_states, global_finished = initial_inputs, initial_states, initial_finished
    global_finished.stop_gradient = True
    step_idx = tensor.fill_constant(shape=[1], dtype="int64", value=0)

    cond = nn.logical_not(nn.reduce_all(initial_finished))
    if max_step_num is not None:
        max_step_num = tensor.fill_constant(shape=[1], dtype="int64", value=max_step_num)
    while_op = While(cond, is_test=is_test)

    sequence_lengths = tensor.cast(tensor.zeros_like(initial_finished), "int64")
    sequence_lengths.stop_gradient = True

    if is_test:  # reuse the inputs and states variables: nothing is kept for a backward pass
        inputs = map_structure(lambda x: x, initial_inputs)
        states = map_structure(lambda x: x, initial_states)
    else:  # every step's inputs and states are kept for the backward pass
        inputs_arrays = map_structure(lambda x: ta.array_write(x, step_idx), initial_inputs)
        states_arrays = map_structure(lambda x: ta.array_write(x, step_idx), initial_states)

    def _maybe_copy(state, new_state, step_mask):
        """state where step_mask (finished) is true, else new_state."""
        state_dtype = state.dtype
        if state_dtype == VarType.BOOL:
            state = tensor.cast(state, dtype="float32")
            new_state = tensor.cast(new_state, dtype="float32")
        if step_mask.dtype != state.dtype:
            step_mask = tensor.cast(step_mask, dtype=state.dtype)
            step_mask.stop_gradient = True
        new_state = nn.elementwise_sub(nn.elementwise_mul(state, step_mask, axis=0),
                                       nn.elementwise_mul(new_state, (step_mask - 1), axis=0))
        if state_dtype == VarType.BOOL:
            new_state = tensor.cast(new_state, dtype=state_dtype)
        return new_state

    def _create_array_out_of_while(dtype):
        program = default_main_program()
        current = program.current_block_idx
        program.current_block_idx = program.current_block().parent_idx
        try:
            return ta.create_array(dtype_to_str(dtype))
        finally:
            program.current_block_idx = current

    with while_op.block():
        if not is_test:
            inputs = map_structure(lambda array: ta.array_read(array, step_idx), inputs_arrays)
            states = map_structure(lambda array: ta.array_read(array, step_idx), states_arrays)
        outputs, next_states, next_inputs, next_finished = decoder.step(step_idx, inputs, states, **kwargs)
        if not decoder.tracks_own_finished:
            # an entry once finished stays finished; its length stops growing
            next_finished = nn.logical_or(next_finished, global_finished)
            next_sequence_lengths = nn.elementwise_add(
                sequence_lengths, tensor.cast(nn.logical_not(global_finished), sequence_lengths.dtype))
            if impute_finished:
                next_states = map_structure(lambda x, y: _maybe_copy(x, y, global_finished), states, next_states)
        else:  # BeamSearchDecoder reorders its beams, their flags and lengths itself
            next_sequence_lengths = getattr(next_states, "lengths", sequence_lengths)

        # the output arrays live outside the loop; their dtypes are known only now
        outputs_arrays = map_structure(lambda x: _create_array_out_of_while(x.dtype), outputs)
        map_structure(lambda x, x_array: ta.array_write(x, i=step_idx, array=x_array), outputs, outputs_arrays)
        tensor.increment(x=step_idx, value=1.0, in_place=True)
        # finished first: it may also be one of the decoder's states, which would otherwise be written stale
        tensor.assign(next_finished, global_finished)
        tensor.assign(next_sequence_lengths, sequence_lengths)
        if is_test:
            map_structure(tensor.assign, next_inputs, global_inputs)
            map_structure(tensor.assign, next_states, global_states)
        else:
            map_structure(lambda x, x_array: ta.array_write(x, i=step_idx, array=x_array), next_inputs, inputs_arrays)
            map_structure(lambda x, x_array: ta.array_write(x, i=step_idx, array=x_array), next_states, states_arrays)
        if max_step_num is not None:
            nn.logical_and(nn.logical_not(nn.reduce_all(global_finished)), nn.less_equal(step_idx, max_step_num), cond)
        else:
            nn.logical_not(nn.reduce_all(global_finished), cond)

    final_outputs = map_structure(lambda array: ta.tensor_array_to_tensor(array, axis=0, use_stack=True)[0],
                                  outputs_arrays)
    if is_test:
        final_states = global_states
    else:
        final_states = map_structure(lambda array: ta.array_read(array, step_idx), states_arrays)
    try:
        final_outputs, final_states = decoder.finalize(final_outputs, final_states, sequence_lengths)
    except NotImplementedError:
        pass
    if not output_time_major:
        final_outputs = map_structure(_transpose_batch_time, final_outputs)
    return (final_outputs, final_states, sequence_lengths) if return_length else (final_outputs, final_states)


class DecodeHelper:
    """What BasicDecoder asks of a sampling strategy: ``initialize()`` -> ``(initial_inputs, initial_finished)``;
    ``sample(time, outputs, states)`` -> sample ids; ``next_inputs(time, outputs, states, sample_ids)`` ->
    ``(finished, next_inputs, next_states)``."""

    def initialize(self):
        pass

    def sample(self, time, outputs, states):
        pass

    def next_inputs(self, time, outputs, states, sample_ids):
        pass


class TrainingHelper(DecodeHelper):
    """Teacher forcing: step t's input is ``inputs[:, t]`` (``inputs[t]`` if `time_major`); an entry is finished
    once t + 1 reaches its `sequence_length`. Samples are the argmax of the outputs (usually unused)."""

    def __init__(self, inputs, sequence_length, time_major=False):
        check_variable("TrainingHelper", "sequence_length", sequence_length)
        self.inputs = inputs
        self.sequence_length = sequence_length
        self.time_major = time_major
        # one padding step at the end, so the slice of step t + 1 exists at the last step
        self.inputs_ = map_structure(
            lambda x: nn.pad(x, paddings=([0, 1] + [0, 0] * (len(x.shape) - 1)) if time_major
                             else ([0, 0, 0, 1] + [0, 0] * (len(x.shape) - 2))), self.inputs)

    def initialize(self):
        init_finished = nn.equal(self.sequence_length,
                                 tensor.fill_constant(shape=[1], dtype=self.sequence_length.dtype, value=0))
        init_inputs = map_structure(lambda x: x[0] if self.time_major else x[:, 0], self.inputs)
        return init_inputs, init_finished

    def sample(self, time, outputs, states):
        return tensor.argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        if time.dtype != VarType.INT32:
            time = tensor.cast(time, "int32")
        if self.sequence_length.dtype != time.dtype:
            self.sequence_length = tensor.cast(self.sequence_length, time.dtype)
        next_time = time + 1
        finished = nn.less_equal(self.sequence_length, next_time)
        axes = [0 if self.time_major else 1]

        def _slice(x):
            return nn.squeeze(nn.slice(x, axes=axes, starts=[next_time], ends=[next_time + 1]), axes=axes)

        return finished, map_structure(_slice, self.inputs_), states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding: the next input is ``embedding_fn(argmax(outputs))``; an entry is finished when it emits
    `end_token`. `start_tokens` is an int64 [batch] Variable."""

    def __init__(self, embedding_fn, start_tokens, end_token):
        check_variable(type(self).__name__, "start_tokens", start_tokens)
        self.embedding_fn = embedding_fn
        self.start_tokens = start_tokens
        self.end_token = tensor.fill_constant(shape=[1], dtype="int64", value=end_token)

    def initialize(self):
        init_finished = tensor.fill_constant_batch_size_like(input=self.start_tokens, shape=[-1], dtype="bool",
                                                             value=False, force_cpu=True)
        return self.embedding_fn(self.start_tokens), init_finished

    def sample(self, time, outputs, states):
        return tensor.argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        finished = nn.equal(sample_ids, self.end_token)
        return finished, self.embedding_fn(sample_ids), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """As GreedyEmbeddingHelper, but the ids are drawn from ``softmax(outputs / softmax_temperature)``
    (sampling_id, with `seed`)."""

    def __init__(self, embedding_fn, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding_fn, start_tokens, end_token)
        self.softmax_temperature = (tensor.fill_constant(shape=[1], dtype="float32", value=softmax_temperature)
                                    if softmax_temperature is not None else None)
        self.seed = seed

    def sample(self, time, outputs, states):
        logits = outputs / self.softmax_temperature if self.softmax_temperature is not None else outputs
        probs = nn.softmax(logits)
        probs.stop_gradient = True  # sampling_id has no gradient
        return nn.sampling_id(probs, seed=self.seed or 0, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """A cell and a DecodeHelper: each step runs the cell (then `output_fn`), samples with the helper and takes
    the next inputs and finished flags from it. Outputs are ``OutputWrapper(cell_outputs, sample_ids)``."""

    class OutputWrapper(collections.namedtuple("OutputWrapper", ("cell_outputs", "sample_ids"))):
        """``step``'s outputs."""

    def __init__(self, cell, helper, output_fn=None):
        self.cell = cell
        self.helper = helper
        self.output_fn = output_fn

    def initialize(self, initial_cell_states):
        initial_inputs, initial_finished = self.helper.initialize()
        return initial_inputs, initial_cell_states, initial_finished

    def step(self, time, inputs, states, **kwargs):
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(time=time, outputs=cell_outputs,
                                                                     states=cell_states, sample_ids=sample_ids)
        return self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs, finished
