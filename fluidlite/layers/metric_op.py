"""Metric layers of Fluid 1.x's layers/metric_op.py: auc (accuracy lives in nn.py)."""
from ..initializer import Constant
from ..layer_helper import LayerHelper
from .checks import check_dtype

__all__ = ["auc"]


def auc(input, label, curve="ROC", num_thresholds=2 ** 12 - 1, topk=1, slide_steps=1):
    """Streaming AUC of a binary classifier (the ``auc`` op, kernels/auc.cc).

    input: probabilities [N, 2] (column 1: the positive class), float32/float64; label: [N, 1] int32/int64.
    Four persistable int64 buffers, zeroed by the startup program, keep the histograms across runs: the
    global ``stat_pos``/``stat_neg`` [1, num_thresholds + 1] and the batch ones ``batch_stat_pos``/
    ``batch_stat_neg`` [(1 + slide_steps) * (num_thresholds + 1) + 1] (slide_steps ring entries, their sum, the
    batch count). Returns ``(auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg])``:
    the AUC over every batch run so far and over the last slide_steps batches, both float64 [1].

    As in Fluid, ``curve`` is checked ('ROC' or 'PR') and passed to the op, but the ROC area is computed for
    both; ``topk`` is accepted and ignored. Re-running the startup program (or zeroing the four buffers)
    resets the accumulation."""
    check_dtype("auc", "input", input, ("float32", "float64"))
    check_dtype("auc", "label", label, ("int32", "int64"))
    if curve not in ("ROC", "PR"):
        raise ValueError("auc: curve must be 'ROC' or 'PR', got %r" % (curve,))
    if len(input.shape) != 2 or input.shape[1] not in (-1, 1, 2):
        raise ValueError("auc: input %s must be [N, 2] (or [N, 1]) probabilities, got shape %s"
                         % (input.name, list(input.shape)))
    helper = LayerHelper("auc")
    auc_out = helper.create_variable_for_type_inference(dtype="float64")
    batch_auc_out = helper.create_variable_for_type_inference(dtype="float64")
    batch_size = (1 + slide_steps) * (num_thresholds + 1) + 1
    batch_stat_pos = helper.create_global_variable(persistable=True, dtype="int64", shape=[batch_size])
    batch_stat_neg = helper.create_global_variable(persistable=True, dtype="int64", shape=[batch_size])
    stat_pos = helper.create_global_variable(persistable=True, dtype="int64", shape=[1, num_thresholds + 1])
    stat_neg = helper.create_global_variable(persistable=True, dtype="int64", shape=[1, num_thresholds + 1])
    for var in (batch_stat_pos, batch_stat_neg, stat_pos, stat_neg):
        var.stop_gradient = True
        helper.set_variable_initializer(var, Constant(value=0.0, force_cpu=False))
    for out, pos, neg, steps in ((batch_auc_out, batch_stat_pos, batch_stat_neg, slide_steps),
                                 (auc_out, stat_pos, stat_neg, 0)):
        helper.append_op(type="auc",
                         inputs={"Predict": [input], "Label": [label], "StatPos": [pos], "StatNeg": [neg]},
                         attrs={"curve": curve, "num_thresholds": num_thresholds, "slide_steps": steps},
                         outputs={"AUC": [out], "StatPosOut": [pos], "StatNegOut": [neg]})
    auc_out.stop_gradient = batch_auc_out.stop_gradient = True
    return auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg]
