"""Recurrent layers over LoD batches (Fluid 1.8's dynamic_lstm, dynamic_lstmp, dynamic_gru, gru_unit) and the CRF
layers that tag their output: the input is a LoDTensor of already-projected gates; the kernels reorder the batch by
length (kernels/helpers/sequence_batch.h) so that each time step is one GEMM over the sequences still alive. Each
section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- LSTM: dynamic_lstm, dynamic_lstmp

# ---------------------------------------------------------------- GRU: dynamic_gru, gru_unit

# ---------------------------------------------------------------- CRF: linear_chain_crf, crf_decoding, chunk_eval
# The ops are kernels/linear_chain_crf.cc, crf_decoding.cc and chunk_eval.cc (their shared checks: helpers/crf.h).
# Each takes a LoDTensor (the sequences are its last LoD level) or, given a length, a padded [N, L, ...] tensor.

__all__ += ["linear_chain_crf", "crf_decoding", "chunk_eval"]


def _crf_check(layer, arg, v, dtypes):
    """TypeError unless `v` is a Variable of one of `dtypes` (names); its dtype name."""
    from ..framework import dtype_to_str
    if not isinstance(v, Variable):
        raise TypeError("%s: '%s' must be a Variable, got %s" % (layer, arg, type(v).__name__))
    name = dtype_to_str(v.dtype)
    if name not in dtypes:
        raise TypeError("%s: '%s' (%s) must be %s, got %s" % (layer, arg, v.name, " or ".join(dtypes), name))
    return name


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
    _crf_check("linear_chain_crf", "input", input, ("float32", "float64"))
    _crf_check("linear_chain_crf", "label", label, ("int64",))
    if length is not None:
        _crf_check("linear_chain_crf", "length", length, ("int64",))
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
    _crf_check("crf_decoding", "input", input, ("float32", "float64"))
    if label is not None:
        _crf_check("crf_decoding", "label", label, ("int64",))
    if length is not None:
        _crf_check("crf_decoding", "length", length, ("int64",))
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
    _crf_check("chunk_eval", "input", input, ("int64",))
    _crf_check("chunk_eval", "label", label, ("int64",))
    if seq_length is not None:
        _crf_check("chunk_eval", "seq_length", seq_length, ("int64",))
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
