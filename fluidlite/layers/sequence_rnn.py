"""Recurrent layers over LoD batches (Fluid 1.8's dynamic_lstm, dynamic_lstmp, dynamic_gru, gru_unit) and the CRF
layers that tag their output: the input is a LoDTensor of already-projected gates; the kernels reorder the batch by
length (kernels/helpers/sequence_batch.h) so that each time step is one GEMM over the sequences still alive. Each
section lists its own names."""
from ..framework import Variable, convert_np_dtype_to_dtype_, dtype_to_str  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401
from .checks import check_dtype, check_variable  # noqa: F401

__all__ = []

_FLOATS = ("float32", "float64")

# ---------------------------------------------------------------- LSTM: dynamic_lstm, dynamic_lstmp

__all__ += ["dynamic_lstm", "dynamic_lstmp"]


def _lstm_check(layer, input, size, bias_attr, h_0, c_0, dtype):
    """Fluid 1.8's checks of dynamic_lstm / dynamic_lstmp, as ValueError / TypeError naming the layer and the
    variable; returns the hidden size D."""
    check_dtype(layer, "input", input, _FLOATS)
    try:
        dtype_name = dtype_to_str(convert_np_dtype_to_dtype_(dtype))
    except (TypeError, ValueError, KeyError):
        dtype_name = None
    if dtype_name not in ("float32", "float64"):
        raise TypeError("%s: dtype must be 'float32' or 'float64', got %r" % (layer, dtype))
    if dtype_name != dtype_to_str(input.dtype):
        raise TypeError("%s: input %s is %s but dtype (the parameters' and outputs' dtype) is %s: pass dtype=%r"
                        % (layer, input.name, dtype_to_str(input.dtype), dtype_name, dtype_to_str(input.dtype)))
    if bias_attr is False:
        raise ValueError("%s: bias_attr must not be False: the op always adds its gate biases" % layer)
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size % 4:
        raise ValueError("%s: size must be 4 * hidden size (a multiple of 4), got %r" % (layer, size))
    if len(input.shape) != 2 or input.shape[1] not in (-1, size):
        raise ValueError("%s: input %s has width %s but size is %d: input must be [T, size], the projected gate "
                         "inputs (an fc of size 4 * hidden size)" % (layer, input.name,
                                                                     input.shape[-1] if input.shape else None, size))
    for arg, v in (("h_0", h_0), ("c_0", c_0)):
        if v is not None:
            check_dtype(layer, arg, v, _FLOATS)
    if h_0 is not None and c_0 is None:  # the op's rule: c_0 alone is fine, h_0 needs c_0
        raise ValueError("%s: h_0 %s is given without c_0: give both initial states, only c_0, or neither"
                         % (layer, h_0.name))
    return size // 4


def _initial_state(layer, arg, v, width):
    if v is not None and (len(v.shape) != 2 or v.shape[1] not in (-1, width)):
        raise ValueError("%s: %s %s must have shape [batch_size, %d], got %s" % (layer, arg, v.name, width,
                                                                               tuple(v.shape)))


def dynamic_lstm(input, size, h_0=None, c_0=None, param_attr=None, bias_attr=None, use_peepholes=True,
                 is_reverse=False, gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh",
                 dtype="float32", name=None):
    """LSTM over the sequences of a LoD batch (Fluid's dynamic_lstm, op ``lstm``). ``input`` is the LoDTensor
    [T, 4 * D] of projected gate inputs (an fc of size 4 * D, gates ordered candidate, input, forget, output) and
    ``size`` = 4 * D. With peepholes (default) the input and forget gates see c_{t-1} and the output gate c_t.

    Parameters: ``<name>.w_0`` [D, 4 * D] (recurrent weights), ``<name>.b_0`` [1, 7 * D] (gate biases, then the
    peephole weights w_ic, w_fc, w_oc; [1, 4 * D] without peepholes). ``h_0`` / ``c_0``: [N, D] initial states,
    one row per sequence (h_0 needs c_0). Returns (hidden, cell), each [T, D] with input's LoD."""
    d = _lstm_check("dynamic_lstm", input, size, bias_attr, h_0, c_0, dtype)
    _initial_state("dynamic_lstm", "h_0", h_0, d)
    _initial_state("dynamic_lstm", "c_0", c_0, d)
    helper = LayerHelper("lstm", input=input, param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(attr=helper.param_attr, shape=[d, 4 * d], dtype=dtype)
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, (7 if use_peepholes else 4) * d], dtype=dtype,
                                   is_bias=True)
    hidden, cell, batch_gate, batch_cell_pre_act = (helper.create_variable_for_type_inference(dtype)
                                                    for _ in range(4))
    inputs = {"Input": [input], "Weight": [weight], "Bias": [bias]}
    inputs.update({slot: [v] for slot, v in (("H0", h_0), ("C0", c_0)) if v is not None})
    helper.append_op(type="lstm", inputs=inputs,
                     outputs={"Hidden": [hidden], "Cell": [cell], "BatchGate": [batch_gate],
                              "BatchCellPreAct": [batch_cell_pre_act]},
                     attrs={"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
                            "gate_activation": gate_activation, "cell_activation": cell_activation,
                            "candidate_activation": candidate_activation})
    return hidden, cell


def dynamic_lstmp(input, size, proj_size, param_attr=None, bias_attr=None, use_peepholes=True, is_reverse=False,
                  gate_activation="sigmoid", cell_activation="tanh", candidate_activation="tanh",
                  proj_activation="tanh", dtype="float32", name=None, h_0=None, c_0=None, cell_clip=None,
                  proj_clip=None):
    """LSTM with a recurrent projection (Fluid's dynamic_lstmp, op ``lstmp``): as dynamic_lstm, but the recurrence
    feeds back r_t = proj_activation(h_t W_proj) of width ``proj_size`` = P. (As in Fluid 1.8's kernels, any
    proj_activation but "identity" applies cell_activation.) ``cell_clip`` / ``proj_clip`` clip the cell state and
    the projection to [-clip, clip] (None: no clipping).

    Parameters: ``<name>.w_0`` [P, 4 * D] (recurrent weights), ``<name>.w_1`` [D, P] (projection; both take
    ``param_attr``, as in Fluid), ``<name>.b_0`` [1, 7 * D] or [1, 4 * D]. ``h_0`` [N, P] (the initial projection)
    and ``c_0`` [N, D] (h_0 needs c_0). Returns (projection [T, P], cell [T, D]), each with input's LoD."""
    d = _lstm_check("dynamic_lstmp", input, size, bias_attr, h_0, c_0, dtype)
    if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size <= 0:
        raise ValueError("dynamic_lstmp: proj_size must be a positive int, got %r" % (proj_size,))
    _initial_state("dynamic_lstmp", "h_0", h_0, proj_size)
    _initial_state("dynamic_lstmp", "c_0", c_0, d)
    attrs = {"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
             "gate_activation": gate_activation, "cell_activation": cell_activation,
             "candidate_activation": candidate_activation, "proj_activation": proj_activation}
    for arg, v in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        if v is None:  # Fluid leaves the op's default (0: no clipping)
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise ValueError("dynamic_lstmp: %s must not be negative, got %r" % (arg, v))
        attrs[arg] = float(v)
    helper = LayerHelper("lstmp", input=input, param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(attr=helper.param_attr, shape=[proj_size, 4 * d], dtype=dtype)
    proj_weight = helper.create_parameter(attr=helper.param_attr, shape=[d, proj_size], dtype=dtype)
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, (7 if use_peepholes else 4) * d], dtype=dtype,
                                   is_bias=True)
    # Fluid also creates an unused "ordered_proj0" temporary third; made here too so temporaries keep its names.
    projection, cell, _ordered_proj0, batch_hidden, batch_gate, batch_cell_pre_act = (
        helper.create_variable_for_type_inference(dtype) for _ in range(6))
    inputs = {"Input": [input], "Weight": [weight], "ProjWeight": [proj_weight], "Bias": [bias]}
    inputs.update({slot: [v] for slot, v in (("H0", h_0), ("C0", c_0)) if v is not None})
    helper.append_op(type="lstmp", inputs=inputs,
                     outputs={"Projection": [projection], "Cell": [cell], "BatchHidden": [batch_hidden],
                              "BatchGate": [batch_gate], "BatchCellPreAct": [batch_cell_pre_act]},
                     attrs=attrs)
    return projection, cell


# ---------------------------------------------------------------- GRU: dynamic_gru, gru_unit
__all__ += ["dynamic_gru", "gru_unit"]

# Fluid's names of the GRU activations, and gru_unit's integer codes for them.
_GRU_ACTIVATION_CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}


def _gru_check_activation(layer, arg, value):
    if value not in _GRU_ACTIVATION_CODES:
        raise ValueError("%s: %s must be one of sigmoid, tanh, relu, identity, got %r" % (layer, arg, value))


def _gru_check_2d(layer, arg, var, width, what):
    """var must be a rank-2 Variable whose width (when known) is `width` (`what` says which width)."""
    check_variable(layer, arg, var)
    if len(var.shape) != 2:
        raise ValueError("%s: %s %s must have rank 2, got shape %s" % (layer, arg, var.name, tuple(var.shape)))
    if var.shape[1] >= 0 and var.shape[1] != width:
        raise ValueError("%s: %s %s must have width %s = %d, got shape %s"
                         % (layer, arg, var.name, what, width, tuple(var.shape)))


def dynamic_gru(input, size, param_attr=None, bias_attr=None, is_reverse=False, gate_activation="sigmoid",
                candidate_activation="tanh", h_0=None, origin_mode=False):
    """A GRU layer over the sequences of a LoD batch (Fluid 1.8's dynamic_gru, op ``gru``).

    ``input`` is the LoDTensor [T, 3 * size] of already projected gate inputs (an ``fc`` of width 3 * size before
    this layer), in the order update, reset, candidate. For each step of each sequence::

        u, r = gate_activation(x_u + h_prev W_u + b_u), gate_activation(x_r + h_prev W_r + b_r)
        c    = candidate_activation(x_c + (r * h_prev) W_c + b_c)
        h    = (1 - u) * h_prev + u * c        (origin_mode=True: u * h_prev + (1 - u) * c)

    ``h_0`` [N, size] is the initial hidden state of each of the N sequences (default zeros); ``is_reverse`` runs
    each sequence from its last step to its first. Parameters: the weight ``[size, 3 * size]`` (its first
    size * 2 size elements are [W_u | W_r], the last size * size elements W_c) and the bias ``[1, 3 * size]``
    (none with ``bias_attr=False``).

    Returns the hidden states [T, size], with ``input``'s LoD.
    """
    layer = "dynamic_gru"
    size = int(size)
    if size < 1:
        raise ValueError("%s: size must be >= 1, got %d" % (layer, size))
    _gru_check_2d(layer, "input", input, 3 * size, "3 * size")
    _gru_check_activation(layer, "gate_activation", gate_activation)
    _gru_check_activation(layer, "candidate_activation", candidate_activation)
    helper = LayerHelper("gru", input=input, param_attr=param_attr, bias_attr=bias_attr)
    dtype = helper.input_dtype()
    weight = helper.create_parameter(attr=helper.param_attr, shape=[size, 3 * size], dtype=dtype)
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, 3 * size], dtype=dtype, is_bias=True)
    inputs = {"Input": [input], "Weight": [weight]}
    if bias is not None:
        inputs["Bias"] = [bias]
    if h_0 is not None:
        _gru_check_2d(layer, "h_0", h_0, size, "size")
        inputs["H0"] = [h_0]
    hidden = helper.create_variable_for_type_inference(dtype)
    batch_gate = helper.create_variable_for_type_inference(dtype)
    batch_reset_hidden_prev = helper.create_variable_for_type_inference(dtype)
    batch_hidden = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="gru", inputs=inputs,
                     outputs={"Hidden": [hidden], "BatchGate": [batch_gate],
                              "BatchResetHiddenPrev": [batch_reset_hidden_prev], "BatchHidden": [batch_hidden]},
                     attrs={"is_reverse": bool(is_reverse), "gate_activation": gate_activation,
                            "activation": candidate_activation, "origin_mode": bool(origin_mode)})
    return hidden


def gru_unit(input, hidden, size, param_attr=None, bias_attr=None, activation="tanh", gate_activation="sigmoid",
             origin_mode=False):
    """One GRU step (Fluid 1.8's gru_unit, op ``gru_unit``): the cell of dynamic_gru on a batch.

    ``input`` [N, size] holds the projected gate inputs (update, reset, candidate) and ``hidden`` [N, size // 3]
    the previous hidden state; ``size`` is the gate width, 3 * D. The weight is ``[D, 3 * D]`` and the bias
    ``[1, 3 * D]`` (none with ``bias_attr=False``). ``activation`` (candidate) and ``gate_activation`` are sigmoid,
    tanh, relu or identity.

    Returns ``(updated_hidden [N, D], reset_hidden_pre [N, D], gate [N, 3 * D])``: the new hidden state,
    r * hidden, and the activated update gate, reset gate and candidate.
    """
    layer = "gru_unit"
    _gru_check_activation(layer, "activation", activation)
    _gru_check_activation(layer, "gate_activation", gate_activation)
    d = int(size) // 3
    if d < 1:
        raise ValueError("%s: size must be 3 * D with D >= 1 (the gate width), got %d" % (layer, size))
    _gru_check_2d(layer, "input", input, 3 * d, "3 * (size // 3)")
    _gru_check_2d(layer, "hidden", hidden, d, "size // 3")
    helper = LayerHelper("gru_unit", input=input, param_attr=param_attr, bias_attr=bias_attr)
    dtype = helper.input_dtype()
    weight = helper.create_parameter(attr=helper.param_attr, shape=[d, 3 * d], dtype=dtype)
    gate = helper.create_variable_for_type_inference(dtype)
    reset_hidden_pre = helper.create_variable_for_type_inference(dtype)
    updated_hidden = helper.create_variable_for_type_inference(dtype)
    inputs = {"Input": [input], "HiddenPrev": [hidden], "Weight": [weight]}
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, 3 * d], dtype=dtype, is_bias=True)
    if bias is not None:
        inputs["Bias"] = [bias]
    helper.append_op(type="gru_unit", inputs=inputs,
                     outputs={"Gate": [gate], "ResetHiddenPrev": [reset_hidden_pre], "Hidden": [updated_hidden]},
                     attrs={"activation": _GRU_ACTIVATION_CODES[activation],
                            "gate_activation": _GRU_ACTIVATION_CODES[gate_activation],
                            "origin_mode": bool(origin_mode)})
    return updated_hidden, reset_hidden_pre, gate


# ---------------------------------------------------------------- CRF: linear_chain_crf, crf_decoding, chunk_eval
# The ops are kernels/linear_chain_crf.cc, crf_decoding.cc and chunk_eval.cc (their shared checks: helpers/crf.h).
# Each takes a LoDTensor (the sequences are its last LoD level) or, given a length, a padded [N, L, ...] tensor.

__all__ += ["linear_chain_crf", "crf_decoding", "chunk_eval"]


def _crf_tags(layer, input, length):
    """The tag count D of an emission [T, D] (LoD form) or [N, L, D] (padded: a length is given)."""
    rank = 2 if length is None else 3
    if len(input.shape) != rank:
        raise ValueError("%s: input %s must have rank %d (%s), got shape %s" % (
            layer, input.name, rank, "[T, D], a LoDTensor" if length is None else "[N, L, D], padded with length",
            list(input.shape)))
    if input.shape[-1] <= 0:
        raise ValueError("%s: input %s must have a known number of tags (its last dim), got shape %s"
                         % (layer, input.name, list(input.shape)))
    return input.shape[-1]


def linear_chain_crf(input, label, param_attr=None, length=None):
    """The negative log-likelihood of each sequence's tags under a linear-chain CRF (Fluid's linear_chain_crf).

    input: the unscaled emission scores, float32 / float64, a LoDTensor [T, D] or, with `length`, padded [N, L, D].
    label: the true tags, int64 [T, 1] with input's LoD, or [N, L] / [N, L, 1].
    param_attr: the transition parameter [D + 2, D] (row 0 start weights, row 1 end weights, row 2 + j the weights
        from tag j to each tag); name it to share it with crf_decoding.
    length: int64 [N] or [N, 1], the true length of each padded row (the padded form).

    Returns LogLikelihood [S, 1], one row per sequence: log Z - score(label), the negative log-likelihood (0 for an
    empty sequence); take its mean as the loss.
    """
    check_dtype("linear_chain_crf", "input", input, ("float32", "float64"))
    check_dtype("linear_chain_crf", "label", label, ("int64",))
    if length is not None:
        check_dtype("linear_chain_crf", "length", length, ("int64",))
    size = _crf_tags("linear_chain_crf", input, length)
    helper = LayerHelper("linear_chain_crf", input=input, param_attr=param_attr)
    transition = helper.create_parameter(attr=helper.param_attr, shape=[size + 2, size], dtype=input.dtype)
    alpha, emission_exps, transition_exps, log_likelihood = (
        helper.create_variable_for_type_inference(dtype=input.dtype) for _ in range(4))
    inputs = {"Emission": [input], "Transition": [transition], "Label": [label]}
    if length is not None:
        inputs["Length"] = [length]
    helper.append_op(type="linear_chain_crf", inputs=inputs,
                     outputs={"Alpha": [alpha], "EmissionExps": [emission_exps], "TransitionExps": [transition_exps],
                              "LogLikelihood": [log_likelihood]})
    return log_likelihood


def crf_decoding(input, param_attr, label=None, length=None):
    """The Viterbi path of each sequence under the CRF that linear_chain_crf trained (Fluid's crf_decoding).

    input: the emission scores, float32 / float64, a LoDTensor [T, D] or, with `length`, padded [N, L, D].
    param_attr: a ParamAttr (or name) naming the transition parameter linear_chain_crf created, e.g.
        fluid.ParamAttr(name='crfw'); it must already exist in the main program.
    label: int64 tags like linear_chain_crf's; given, the result is 1 where the decoded tag equals it, else 0.
    length: int64 [N] or [N, 1], the true length of each padded row (the padded form).

    Returns ViterbiPath, int64 [T, 1] with input's LoD (or [N, L], padding positions 0).
    """
    from ..framework import Parameter, VarType
    from ..param_attr import ParamAttr
    check_dtype("crf_decoding", "input", input, ("float32", "float64"))
    if label is not None:
        check_dtype("crf_decoding", "label", label, ("int64",))
    if length is not None:
        check_dtype("crf_decoding", "length", length, ("int64",))
    _crf_tags("crf_decoding", input, length)
    attr = ParamAttr._to_attr(param_attr)
    if attr is False or attr.name is None:
        raise ValueError("crf_decoding: param_attr must name the transition parameter that linear_chain_crf created "
                         "(e.g. fluid.ParamAttr(name='crfw')), got %r" % (param_attr,))
    helper = LayerHelper("crf_decoding", input=input)
    block = helper.main_program.global_block()
    transition = block._find_var(attr.name) if block.has_var(attr.name) else None
    if not isinstance(transition, Parameter):
        raise ValueError("crf_decoding: no parameter named '%s' in the main program: create it first with "
                         "linear_chain_crf(..., param_attr=fluid.ParamAttr(name='%s'))" % (attr.name, attr.name))
    viterbi_path = helper.create_variable_for_type_inference(dtype=VarType.INT64)
    inputs = {"Emission": [input], "Transition": [transition]}
    if label is not None:
        inputs["Label"] = [label]
    if length is not None:
        inputs["Length"] = [length]
    helper.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": [viterbi_path]})
    return viterbi_path


def chunk_eval(input, label, chunk_scheme, num_chunk_types, excluded_chunk_types=None, seq_length=None):
    """Precision, recall and F1 of chunk detection (Fluid's chunk_eval), e.g. on crf_decoding's output.

    input / label: int64 tag ids of the same shape and LoD, [T, 1] LoDTensors or padded [N, L] / [N, L, 1] with
        `seq_length`. An id is chunk_type * num_tag_types + tag_type, with the tag types of `chunk_scheme` ("IOB":
        B 0, I 1; "IOE": I 0, E 1; "IOBES": B 0, I 1, E 2, S 3; "plain": one), and num_chunk_types * num_tag_types
        is O (outside every chunk).
    excluded_chunk_types: chunk types not counted.
    seq_length: int64 [N] or [N, 1], the length of each padded row.

    Returns (precision, recall, f1_score, num_infer_chunks, num_label_chunks, num_correct_chunks), each [1]: the
    first three float32, the counts int64 (accumulate the counts with fluid.metrics.ChunkEvaluator).
    """
    check_dtype("chunk_eval", "input", input, ("int64",))
    check_dtype("chunk_eval", "label", label, ("int64",))
    if seq_length is not None:
        check_dtype("chunk_eval", "seq_length", seq_length, ("int64",))
    if chunk_scheme not in ("IOB", "IOE", "IOBES", "plain"):
        raise ValueError("chunk_eval: chunk_scheme must be 'IOB', 'IOE', 'IOBES' or 'plain', got %r" % (chunk_scheme,))
    if isinstance(num_chunk_types, bool) or not isinstance(num_chunk_types, int) or num_chunk_types < 0:
        raise ValueError("chunk_eval: num_chunk_types must be an int >= 0, got %r" % (num_chunk_types,))
    helper = LayerHelper("chunk_eval", input=input)
    outs = [helper.create_variable_for_type_inference(dtype=d) for d in ["float32"] * 3 + ["int64"] * 3]
    inputs = {"Inference": [input], "Label": [label]}
    if seq_length is not None:
        inputs["SeqLength"] = [seq_length]
    slots = ["Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks", "NumCorrectChunks"]
    helper.append_op(type="chunk_eval", inputs=inputs, outputs={s: [v] for s, v in zip(slots, outs)},
                     attrs={"num_chunk_types": num_chunk_types, "chunk_scheme": chunk_scheme,
                            "excluded_chunk_types": list(excluded_chunk_types or [])})
    return tuple(outs)
