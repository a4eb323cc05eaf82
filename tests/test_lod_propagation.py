"""LoD propagation through every registered op, compile time (the output variable's lod_level) and run time (the
output tensor's LoD), against Fluid 1.8's InferShape: an op that calls ``ShareLoD(in, out)`` there passes `in`'s LoD
on (and at build time its lod_level), any other op leaves its output without LoD. The gradient of every
differentiable op gives X@GRAD X's LoD (fluidlite's rule for every grad op; Fluid's grad ops mostly do the same).

One row per op: how to build it on a LoD input, which outputs take which input's LoD, and whether the gradient is
checked. Ops that rebuild LoD themselves (sequence ops, lod_reset, the recurrent layers over LoD, CRF) have their
own tests and are listed in REBUILDS; ops without a tensor input that could hold LoD (optimizers, random
generators, ...) are in NO_LOD_INPUT. tests the table covers every registered op."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name

L = fluid.layers
X_LOD = [[0, 2, 6]]  # offsets: 2 sequences over the 6 rows of x
X2_LOD = [[0, 1, 2], [0, 2, 6]]  # two levels over the same rows


def _var(name, shape, dtype="float32", lod_level=0):
    return fluid.default_main_program().global_block().create_var(name=name, shape=shape, dtype=dtype,
                                                                   lod_level=lod_level)


def op(type, inputs, outputs, attrs=None):
    """Appends `type` with the given inputs; `outputs` lists slot names (a slot "Out*3" has 3 arguments).
    Returns {slot: [vars]} of the outputs."""
    block = fluid.default_main_program().global_block()
    outs = {}
    for slot in outputs:
        name, _, n = slot.partition("*")
        outs[name] = [block.create_var(name=unique_name.generate("%s_%s" % (type, name.lower())), dtype="float32")
                      for _ in range(int(n or 1))]
    block.append_op(type=type, inputs=inputs, outputs=outs, attrs=attrs or {})
    return outs


def const(value, dtype):
    return L.assign(np.asarray(value, dtype=dtype))


# Each builder gets the LoD input x (float32 [6, 4], or what `x` in the row says) and returns
# {name: (output var, input whose LoD it takes or None)}.
def unary(t, **attrs):
    return lambda x: {"Out": (op(t, {"X": x}, ["Out"], attrs)["Out"][0], "x")}


def f32(shape):
    return lambda name: _var(name, shape, "float32")


def ids(name):  # int64 ids [6, 1] in [0, 4)
    return _var(name, [-1, 1], "int64")


ACTIVATIONS = ["abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "floor", "ceil", "cos", "sin",
               "sign", "leaky_relu", "relu6", "clip", "gelu", "elu", "selu", "swish", "hard_swish", "hard_sigmoid",
               "softplus", "softsign", "rsqrt", "reciprocal", "pow", "round"]
ELEMENTWISE = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max",
               "elementwise_min", "elementwise_pow"]
COMPARE = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]


def _x_positive(arr):
    return np.abs(arr) + 0.5


class Row:
    """`compile_shares`: the output's build-time lod_level when it differs from the run-time rule (a conditional
    ShareLoD whose condition compares an unknown -1 batch dim with itself at build time)."""

    def __init__(self, build, grad=True, x_shape=(6, 4), x_dtype="float32", extra=None, lod=None, note="",
                 compile_shares=None):
        self.build, self.grad, self.x_shape, self.x_dtype = build, grad, x_shape, x_dtype
        self.compile_shares = compile_shares
        self.extra = extra or {}  # name -> (array, lod or None) for other fed inputs
        self.lod = lod or X_LOD
        self.note = note


def _elementwise(t):
    return lambda x: {"Out": (op(t, {"X": x, "Y": _var("y", [4])}, ["Out"])["Out"][0], "x")}


def _mul(x):
    w = L.create_parameter([4, 3], "float32", name="mul_w")
    return {"Out": (op("mul", {"X": x, "Y": w}, ["Out"])["Out"][0], "x")}


ROWS = {}
ACTIVATION_ATTRS = {"clip": {"min": -1.0, "max": 1.0}}
for _t in ACTIVATIONS:
    ROWS[_t] = Row(unary(_t, **ACTIVATION_ATTRS.get(_t, {})))
for _t in ELEMENTWISE:
    ROWS[_t] = Row(_elementwise(_t), extra={"y": (np.full(4, 1.5, "float32"), None)})
for _t in COMPARE:
    ROWS[_t] = Row(lambda x, _t=_t: {"Out": (op(_t, {"X": x, "Y": _var("y", [-1, 4])}, ["Out"])["Out"][0], "x")},
                   grad=False, extra={"y": (np.full((6, 4), 1.5, "float32"), None)})
for _t in ["logical_and", "logical_or", "logical_xor"]:
    ROWS[_t] = Row(lambda x, _t=_t: {"Out": (op(_t, {"X": x, "Y": _var("y", [-1, 4], "bool")}, ["Out"])["Out"][0],
                                             "x")},
                   grad=False, x_dtype="bool", extra={"y": (np.ones((6, 4), bool), None)})
ROWS["logical_not"] = Row(unary("logical_not"), grad=False, x_dtype="bool")
for _t in ["elementwise_floordiv", "elementwise_mod"]:  # Fluid's elementwise InferShape; no gradient
    ROWS[_t] = Row(_elementwise(_t), grad=False, extra={"y": (np.full(4, 1.5, "float32"), None)})

ROWS.update({
    # Fluid: ShareLoD("X", "Out") (or the slot named): the row-preserving ops
    "scale": Row(unary("scale", scale=2.0)),
    # made by the elementwise fusion passes (no gradient: they fuse backward ops too); Out takes its shape input's LoD
    "fused_elementwise": Row(lambda x: {"Out": (op("fused_elementwise", {"X": x}, ["Out"], {
        "code": [0, 1, 1, 0, -1, -1], "params": [0.0, 0.0, 0.0], "outputs": [1], "axes": [-2],
        "fused_ops": ["sigmoid"]})["Out"][0], "x")}, grad=False),
    "cast": Row(lambda x: {"Out": (L.cast(x, "float64"), "x")}),
    "dropout": Row(lambda x: {"Out": (L.dropout(x, 0.5, is_test=True), "x")}),
    "softmax": Row(lambda x: {"Out": (L.softmax(x), "x")}),
    "mul": Row(_mul),
    "fc (mul + elementwise_add + act)": Row(lambda x: {"Out": (L.fc(x, 3, act="relu"), "x")}),
    "matmul": Row(lambda x: {"Out": (L.matmul(x, _var("y", [4, 3])), "x")},
                  extra={"y": (np.ones((4, 3), "float32"), None)}),
    "layer_norm": Row(lambda x: {"Y": (L.layer_norm(x), "x")}),
    "batch_norm": Row(lambda x: {"Y": (L.batch_norm(x), "x")}),
    # made by fuse_bn_act: batch_norm's rule
    "fused_batch_norm_act": Row(lambda x: {"Y": (op("fused_batch_norm_act", {
        "X": x, "Scale": _var("s", [4]), "Bias": _var("b", [4]), "Mean": _var("m", [4]), "Variance": _var("v", [4])},
        ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"], {"act_type": "relu"})["Y"][0], "x")},
        grad=False, extra={n: (np.ones(4, "float32"), None) for n in "sbmv"}),
    "cross_entropy": Row(lambda x: {"Y": (L.cross_entropy(L.softmax(x), ids("label")), "x")},
                         extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "softmax_with_cross_entropy": Row(
        lambda x: dict(zip(["Loss", "Softmax"], [(v, "x") for v in L.softmax_with_cross_entropy(
            x, ids("label"), return_softmax=True)])),
        extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "sigmoid_cross_entropy_with_logits": Row(
        lambda x: {"Out": (L.sigmoid_cross_entropy_with_logits(x, _var("label", [-1, 4])), "x")},
        extra={"label": (np.ones((6, 4), "float32"), None)}),
    "sum": Row(lambda x: {"Out": (L.sums([x, x]), "x")}),
    "concat": Row(lambda x: {"Out": (L.concat([x, x], axis=1), "x")}),
    "lookup_table": Row(lambda x: {"Out": (L.embedding(x, size=[4, 3]), "x")}, x_shape=(6, 1), x_dtype="int64",
                        grad=False),
    "lookup_table_v2": Row(lambda x: {"Out": (fluid.embedding(x, size=[4, 3]), "x")}, x_shape=(6, 1),
                           x_dtype="int64", grad=False),
    "reshape2 (dim 0 kept)": Row(lambda x: {"Out": (L.reshape(x, [-1, 2, 2]), "x")}),
    "reshape2 (dim 0 changed)": Row(lambda x: {"Out": (L.reshape(x, [3, 8]), None)}),
    "squeeze2 (dim 0 kept)": Row(lambda x: {"Out": (L.squeeze(x, [2]), "x")}, x_shape=(6, 4, 1)),
    "unsqueeze2 (dim 0 kept)": Row(lambda x: {"Out": (L.unsqueeze(x, [2]), "x")}),
    "unsqueeze2 (dim 0 changed)": Row(lambda x: {"Out": (L.unsqueeze(x, [0]), None)}),
    "flatten2 (dim 0 kept)": Row(lambda x: {"Out": (L.flatten(x, axis=1), "x")}, x_shape=(6, 2, 2)),
    "flatten2 (dim 0 changed)": Row(lambda x: {"Out": (L.flatten(x, axis=2), None)}, x_shape=(6, 2, 2),
                                    compile_shares=True),
    "reduce_sum (dim 1)": Row(lambda x: {"Out": (L.reduce_sum(x, dim=1), "x")}),
    "reduce_mean (dim -1, keep_dim)": Row(lambda x: {"Out": (L.reduce_mean(x, dim=-1, keep_dim=True), "x")}),
    "reduce_max (dim 1)": Row(lambda x: {"Out": (L.reduce_max(x, dim=1), "x")}),
    "reduce_prod (dim 1)": Row(lambda x: {"Out": (L.reduce_prod(x, dim=1), "x")}),
    "reduce_sum (dim 0)": Row(lambda x: {"Out": (L.reduce_sum(x, dim=0), None)}),
    "reduce_sum (all)": Row(lambda x: {"Out": (L.reduce_sum(x), None)}),
    # made by the fuse_reductions pass: each Out as the reduce op it replaced; Exp (X's shape) keeps X's LoD
    "fused_reduce (dim 1, Exp)": Row(lambda x: (lambda o: {"Out": (o["Out"][1], "x"), "Exp": (o["Exp"][0], "x")})(
        op("fused_reduce", {"X": x}, ["Out*2", "Exp"], {"dim": [1], "reductions": ["max", "sum_exp_dev"]})),
        grad=False),
    "fused_reduce (dim 0)": Row(lambda x: {"Out": (op("fused_reduce", {"X": x}, ["Out*2"], {
        "dim": [0], "reductions": ["sum", "mean_square"]})["Out"][0], None)}, grad=False),
    "reduce_all (dim 1)": Row(lambda x: {"Out": (L.reduce_all(x, dim=1), "x")}, x_dtype="bool", grad=False),
    "reduce_any (dim 1)": Row(lambda x: {"Out": (L.reduce_any(x, dim=1), "x")}, x_dtype="bool", grad=False),
    "slice (axes[0] != 0)": Row(lambda x: {"Out": (L.slice(x, axes=[1], starts=[1], ends=[3]), "x")}),
    "slice (axes[0] == 0)": Row(lambda x: {"Out": (L.slice(x, axes=[0], starts=[1], ends=[3]), None)}),
    "split (axis != 0)": Row(lambda x: {"Out%d" % i: (v, "x") for i, v in enumerate(L.split(x, 2, dim=1))}),
    "split (axis 0)": Row(lambda x: {"Out%d" % i: (v, None) for i, v in enumerate(L.split(x, 2, dim=0))}),
    "top_k": Row(lambda x: dict(zip(["Out", "Indices"], [(v, "x") for v in L.topk(x, 2)])),
                 grad=False),  # layers.topk marks both outputs stop_gradient, as Fluid's
    "argsort": Row(lambda x: dict(zip(["Out", "Indices"], [(v, "x") for v in L.argsort(x, axis=1)]))),
    "one_hot": Row(lambda x: {"Out": (L.one_hot(x, 4), "x")}, x_shape=(6, 1), x_dtype="int64", grad=False),
    "one_hot_v2": Row(lambda x: {"Out": (fluid.one_hot(x, 4), "x")}, x_shape=(6, 1), x_dtype="int64", grad=False),
    "expand (dim 0 kept)": Row(lambda x: {"Out": (L.expand(x, [1, 2]), "x")}),
    "expand (dim 0 changed)": Row(lambda x: {"Out": (L.expand(x, [2, 1]), None)}, compile_shares=True),
    "clip_by_norm": Row(lambda x: {"Out": (L.clip_by_norm(x, 1.0), "x")}, grad=False),  # no gradient in Fluid
    "prelu": Row(lambda x: {"Out": (L.prelu(x, "all"), "x")}),
    "label_smooth": Row(lambda x: {"Out": (L.label_smooth(L.softmax(x)), "x")}, grad=False),  # a label: no grad
    "fill_zeros_like": Row(lambda x: {"Out": (L.zeros_like(x), "x")}, grad=False),
    "fill_any_like": Row(lambda x: {"Out": (L.ones_like(x), "x")}, grad=False),
    "assign": Row(lambda x: {"Out": (L.assign(x), "x")}),
    "increment": Row(lambda x: {"Out": (L.increment(x, in_place=False), "x")}, x_shape=(1,), grad=False,
                     lod=[[0, 1]]),
    "affine_channel": Row(lambda x: {"Out": (L.affine_channel(x, L.create_parameter([4], "float32"),
                                                             L.create_parameter([4], "float32"), "NHWC"), "x")}),
    "group_norm": Row(lambda x: {"Y": (L.group_norm(x, groups=2), "x")}, x_shape=(2, 4, 2, 2), lod=[[0, 1, 2]]),
    "instance_norm": Row(lambda x: {"Y": (L.instance_norm(x), "x")}, x_shape=(2, 4, 2, 2), lod=[[0, 1, 2]]),
    "cos_sim": Row(lambda x: {"Out": (L.cos_sim(x, _var("y", [-1, 4])), "x")},
                   extra={"y": (np.ones((6, 4), "float32"), None)}),
    "huber_loss": Row(lambda x: {"Out": (L.huber_loss(x, _var("y", [-1, 1]), 1.0), "x")},
                      extra={"y": (np.ones((6, 1), "float32"), None)}, x_shape=(6, 1)),
    "log_loss": Row(lambda x: {"Loss": (L.log_loss(L.sigmoid(x), _var("y", [-1, 1])), "x")},
                    extra={"y": (np.ones((6, 1), "float32"), None)}, x_shape=(6, 1)),
    "bpr_loss": Row(lambda x: {"Y": (L.bpr_loss(L.softmax(x), ids("label")), "x")},
                    extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "hierarchical_sigmoid": Row(lambda x: {"Out": (L.hsigmoid(x, ids("label"), num_classes=4), "x")},
                                extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "pad_constant_like": Row(lambda x: {"Out": (L.pad_constant_like(x, _var("y", [-1, 2])), "x")},
                             extra={"y": (np.ones((6, 2), "float32"), None)}, grad=False,
                             note="Out takes X's dims: X is the larger of the two"),
    # Fluid: no ShareLoD: the output has new rows, or one row per batch
    "mean": Row(lambda x: {"Out": (L.mean(x), None)}),
    "transpose2": Row(lambda x: {"Out": (L.transpose(x, [1, 0]), None)}),
    "gather": Row(lambda x: {"Out": (L.gather(x, const([0, 2], "int64")), None)}),
    "gather_tree": Row(lambda x: {"Out": (L.gather_tree(x, _var("parents", [-1, 2, 3], "int64")), None)},
                       x_shape=(6, 2, 3), x_dtype="int64", grad=False,
                       extra={"parents": (np.zeros((6, 2, 3), "int64"), None)}),
    "gather_nd": Row(lambda x: {"Out": (L.gather_nd(x, const([[0], [2]], "int64")), None)}),
    "reverse": Row(lambda x: {"Out": (L.reverse(x, 0), None)}, note="reversed rows are not the sequences reversed"),
    "sampling_id": Row(lambda x: {"Out": (L.sampling_id(L.softmax(x)), None)}, grad=False),
    "scatter": Row(lambda x: {"Out": (L.scatter(x, const([0], "int64"), const(np.ones((1, 4)), "float32")), None)}),
    "scatter_nd_add": Row(lambda x: {"Out": (L.scatter_nd_add(x, const([[0]], "int64"),
                                                              const(np.ones((1, 4)), "float32")), None)}),
    "arg_max": Row(lambda x: {"Out": (L.argmax(x, 1), None)}, grad=False),
    "arg_min": Row(lambda x: {"Out": (L.argmin(x, 1), None)}, grad=False),
    "stack": Row(lambda x: {"Y": (L.stack([x, x], axis=1), None)}),
    "unstack": Row(lambda x: {"Y": (L.unstack(x, axis=1)[0], None)}),
    "pad": Row(lambda x: {"Out": (L.pad(x, [0, 0, 1, 1]), None)}),
    "pad2d": Row(lambda x: {"Out": (L.pad2d(x, [1, 1, 1, 1]), None)}, x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "crop": Row(lambda x: {"Out": (L.crop(x, shape=[6, 2]), None)}),
    "norm": Row(lambda x: {"Out": (L.l2_normalize(x, axis=1), None)}),
    "maxout": Row(lambda x: {"Out": (L.maxout(x, groups=2), None)}, x_shape=(2, 4, 2, 2), lod=[[0, 1, 2]]),
    "expand_as": Row(lambda x: {"Out": (L.expand_as(x, _var("y", [-1, 8])), None)},
                     extra={"y": (np.ones((6, 8), "float32"), None)}),
    "smooth_l1_loss": Row(lambda x: {"Out": (L.smooth_l1(x, _var("y", [-1, 4])), None)},
                          extra={"y": (np.ones((6, 4), "float32"), None)}),
    "margin_rank_loss": Row(lambda x: {"Out": (L.margin_rank_loss(_var("label", [-1, 1]), x, x), None)},
                            extra={"label": (np.ones((6, 1), "float32"), None)}, x_shape=(6, 1)),
    "rank_loss": Row(lambda x: {"Out": (L.rank_loss(_var("label", [-1, 1]), x, x), None)},
                     extra={"label": (np.ones((6, 1), "float32"), None)}, x_shape=(6, 1)),
    "kldiv_loss": Row(lambda x: {"Loss": (L.kldiv_loss(x, _var("y", [-1, 4]), reduction="none"), None)},
                      extra={"y": (np.ones((6, 4), "float32"), None)}),
    "accuracy": Row(lambda x: {"Out": (L.accuracy(L.softmax(x), ids("label"), k=1), None)}, grad=False,
                    extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "conv2d": Row(lambda x: {"Out": (L.conv2d(x, 2, 1), None)}, x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "pool2d": Row(lambda x: {"Out": (L.pool2d(x, 2), None)}, x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    # made by fuse_conv_bias_act for inference programs: conv2d's rule
    "conv2d_fusion": Row(lambda x: {"Out": (op("conv2d_fusion", {"Input": x, "Filter": _var("w", [2, 1, 1, 1])},
                                                ["Output"])["Output"][0], None)}, grad=False, x_shape=(2, 1, 2, 2),
                         lod=[[0, 1, 2]], extra={"w": (np.ones((2, 1, 1, 1), "float32"), None)}),
    "bilinear_interp": Row(lambda x: {"Out": (L.resize_bilinear(x, out_shape=[4, 4]), None)},
                           x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "pixel_shuffle": Row(lambda x: {"Out": (L.pixel_shuffle(x, 2), None)}, x_shape=(2, 4, 1, 1), lod=[[0, 1, 2]]),
    "space_to_depth": Row(lambda x: {"Out": (L.space_to_depth(x, 2), None)}, x_shape=(2, 4, 2, 2),
                          lod=[[0, 1, 2]]),
    "unfold": Row(lambda x: {"Y": (L.unfold(x, [1, 1]), None)}, x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "shape": Row(lambda x: {"Out": (L.shape(x), None)}, grad=False),
    "size": Row(lambda x: {"Out": (L.size(x), None)}, grad=False),
    "isfinite": Row(lambda x: {"Out": (L.isfinite(x), None)}, grad=False),
    "where_index": Row(lambda x: {"Out": (L.where(x), None)}, x_dtype="bool", grad=False),
    "unique": Row(lambda x: {"Out": (L.unique(x, "int64")[0], None)}, x_shape=(6,), x_dtype="int64", grad=False),
    "nce": Row(lambda x: {"Cost": (L.nce(x, ids("label"), num_total_classes=4, num_neg_samples=2), None)},
               extra={"label": (np.array([[0], [1], [2], [3], [0], [1]], "int64"), None)}),
    "lstm_unit": Row(lambda x: dict(zip(["H", "C"], [(v, None) for v in L.lstm_unit(
        x, _var("h", [-1, 2]), _var("c", [-1, 2]))])),
        extra={"h": (np.ones((6, 2), "float32"), None), "c": (np.ones((6, 2), "float32"), None)}),
    "is_empty": Row(lambda x: {"Out": (L.is_empty(x), None)}, grad=False),
    "isinf": Row(lambda x: {"Out": (L.has_inf(x), None)}, grad=False),
    "isnan": Row(lambda x: {"Out": (L.has_nan(x), None)}, grad=False),
    "unique_with_counts": Row(lambda x: {"Out": (L.unique_with_counts(x, "int64")[0], None)}, x_shape=(6,),
                              x_dtype="int64", grad=False),
    "nearest_interp": Row(lambda x: {"Out": (L.resize_nearest(x, out_shape=[4, 4]), None)},
                          x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "depthwise_conv2d": Row(lambda x: {"Out": (L.conv2d(x, 2, 1, groups=2), None)}, x_shape=(2, 2, 2, 2),
                            lod=[[0, 1, 2]]),
    "conv2d_transpose": Row(lambda x: {"Out": (L.conv2d_transpose(x, 2, filter_size=2), None)},
                            x_shape=(2, 1, 2, 2), lod=[[0, 1, 2]]),
    "depthwise_conv2d_transpose": Row(
        lambda x: {"Out": (op("depthwise_conv2d_transpose", {"Input": x, "Filter": L.create_parameter(
            [2, 1, 2, 2], "float32")}, ["Output"], {"groups": 2})["Output"][0], None)},
        x_shape=(2, 2, 2, 2), lod=[[0, 1, 2]]),
    "fill_constant_batch_size_like": Row(
        lambda x: {"Out": (L.fill_constant_batch_size_like(x, [-1, 2], "float32", 1.0), None)}, grad=False),
})


def _feed_value(shape, dtype, lod, seed):
    rng = np.random.RandomState(seed)
    if dtype == "bool":
        arr = rng.rand(*shape) > 0.3
    elif dtype == "int64":
        arr = rng.randint(0, 4, shape).astype("int64")
    else:
        arr = (rng.rand(*shape) + 0.5).astype(dtype)
    t = core.LoDTensor()
    t.set(arr, fluid.CPUPlace())
    t.set_lod(lod)
    return t


def _build(row, lod_level, with_grad=False):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1] + list(row.x_shape[1:]), dtype=row.x_dtype, lod_level=lod_level)
        x.stop_gradient = False
        outs = row.build(x)
        if with_grad:  # d mean(first output) / dx
            var = next(iter(outs.values()))[0]
            loss = L.mean(L.cast(var, "float32") if var.dtype != x.dtype else var)
            x_grad, = fluid.gradients([loss], [x])
            outs = dict(outs, **{"x@GRAD": (x_grad, "x")})
    return main, startup, x, outs


def _run(row, lod, fetch_extra=(), program=None):
    main, startup, x, outs = program
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": _feed_value(row.x_shape, row.x_dtype, lod, 0)}
    for name, (arr, extra_lod) in row.extra.items():
        feed[name] = arr if extra_lod is None else fluid.create_lod_tensor(arr, extra_lod, fluid.CPUPlace())
    fetch = [v for v, _ in outs.values()] + list(fetch_extra)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope, return_numpy=False)


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("levels", [1, 2])
def test_forward_lod(name, levels):
    row = ROWS[name]
    lod = row.lod if levels == 1 else [[0, 1, len(row.lod[0]) - 1]] + row.lod
    if levels == 2 and len(row.lod[0]) < 3:
        lod = [[0, 1]] + row.lod
    program = _build(row, levels)
    got = _run(row, lod, program=program)
    for (slot, (var, source)), tensor in zip(program[3].items(), got):
        want_lod = lod if source == "x" else []
        shares = source == "x" if row.compile_shares is None else row.compile_shares
        want_level = levels if shares else 0
        assert tensor.lod() == want_lod, "%s: %s '%s' has LoD %s at run time, Fluid gives %s" % (
            name, slot, var.name, tensor.lod(), want_lod)
        assert var.lod_level == want_level, "%s: %s '%s' has lod_level %d at build time, Fluid gives %d" % (
            name, slot, var.name, var.lod_level, want_level)


@pytest.mark.parametrize("name", sorted(n for n, r in ROWS.items() if r.grad))
def test_gradient_takes_the_input_lod(name):
    row = ROWS[name]
    program = _build(row, 1, with_grad=True)
    x_grad = program[3]["x@GRAD"][0]
    got = _run(row, row.lod, program=program)[-1]
    assert got.lod() == row.lod and got.shape() == list(row.x_shape), (
        "%s: x@GRAD %s has LoD %s at run time, x has %s" % (name, got.shape(), got.lod(), row.lod))
    assert x_grad.lod_level == 1, "%s: x@GRAD has lod_level %d at build time" % (name, x_grad.lod_level)


# Ops that compute new LoD themselves: tested in their own files (tests/ops/test_<kernel file>.py).
REBUILDS_PREFIXES = ("sequence_",)
REBUILDS = {"lod_reset", "im2sequence", "row_conv", "lstm", "lstmp", "gru", "gru_unit", "linear_chain_crf",
            "crf_decoding", "chunk_eval", "feed", "fetch", "recurrent", "rnn_memory_helper", "beam_search",
            "beam_search_decode"}
# Tensor arrays and rank tables: their own LoD rules, tested in tests/ops/test_tensor_array_read_write.py,
# test_lod_rank_table.py, test_lod_tensor_to_array.py, test_shrink_rnn_memory.py, test_reorder_lod_tensor_by_rank.py
# and test_tensor_array_to_tensor.py.
REBUILDS |= {"write_to_array", "read_from_array", "lod_array_length", "lod_rank_table", "max_sequence_len",
             "lod_tensor_to_array", "array_to_lod_tensor", "shrink_rnn_memory", "reorder_lod_tensor_by_rank",
             "tensor_array_to_tensor"}
# Branches ([6/10]): the LoD of what the block writes, of the selected input, of the split or merged items
# (tests/ops/test_conditional_block.py, test_select_input_output.py, test_split_merge_lod_tensor.py).
REBUILDS |= {"conditional_block", "select_input", "select_output", "split_lod_tensor", "merge_lod_tensor"}
# Loops ([6/10]): the body's own ops write the LoD of what it writes (tests/ops/test_while.py, test_dynamic_rnn.py).
REBUILDS |= {"while"}
# Ops with no tensor input that could carry sequences (or only parameters/optimizer state): nothing to pass on.
NO_LOD_INPUT = {"sgd", "momentum", "adam", "adagrad", "rmsprop", "ftrl", "decayed_adagrad", "adadelta", "adamax",
                "lamb", "lars_momentum", "average_accumulates", "fill_constant", "assign_value", "uniform_random",
                "gaussian_random", "range", "linspace", "auc",
                # the fused optimizers (fuse_optimizer_ops) and batch_norm folding (parameters in, parameters out)
                "fused_sgd", "fused_momentum", "fused_adam", "batch_norm_fold",
                # SelectedRows in, dense out: a SelectedRows has no LoD
                "merge_selected_rows", "get_tensor_from_selected_rows"}
# The collectives ([9/10]) need a ring: c_allreduce_*/c_broadcast keep X's LoD, the gathers and the syncs carry none
# (tests/ops/test_collective_ops.py).
NO_LOD_INPUT |= {"c_allreduce_sum", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod", "c_broadcast",
                 "c_allgather", "c_reducescatter", "c_sync_comm_stream", "c_sync_calc_stream", "barrier"}


def test_table_covers_every_registered_op():
    covered = {n.split(" ")[0] for n in ROWS} | {"mul", "elementwise_add"}
    forward = {t for t in core.op_types() if not t.endswith("_grad")}
    missing = sorted(t for t in forward - covered - REBUILDS - NO_LOD_INPUT if not t.startswith(REBUILDS_PREFIXES))
    assert not missing, "ops with no LoD propagation row: %s" % missing
