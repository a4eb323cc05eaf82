"""Loss and similarity layers (Fluid 1.8's layers/loss.py, and the loss-like layers of its nn.py): huber_loss,
smooth_l1, log_loss, kldiv_loss, margin_rank_loss, rank_loss, bpr_loss, npair_loss, cos_sim, l2_normalize,
label_smooth, and word2vec's nce and hsigmoid."""
import numpy as np

from ..framework import VarType
from ..layer_helper import LayerHelper
from .checks import check_dtype

__all__ = [
    "huber_loss", "smooth_l1", "log_loss", "kldiv_loss", "margin_rank_loss", "rank_loss", "bpr_loss", "npair_loss",
    "cos_sim", "l2_normalize", "label_smooth", "nce", "hsigmoid",
]

_FLOATS = (VarType.FP32, VarType.FP64)


def _outputs(helper, dtype, n):
    return [helper.create_variable_for_type_inference(dtype=dtype) for _ in range(n)]


def huber_loss(input, label, delta):
    """Huber loss of ``input`` against ``label`` (both [N, 1]): 0.5 r^2 where |r| <= delta, else
    delta (|r| - 0.5 delta), r = label - input. Returns [N, 1]."""
    check_dtype("huber_loss", "input", input, _FLOATS)
    check_dtype("huber_loss", "label", label, _FLOATS)
    helper = LayerHelper("huber_loss")
    residual, out = _outputs(helper, input.dtype, 2)
    helper.append_op(type="huber_loss", inputs={"X": [input], "Y": [label]},
                     outputs={"Out": [out], "Residual": [residual]}, attrs={"delta": float(delta)})
    return out


def smooth_l1(x, y, inside_weight=None, outside_weight=None, sigma=None):
    """Smooth L1 loss per row ([N, 1]) of ``x`` against ``y`` ([N, ...]): d = (x - y) * inside_weight;
    0.5 (sigma d)^2 where |d| < 1 / sigma^2, else |d| - 0.5 / sigma^2; times outside_weight, summed over each
    row. ``sigma`` defaults to 1.0; the weights must be given together."""
    check_dtype("smooth_l1", "x", x, _FLOATS)
    check_dtype("smooth_l1", "y", y, _FLOATS)
    if (inside_weight is None) != (outside_weight is None):
        raise ValueError("smooth_l1: inside_weight and outside_weight must be given together")
    helper = LayerHelper("smooth_l1_loss")
    diff, loss = _outputs(helper, x.dtype, 2)
    inputs = {"X": [x], "Y": [y]}
    if inside_weight is not None:
        check_dtype("smooth_l1", "inside_weight", inside_weight, _FLOATS)
        check_dtype("smooth_l1", "outside_weight", outside_weight, _FLOATS)
        inputs["InsideWeight"] = [inside_weight]
        inputs["OutsideWeight"] = [outside_weight]
    helper.append_op(type="smooth_l1_loss", inputs=inputs, outputs={"Diff": [diff], "Out": [loss]},
                     attrs={"sigma": 1.0 if sigma is None else float(sigma)})
    return loss


def log_loss(input, label, epsilon=1e-4, name=None):
    """Negative log likelihood of probabilities ``input`` ([N, 1]) for 0/1 ``label``:
    -label log(input + eps) - (1 - label) log(1 - input + eps)."""
    check_dtype("log_loss", "input", input, _FLOATS)
    check_dtype("log_loss", "label", label, _FLOATS)
    helper = LayerHelper("log_loss", name=name)
    loss = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="log_loss", inputs={"Predicted": [input], "Labels": [label]}, outputs={"Loss": [loss]},
                     attrs={"epsilon": float(epsilon)})
    return loss


def kldiv_loss(x, target, reduction="mean", name=None):
    """KL divergence of ``target`` (probabilities) from ``x`` (log-probabilities): target (log target - x)
    where target > 0 (0 elsewhere), then ``reduction``: 'none' (elementwise), 'batchmean' (sum / N),
    'mean' (sum / numel) or 'sum'."""
    check_dtype("kldiv_loss", "x", x, _FLOATS)
    check_dtype("kldiv_loss", "target", target, _FLOATS)
    if reduction not in ("none", "batchmean", "mean", "sum"):
        raise ValueError("kldiv_loss: reduction must be 'none', 'batchmean', 'mean' or 'sum', got %r" % (reduction,))
    helper = LayerHelper("kldiv_loss", name=name)
    loss = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="kldiv_loss", inputs={"X": [x], "Target": [target]}, outputs={"Loss": [loss]},
                     attrs={"reduction": reduction})
    return loss


def margin_rank_loss(label, left, right, margin=0.1, name=None):
    """max(0, -label (left - right) + margin) for label 1 (left should rank higher) or -1; all [N, 1]."""
    for arg, v in (("label", label), ("left", left), ("right", right)):
        check_dtype("margin_rank_loss", arg, v, _FLOATS)
    helper = LayerHelper("margin_rank_loss", name=name)
    out, act = _outputs(helper, left.dtype, 2)
    helper.append_op(type="margin_rank_loss", inputs={"Label": [label], "X1": [left], "X2": [right]},
                     outputs={"Out": [out], "Activated": [act]}, attrs={"margin": float(margin)})
    return out


def rank_loss(label, left, right, name=None):
    """RankNet loss: log(1 + exp(left - right)) - label (left - right); all [N, 1]."""
    for arg, v in (("label", label), ("left", left), ("right", right)):
        check_dtype("rank_loss", arg, v, _FLOATS)
    helper = LayerHelper("rank_loss", name=name)
    out = helper.create_variable_for_type_inference(dtype=left.dtype)
    helper.append_op(type="rank_loss", inputs={"Label": [label], "Left": [left], "Right": [right]},
                     outputs={"Out": [out]})
    return out


def bpr_loss(input, label, name=None):
    """Bayesian personalized ranking loss of scores ``input`` [N, C] for the int64 positive class ``label``
    [N, 1]: -mean over the other classes j of log sigmoid(input[label] - input[j]). Returns [N, 1]."""
    check_dtype("bpr_loss", "input", input, _FLOATS)
    check_dtype("bpr_loss", "label", label, (VarType.INT64,))
    helper = LayerHelper("bpr_loss", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="bpr_loss", inputs={"X": [input], "Label": [label]}, outputs={"Y": [out]})
    return out


def npair_loss(anchor, positive, labels, l2_reg=0.002):
    """N-pair loss (Sohn 2016), composed of layers as in Fluid: softmax cross entropy of the similarity
    matrix anchor @ positive^T against the row-normalised label-equality matrix, plus l2_reg * 0.25 times the
    mean squared norms of anchor and positive. ``anchor`` and ``positive`` are [N, D], ``labels`` [N] or
    [N, 1] (any dtype the equal op compares); returns a [1] loss."""
    from . import nn, ops, tensor
    check_dtype("npair_loss", "anchor", anchor, _FLOATS)
    check_dtype("npair_loss", "positive", positive, _FLOATS)
    check_dtype("npair_loss", "labels", labels)
    batch = labels.shape[0]
    if batch < 0:
        raise ValueError("npair_loss: the batch size of labels %s must be known at build time, got shape %s"
                         % (labels.name, labels.shape))
    beta = 0.25
    col = nn.reshape(labels, shape=[batch, 1])
    row = nn.reshape(labels, shape=[1, batch])
    same = tensor.cast(nn.equal(col, row), dtype=anchor.dtype)  # [N, N] by broadcasting
    same = nn.elementwise_div(same, nn.reduce_sum(same, dim=1, keep_dim=True), axis=0)
    l2loss = nn.elementwise_add(nn.reduce_mean(nn.reduce_sum(ops.square(anchor), 1)),
                                nn.reduce_mean(nn.reduce_sum(ops.square(positive), 1)))
    l2loss = nn.scale(l2loss, scale=beta * l2_reg)
    similarity = nn.matmul(anchor, positive, transpose_x=False, transpose_y=True)
    softmax_ce = nn.softmax_with_cross_entropy(logits=similarity, label=same, soft_label=True)
    cross_entropy = nn.reduce_sum(nn.elementwise_mul(same, softmax_ce), 0)
    celoss = nn.reduce_mean(cross_entropy)
    return nn.elementwise_add(l2loss, celoss)


def cos_sim(X, Y):
    """Cosine similarity of each row of ``X`` [N, D] with the same row of ``Y`` [N, D] (or its single row
    [1, D]). Returns [N, 1]."""
    check_dtype("cos_sim", "X", X, _FLOATS)
    check_dtype("cos_sim", "Y", Y, _FLOATS)
    helper = LayerHelper("cos_sim")
    out, xnorm, ynorm = _outputs(helper, X.dtype, 3)
    helper.append_op(type="cos_sim", inputs={"X": [X], "Y": [Y]},
                     outputs={"Out": [out], "XNorm": [xnorm], "YNorm": [ynorm]})
    return out


def l2_normalize(x, axis, epsilon=1e-12, name=None):
    """x / sqrt(sum(x^2 along axis) + epsilon) (the norm op); a 1-D x is normalised along axis 0."""
    check_dtype("l2_normalize", "x", x, _FLOATS)
    if len(x.shape) == 1:
        axis = 0
    helper = LayerHelper("l2_normalize", name=name)
    out, norm = _outputs(helper, x.dtype, 2)
    helper.append_op(type="norm", inputs={"X": [x]}, outputs={"Out": [out], "Norm": [norm]},
                     attrs={"axis": 1 if axis is None else int(axis), "epsilon": float(epsilon)})
    return out


def label_smooth(label, prior_dist=None, epsilon=0.1, dtype="float32", name=None):
    """(1 - epsilon) * label + epsilon * prior_dist (uniform 1 / K without one) for one-hot ``label`` [.., K];
    ``prior_dist`` is [1, K]. ``dtype`` is accepted for Fluid compatibility (Out takes label's dtype). As in
    Fluid, ``label`` is marked stop_gradient."""
    check_dtype("label_smooth", "label", label, _FLOATS)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError("label_smooth: epsilon must be in [0, 1], got %r" % (epsilon,))
    helper = LayerHelper("label_smooth", name=name)
    label.stop_gradient = True  # as Fluid's layer: labels take no gradient
    out = helper.create_variable_for_type_inference(dtype=label.dtype)
    inputs = {"X": [label]}
    if prior_dist is not None:
        check_dtype("label_smooth", "prior_dist", prior_dist, _FLOATS)
        inputs["PriorDist"] = [prior_dist]
    helper.append_op(type="label_smooth", inputs=inputs, outputs={"Out": [out]}, attrs={"epsilon": float(epsilon)})
    return out


def _alias_tables(probs):
    """Walker / Vose alias tables of a distribution: (alias int32, keep probability float32), so a draw
    takes a uniform slot k and keeps it with probability keep[k], else takes alias[k]."""
    n = len(probs)
    scaled = [p * n for p in probs]
    alias = list(range(n))
    keep = [1.0] * n
    small = [i for i, s in enumerate(scaled) if s < 1.0]
    large = [i for i, s in enumerate(scaled) if s >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        keep[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return np.array(alias, dtype="int32"), np.array(keep, dtype="float32")


_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def nce(input, label, num_total_classes, sample_weight=None, param_attr=None, bias_attr=None, num_neg_samples=None,
        name=None, sampler="uniform", custom_dist=None, seed=0, is_sparse=False):
    """Noise-contrastive estimation loss ([N, 1]) of features ``input`` [N, D] for int64 ``label`` [N, T]:
    a [num_total_classes, D] weight and a [num_total_classes, 1] bias (unless bias_attr is False) score the
    labels and ``num_neg_samples`` (default 10) negatives drawn per row by ``sampler`` ('uniform',
    'log_uniform' or 'custom_dist' with ``custom_dist`` the class probabilities). Returns the cost divided by
    num_neg_samples + 1, as Fluid does. ``seed`` 0 takes the program's random_seed when it is set; the op keeps
    its engine across runs, so a seeded program draws the same sequence of negatives in every process.
    ``is_sparse`` is accepted; the weight gradient is a dense tensor."""
    check_dtype("nce", "input", input, _FLOATS)
    check_dtype("nce", "label", label, (VarType.INT64,))
    if len(input.shape) != 2:
        raise ValueError("nce: input %s must be [N, D], got shape %s" % (input.name, input.shape))
    if len(label.shape) != 2:
        raise ValueError("nce: label %s must be [N, num_true], got shape %s" % (label.name, label.shape))
    if sampler not in _SAMPLERS:
        raise ValueError("nce: sampler must be 'uniform', 'log_uniform' or 'custom_dist', got %r" % (sampler,))
    num_neg_samples = 10 if num_neg_samples is None else int(num_neg_samples)
    helper = LayerHelper("nce", name=name, param_attr=param_attr, bias_attr=bias_attr)
    dim = input.shape[1]
    w = helper.create_parameter(attr=helper.param_attr, shape=[num_total_classes, dim], dtype=input.dtype)
    inputs = {"Input": [input], "Label": [label], "Weight": [w]}
    if helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(attr=helper.bias_attr, shape=[num_total_classes, 1],
                                                  dtype=input.dtype, is_bias=True)]
    if sample_weight is not None:
        check_dtype("nce", "sample_weight", sample_weight, _FLOATS)
        inputs["SampleWeight"] = [sample_weight]
    if sampler == "custom_dist":
        from .tensor import assign
        if custom_dist is None or len(custom_dist) != num_total_classes:
            raise ValueError("nce: sampler 'custom_dist' needs custom_dist with num_total_classes=%d probabilities, "
                             "got %s" % (num_total_classes, None if custom_dist is None else len(custom_dist)))
        probs = np.asarray(custom_dist, dtype="float64")
        if (probs < 0).any() or abs(probs.sum() - 1.0) > 1e-3:
            raise ValueError("nce: custom_dist must be non-negative and sum to 1, got sum %g" % probs.sum())
        alias, keep = _alias_tables(list(probs))
        inputs["CustomDistProbs"] = [assign(probs.astype("float32"))]
        inputs["CustomDistAlias"] = [assign(alias)]
        inputs["CustomDistAliasProbs"] = [assign(keep)]
    if not seed and helper.main_program.random_seed:
        seed = helper.main_program.random_seed
    cost = helper.create_variable_for_type_inference(dtype=input.dtype)
    sample_logits = helper.create_variable_for_type_inference(dtype=input.dtype)
    sample_labels = helper.create_variable_for_type_inference(dtype=VarType.INT64)
    helper.append_op(type="nce", inputs=inputs,
                     outputs={"Cost": [cost], "SampleLogits": [sample_logits], "SampleLabels": [sample_labels]},
                     attrs={"num_total_classes": int(num_total_classes), "num_neg_samples": num_neg_samples,
                            "seed": int(seed), "sampler": _SAMPLERS[sampler], "is_sparse": bool(is_sparse)})
    from .nn import scale
    return scale(cost, scale=1.0 / (num_neg_samples + 1))


def hsigmoid(input, label, num_classes, param_attr=None, bias_attr=None, name=None, path_table=None,
             path_code=None, is_custom=False, is_sparse=False):
    """Hierarchical sigmoid loss ([N, 1]) of features ``input`` [N, D] for int64 ``label`` [N, 1]. The default
    tree is a complete binary tree over ``num_classes`` classes (a [num_classes - 1, D] weight); with
    ``is_custom``, ``path_table`` and ``path_code`` ([N, L] int64, -1 padded) give each row's nodes and bits
    and the weight has ``num_classes`` rows. ``is_sparse`` is accepted; the weight gradient is dense."""
    check_dtype("hsigmoid", "input", input, _FLOATS)
    check_dtype("hsigmoid", "label", label, (VarType.INT64,))
    if not is_custom and (num_classes is None or num_classes < 2):
        raise ValueError("hsigmoid: num_classes must not be less than 2 with the default tree, got %r"
                         % (num_classes,))
    if not is_custom and (path_table is not None or path_code is not None):
        raise ValueError("hsigmoid: path_table and path_code are only used with is_custom=True")
    if is_custom:
        if path_table is None or path_code is None:
            raise ValueError("hsigmoid: is_custom=True needs both path_table and path_code")
        if num_classes is None:
            raise ValueError("hsigmoid: num_classes (the number of tree nodes) must be given with a custom tree")
        check_dtype("hsigmoid", "path_table", path_table, (VarType.INT64,))
        check_dtype("hsigmoid", "path_code", path_code, (VarType.INT64,))
    helper = LayerHelper("hierarchical_sigmoid", name=name, param_attr=param_attr, bias_attr=bias_attr)
    rows = num_classes if is_custom else num_classes - 1
    w = helper.create_parameter(attr=helper.param_attr, shape=[rows, input.shape[1]], dtype=input.dtype)
    inputs = {"X": [input], "W": [w], "Label": [label]}
    if is_custom:
        inputs["PathTable"] = [path_table]
        inputs["PathCode"] = [path_code]
    if helper.bias_attr is not False:
        inputs["Bias"] = [helper.create_parameter(attr=helper.bias_attr, shape=[rows, 1], dtype=input.dtype,
                                                  is_bias=True)]
    out, pre_out = _outputs(helper, input.dtype, 2)
    helper.append_op(type="hierarchical_sigmoid", inputs=inputs, outputs={"Out": [out], "PreOut": [pre_out]},
                     attrs={"num_classes": int(num_classes), "is_sparse": bool(is_sparse)})
    return out
