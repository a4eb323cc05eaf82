"""Recurrent layers over LoD batches (Fluid 1.8's dynamic_lstm, dynamic_lstmp, dynamic_gru, gru_unit) and the CRF
layers that tag their output: the input is a LoDTensor of already-projected gates; the kernels reorder the batch by
length (kernels/helpers/sequence_batch.h) so that each time step is one GEMM over the sequences still alive. Each
section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- LSTM: dynamic_lstm, dynamic_lstmp

# ---------------------------------------------------------------- GRU: dynamic_gru, gru_unit
__all__ += ["dynamic_gru", "gru_unit"]

# Fluid's names of the GRU activations, and gru_unit's integer codes for them.
_GRU_ACTIVATION_CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}


def _gru_check_activation(layer, arg, value):
    if value not in _GRU_ACTIVATION_CODES:
        raise ValueError("%s: %s must be one of sigmoid, tanh, relu, identity, got %r" % (layer, arg, value))


def _gru_check_2d(layer, arg, var, width, what):
    """var must be a rank-2 Variable whose width (when known) is `width` (`what` says which width)."""
    if not isinstance(var, Variable):
        raise TypeError("%s: %s must be a Variable, got %s" % (layer, arg, type(var).__name__))
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
