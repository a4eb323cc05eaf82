"""Neural-network layers: fc, matmul, elementwise, reductions, softmax and losses, shape ops."""
import builtins
import functools
import operator

from ..framework import Variable, VarType, convert_np_dtype_to_dtype_
from ..layer_helper import LayerHelper
from .checks import check_variable
from .layer_function_generator import generate_layer_fn

__all__ = [
    "fc", "mul", "matmul", "scale", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
    "elementwise_max", "elementwise_min", "reduce_sum", "reduce_mean", "reduce_max", "mean", "softmax",
    "cross_entropy", "softmax_with_cross_entropy", "square_error_cost", "split", "reshape", "transpose", "topk",
    "accuracy", "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal",
    "embedding", "one_hot", "slice", "gather", "stack", "unstack", "squeeze", "unsqueeze", "lstm_unit",
]


def _simple(op_type, inputs, attrs=None, name=None, dtype=None, out_slot="Out", act=None):
    helper = LayerHelper(op_type, name=name, act=act)
    first = next(iter(inputs.values()))
    first = first[0] if isinstance(first, (list, tuple)) else first
    out = helper.create_variable_for_type_inference(dtype=dtype if dtype is not None else first.dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={out_slot: [out]}, attrs=attrs or {})
    return helper.append_activation(out)


def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None, is_test=False, name=None):
    """Fully connected: act(sum_i(flatten(input_i) @ W_i) + b). `input` may be a list (one W each)."""
    helper = LayerHelper("fc", input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    mul_results = []
    for input_var, attr in helper.iter_inputs_and_params():
        shape = input_var.shape
        if num_flatten_dims < 1 or num_flatten_dims >= len(shape):
            raise ValueError("fc: num_flatten_dims=%d is out of range for input %s of shape %s"
                             % (num_flatten_dims, input_var.name, shape))
        in_features = functools.reduce(operator.mul, shape[num_flatten_dims:], 1)
        if in_features < 0:
            raise ValueError("fc: input %s has unknown trailing dims %s" % (input_var.name, shape))
        w = helper.create_parameter(attr=attr, shape=[in_features, size], dtype=dtype, is_bias=False)
        tmp = helper.create_variable_for_type_inference(dtype)
        helper.append_op(type="mul", inputs={"X": input_var, "Y": w}, outputs={"Out": tmp},
                         attrs={"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        mul_results.append(tmp)
    if len(mul_results) == 1:
        pre_bias = mul_results[0]
    else:
        pre_bias = helper.create_variable_for_type_inference(dtype)
        helper.append_op(type="sum", inputs={"X": mul_results}, outputs={"Out": pre_bias})
    pre_act = helper.append_bias_op(pre_bias, dim_start=num_flatten_dims)
    return helper.append_activation(pre_act)


def mul(x, y, x_num_col_dims=1, y_num_col_dims=1, name=None):
    return _simple("mul", {"X": x, "Y": y}, {"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims},
                   name=name)


def matmul(x, y, transpose_x=False, transpose_y=False, alpha=1.0, name=None):
    check_variable("matmul", "x", x)
    check_variable("matmul", "y", y)
    return _simple("matmul", {"X": x, "Y": y},
                   {"transpose_X": transpose_x, "transpose_Y": transpose_y, "alpha": float(alpha)}, name=name)


scale = generate_layer_fn("scale", act=True)

elementwise_add = generate_layer_fn("elementwise_add", inputs=("x", "y"), act=True)
elementwise_sub = generate_layer_fn("elementwise_sub", inputs=("x", "y"), act=True)
elementwise_mul = generate_layer_fn("elementwise_mul", inputs=("x", "y"), act=True)
elementwise_div = generate_layer_fn("elementwise_div", inputs=("x", "y"), act=True)
elementwise_max = generate_layer_fn("elementwise_max", inputs=("x", "y"), act=True)
elementwise_min = generate_layer_fn("elementwise_min", inputs=("x", "y"), act=True)
elementwise_pow = generate_layer_fn("elementwise_pow", inputs=("x", "y"), act=True)
__all__ += ["elementwise_pow"]
elementwise_floordiv = generate_layer_fn("elementwise_floordiv", inputs=("x", "y"), act=True)
elementwise_mod = generate_layer_fn("elementwise_mod", inputs=("x", "y"), act=True)
__all__ += ["elementwise_floordiv", "elementwise_mod"]


def _reduce_dims(args):
    """Fluid's reduce layers: dim None (or every axis) reduces everything; one int is a list of one."""
    dim = args["dim"]
    if dim is not None and not isinstance(dim, (list, tuple)):
        dim = [dim]
    rank = len(args["input"].shape)
    # Every axis named (once each, in range: the op checks the range and names the bad dim) reduces everything.
    every_axis = dim is not None and all(-rank <= d < rank for d in dim) and len({d % rank for d in dim}) == rank
    return {"dim": list(dim) if dim else [0], "reduce_all": not dim or every_axis}


def _reduce(op_type):
    return generate_layer_fn(op_type, inputs=("input",), attrs=("keep_dim",), prepare=_reduce_dims,
                             extra=[("dim", None, "the axes to reduce (None: all); negative counts from the end")],
                             order=["dim", "keep_dim", "name"])


reduce_sum = _reduce("reduce_sum")
reduce_mean = _reduce("reduce_mean")
reduce_max = _reduce("reduce_max")
mean = generate_layer_fn("mean")


def softmax(input, use_cudnn=False, name=None, axis=-1):
    return _simple("softmax", {"X": input}, {"axis": axis}, name=name)


def cross_entropy(input, label, soft_label=False, ignore_index=-100):
    """-log(input[label]) per row; `input` holds probabilities, `label` int64 [N, 1] (or soft labels)."""
    helper = LayerHelper("cross_entropy")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="cross_entropy", inputs={"X": [input], "Label": [label]}, outputs={"Y": [out]},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index})
    return out


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=-100, numeric_stable_mode=True,
                               return_softmax=False, axis=-1):
    helper = LayerHelper("softmax_with_cross_entropy")
    softmax_out = helper.create_variable_for_type_inference(dtype=logits.dtype)
    loss = helper.create_variable_for_type_inference(dtype=logits.dtype)
    helper.append_op(type="softmax_with_cross_entropy", inputs={"Logits": logits, "Label": label},
                     outputs={"Softmax": softmax_out, "Loss": loss},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index,
                            "numeric_stable_mode": numeric_stable_mode, "axis": axis})
    return (loss, softmax_out) if return_softmax else loss


def square_error_cost(input, label):
    """(input - label)^2, elementwise — built from elementwise_sub and square, as in Fluid."""
    helper = LayerHelper("square_error_cost")
    minus = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="elementwise_sub", inputs={"X": [input], "Y": [label]}, outputs={"Out": [minus]})
    square_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="square", inputs={"X": [minus]}, outputs={"Out": [square_out]})
    return square_out


def split(input, num_or_sections, dim=-1, name=None):
    helper = LayerHelper("split", name=name)
    rank = len(input.shape)
    axis = dim + rank if -rank <= dim < 0 else dim  # out of range: the op's axis rule names it
    if isinstance(num_or_sections, int):
        num, sections = num_or_sections, []
        if num <= 0:
            raise ValueError("split: num_or_sections must be positive, got %d" % num)
        n_out = num
    else:
        num, sections = 0, list(num_or_sections)
        n_out = len(sections)
    outs = [helper.create_variable_for_type_inference(dtype=input.dtype) for _ in range(n_out)]
    helper.append_op(type="split", inputs={"X": input}, outputs={"Out": outs},
                     attrs={"num": num, "sections": sections, "axis": axis})
    return outs


def reshape(x, shape, actual_shape=None, act=None, inplace=False, name=None):
    """reshape2: 0 copies the input dim, -1 is inferred (at most one)."""
    helper = LayerHelper("reshape2", name=name, act=act)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="reshape2", inputs={"X": x}, outputs={"Out": out, "XShape": x_shape},
                     attrs={"shape": [int(s) for s in shape]})
    return helper.append_activation(out)


def transpose(x, perm, name=None):
    helper = LayerHelper("transpose2", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="transpose2", inputs={"X": x}, outputs={"Out": out, "XShape": x_shape},
                     attrs={"axis": [int(p) for p in perm]})
    return out


def topk(input, k, name=None):
    """The k largest entries along the last axis and their int64 indices; `k` an int or (as in Fluid) a
    1-element int32/int64 Variable read at run time (the op's K input)."""
    helper = LayerHelper("top_k", name=name)
    values = helper.create_variable_for_type_inference(dtype=input.dtype)
    indices = helper.create_variable_for_type_inference(dtype=VarType.INT64, stop_gradient=True)
    inputs, attrs = {"X": [input]}, {}
    if isinstance(k, Variable):
        inputs["K"] = [k]
    else:
        attrs["k"] = int(k)
    helper.append_op(type="top_k", inputs=inputs, outputs={"Out": [values], "Indices": [indices]}, attrs=attrs)
    values.stop_gradient = True
    return values, indices


def accuracy(input, label, k=1, correct=None, total=None):
    """Top-k accuracy of `input` (scores [N, C]) against int64 `label` [N, 1]; a float32 [1] tensor."""
    helper = LayerHelper("accuracy")
    topk_out, topk_indices = topk(input, k=k)
    acc_out = helper.create_variable_for_type_inference(dtype="float32")
    if correct is None:
        correct = helper.create_variable_for_type_inference(dtype="int32")
    if total is None:
        total = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="accuracy", inputs={"Out": [topk_out], "Indices": [topk_indices], "Label": [label]},
                     outputs={"Accuracy": [acc_out], "Correct": [correct], "Total": [total]})
    return acc_out


del convert_np_dtype_to_dtype_


less_than = generate_layer_fn("less_than", inputs=("x", "y"), attrs=("force_cpu",), stop_gradient=True,
                              out_arg="cond")
less_equal = generate_layer_fn("less_equal", inputs=("x", "y"), attrs=(), stop_gradient=True, out_arg="cond")
greater_than = generate_layer_fn("greater_than", inputs=("x", "y"), attrs=(), stop_gradient=True, out_arg="cond")
greater_equal = generate_layer_fn("greater_equal", inputs=("x", "y"), attrs=(), stop_gradient=True, out_arg="cond")
equal = generate_layer_fn("equal", inputs=("x", "y"), attrs=(), stop_gradient=True, out_arg="cond")
not_equal = generate_layer_fn("not_equal", inputs=("x", "y"), attrs=(), stop_gradient=True, out_arg="cond")


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,
              dtype="float32"):
    """Looks up rows of a [vocab, width] table (``embedding_N.w_0``) for int64 ids whose last dim is 1.

    Ids equal to ``padding_idx`` (negative: counted from vocab; None: no padding) give zero rows and no
    gradient. ``is_sparse=True`` makes the table's gradient SelectedRows (the rows of the ids seen, see
    docs/sparse.md), so optimizers update only those rows; ``is_distributed`` is accepted and ignored (no
    parameter server).
    """
    return _lookup("lookup_table", "embedding", input, size, is_sparse, is_distributed, padding_idx, param_attr,
                   dtype)


def _lookup(op_type, caller, input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype):
    """layers.embedding (lookup_table) and fluid.embedding (lookup_table_v2): the same layer."""
    check_variable(caller, "input", input)
    if len(size) != 2:
        raise ValueError("%s: size must be [vocab, width], got %s" % (caller, size))
    helper = LayerHelper("embedding", param_attr=param_attr)
    remote_prefetch = is_sparse and not is_distributed
    w = helper.create_parameter(attr=helper.param_attr, shape=size, dtype=dtype, is_bias=False)
    out = helper.create_variable_for_type_inference(dtype)
    padding_idx = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else size[0] + padding_idx
    helper.append_op(type=op_type, inputs={"Ids": [input], "W": [w]}, outputs={"Out": [out]},
                     attrs={"is_sparse": is_sparse, "is_distributed": is_distributed,
                            "remote_prefetch": remote_prefetch, "padding_idx": int(padding_idx)})
    return out


def one_hot(input, depth, allow_out_of_range=False):
    """float32 one-hot rows of int ids [.., 1] (the trailing 1 becomes depth); `depth` an int or a
    1-element int Variable read at run time. Ids outside [0, depth) raise unless allow_out_of_range
    (then all-zero rows)."""
    return _one_hot("one_hot", "one_hot", input, depth, allow_out_of_range)


def _one_hot(op_type, caller, input, depth, allow_out_of_range):
    """layers.one_hot (one_hot) and fluid.one_hot (one_hot_v2): the same layer."""
    check_variable(caller, "input", input)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype="float32")
    inputs, attrs = {"X": [input]}, {"allow_out_of_range": bool(allow_out_of_range)}
    if isinstance(depth, Variable):
        depth.stop_gradient = True
        inputs["depth_tensor"] = [depth]
    else:
        attrs["depth"] = int(depth)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    out.stop_gradient = True
    return out


def slice(input, axes, starts, ends):
    """input[starts[i]:ends[i]] along each axes[i]; negative bounds count from the end, then clamp. `starts` and
    `ends` are lists of ints, lists that hold 1-element int Variables too, or 1-D int Variables (read at run time;
    the size of such an axis is then unknown at build time)."""
    check_variable("slice", "input", input)
    return _slice_op(input, axes, starts, ends)


def _slice_op(input, axes, starts, ends, decrease_axis=()):
    axes = [int(a) for a in axes]
    inputs, attrs = {"Input": [input]}, {"axes": axes, "decrease_axis": [int(a) for a in decrease_axis]}
    infer_flags = [1] * len(axes)
    for arg, bounds in (("starts", starts), ("ends", ends)):
        slot = "Starts" if arg == "starts" else "Ends"
        if isinstance(bounds, Variable):
            bounds.stop_gradient = True
            inputs[slot + "Tensor"] = [bounds]
            attrs[arg] = [-1] * len(axes)
            infer_flags = [-1] * len(axes)
        elif isinstance(bounds, (list, tuple)):
            if any(isinstance(b, Variable) for b in bounds):
                from .tensor import fill_constant
                tensors = []
                for i, b in enumerate(bounds):
                    if isinstance(b, Variable):
                        b.stop_gradient = True
                        tensors.append(b)
                        infer_flags[i] = -1
                    else:
                        tensors.append(fill_constant([1], "int32", int(b), force_cpu=True))
                inputs[slot + "TensorList"] = tensors
            attrs[arg] = [-1 if isinstance(b, Variable) else int(b) for b in bounds]
        else:
            raise TypeError("slice: '%s' must be a list or tuple (of ints or Variables) or a Variable, got %s"
                            % (arg, type(bounds).__name__))
    attrs["infer_flags"] = infer_flags
    return _simple("slice", inputs, attrs)


def getitem(x, item):
    """``x[item]`` (Fluid 1.8's Variable.__getitem__): `item` is an int or an int Variable (that dim is dropped), a
    slice with step 1 (or ``::-1``: the dim reversed), or a tuple of them, one per leading dim. A ``slice`` op (plus
    a ``reverse`` op for ``::-1``) reads it; Fluid's strided_slice for other steps is not supported."""
    items = item if isinstance(item, tuple) else (item,)
    axes, starts, ends, decrease, flipped = [], [], [], [], []
    for dim, it in enumerate(items):
        if isinstance(it, builtins.slice):  # (this module's `slice` is the layer)
            if it.start is None and it.stop is None and it.step in (None, 1):
                continue
            if it.start is None and it.stop is None and it.step == -1:
                flipped.append(dim)
                continue
            if it.step not in (None, 1):
                raise TypeError("Variable %s[%s]: a slice step other than 1 (or ::-1 alone) is not supported"
                                % (x.name, it))
            axes.append(dim)
            starts.append(0 if it.start is None else it.start)
            ends.append(10000000 if it.stop is None else it.stop)
        elif isinstance(it, Variable) or (isinstance(it, int) and not isinstance(it, bool)):
            axes.append(dim)
            decrease.append(dim)
            starts.append(it)
            if isinstance(it, Variable):
                from .tensor import fill_constant
                ends.append(elementwise_add(it, fill_constant([1], it.dtype, 1, force_cpu=True)))
            else:
                ends.append(it + 1 if it != -1 else 10000000)
        else:
            raise TypeError("Variable %s: an index must be an int, an int Variable or a slice, got %s"
                            % (x.name, type(it).__name__))
    out = _slice_op(x, axes, starts, ends, decrease) if axes else x
    if flipped:
        from .tensor import reverse
        out = reverse(out, flipped)
    return out


def gather(input, index, overwrite=True):
    """The rows of ``input`` (along dim 0) named by the int32/int64 ``index`` [N] (or [N, 1]).

    ``overwrite`` (Fluid 1.8) is accepted and ignored: the gradient always sums over repeated indices, which is
    the derivative; Fluid's default ``overwrite=True`` keeps the gradient of only one of them."""
    check_variable("gather", "input", input)
    check_variable("gather", "index", index)
    return _simple("gather", {"X": [input], "Index": [index]}, {"overwrite": bool(overwrite)})


def stack(x, axis=0):
    """Stacks equally shaped tensors along a new axis ``axis``."""
    if isinstance(x, Variable):
        x = [x]
    for v in x:
        check_variable("stack", "x", v)
    return _simple("stack", {"X": list(x)}, {"axis": 0 if axis is None else int(axis)}, out_slot="Y")


def unstack(x, axis=0, num=None):
    """Splits ``x`` along ``axis`` into ``num`` (default x.shape[axis]) tensors with that axis removed."""
    check_variable("unstack", "x", x)
    if num is None:
        if axis is None or not -len(x.shape) <= axis < len(x.shape) or x.shape[axis] < 0:
            raise ValueError("unstack: cannot infer num from %s of shape %s at axis %s; pass num"
                             % (x.name, x.shape, axis))
        num = x.shape[axis]
    helper = LayerHelper("unstack")
    outs = [helper.create_variable_for_type_inference(x.dtype) for _ in range(num)]
    helper.append_op(type="unstack", inputs={"X": [x]}, outputs={"Y": outs}, attrs={"axis": int(axis),
                                                                                   "num": int(num)})
    return outs


def _xshape_op(op_type, layer, input, attrs, name):
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type=op_type, inputs={"X": [input]}, outputs={"Out": [out], "XShape": [x_shape]}, attrs=attrs)
    return out


def squeeze(input, axes, name=None):
    """Removes the size-1 dims listed in ``axes`` (all size-1 dims if empty); no copy."""
    check_variable("squeeze", "input", input)
    return _xshape_op("squeeze2", "squeeze", input, {"axes": [int(a) for a in axes]}, name)


def unsqueeze(input, axes, name=None):
    """Inserts size-1 dims at ``axes`` (applied in order); no copy."""
    check_variable("unsqueeze", "input", input)
    return _xshape_op("unsqueeze2", "unsqueeze", input, {"axes": [int(a) for a in axes]}, name)


def lstm_unit(x_t, hidden_t_prev, cell_t_prev, forget_bias=0.0, param_attr=None, bias_attr=None, name=None):
    """One LSTM step (Fluid's lstm_unit): fc(concat([x_t, hidden_t_prev]), 4 * D) gives the gates (i, f, o, g),
    then C = sigmoid(f + forget_bias) * cell_t_prev + sigmoid(i) * tanh(g), H = sigmoid(o) * tanh(C).

    Returns (hidden, cell), each [N, D].
    """
    from .tensor import concat
    for arg, v in (("x_t", x_t), ("hidden_t_prev", hidden_t_prev), ("cell_t_prev", cell_t_prev)):
        check_variable("lstm_unit", arg, v)
        if len(v.shape) != 2:
            raise ValueError("lstm_unit: %s %s must have rank 2, got shape %s" % (arg, v.name, v.shape))
    batches = {v.shape[0] for v in (x_t, hidden_t_prev, cell_t_prev) if v.shape[0] >= 0}
    if len(batches) > 1:
        raise ValueError("lstm_unit: x_t %s, hidden_t_prev %s and cell_t_prev %s must have one batch size"
                         % (x_t.shape, hidden_t_prev.shape, cell_t_prev.shape))
    size = cell_t_prev.shape[1]
    if hidden_t_prev.shape[1] != size:
        raise ValueError("lstm_unit: hidden_t_prev %s and cell_t_prev %s must have the same width"
                         % (hidden_t_prev.shape, cell_t_prev.shape))
    helper = LayerHelper("lstm_unit", name=name)
    concat_out = concat(input=[x_t, hidden_t_prev], axis=1)
    fc_out = fc(input=concat_out, size=4 * size, param_attr=param_attr, bias_attr=bias_attr)
    c = helper.create_variable_for_type_inference(x_t.dtype)
    h = helper.create_variable_for_type_inference(x_t.dtype)
    helper.append_op(type="lstm_unit", inputs={"X": [fc_out], "C_prev": [cell_t_prev]}, outputs={"C": [c], "H": [h]},
                     attrs={"forget_bias": float(forget_bias)})
    return h, c


# ------------------------------------------------------------------ activations, prelu, maxout, logical, reductions
# (issue 14 "acts": rows of kernels/unary.cc whose Fluid layer lives in nn.py, and the ops beside them)

__all__ += ["elu", "selu", "swish", "hard_swish", "hard_sigmoid", "pow", "prelu", "maxout", "clip_by_norm",
            "logical_and", "logical_or", "logical_xor", "logical_not", "reduce_prod", "reduce_all", "reduce_any"]

elu = generate_layer_fn("elu", inputs=("x",))
swish = generate_layer_fn("swish", inputs=("x",))
hard_swish = generate_layer_fn("hard_swish", inputs=("x",))
hard_sigmoid = generate_layer_fn("hard_sigmoid", inputs=("x",))


def _selu_attrs(args):
    # Fluid: scale / alpha None leave the op's defaults (the SELU paper's constants)
    return {k: float(args[k]) for k in ("scale", "alpha") if args[k] is not None}


selu = generate_layer_fn("selu", inputs=("x",), attrs=(), prepare=_selu_attrs,
                         extra=[("scale", None, "output scale (None: 1.0507009873554805)"),
                                ("alpha", None, "scale of the negative part (None: 1.6732632423543772)")])


def _pow_factor(args):
    if not isinstance(args["factor"], (int, float)) or isinstance(args["factor"], bool):
        raise TypeError("pow: factor must be a float or a 1-element float32 Variable, got %s"
                        % type(args["factor"]).__name__)
    return {"factor": float(args["factor"])}


_pow_op = generate_layer_fn("pow", inputs=("x",), prepare=_pow_factor)


def pow(x, factor=1.0, name=None):
    if isinstance(factor, Variable):
        # Fluid 1.8 feeds a Variable factor to the pow op as its FactorTensor input (no gradient flows to it);
        # here it is elementwise_pow(x, factor) with factor broadcast, the same values and the same X@GRAD.
        check_variable("pow", "x", x)
        if factor.dtype != VarType.FP32:
            raise TypeError("pow: a Variable factor must be float32 (Fluid's FactorTensor), got %s %s"
                            % (factor.name, factor.dtype))
        if len(factor.shape) != 1 or factor.shape[0] not in (1, -1):
            raise ValueError("pow: a Variable factor must have shape [1] (Fluid's FactorTensor), got %s with shape %s"
                             % (factor.name, list(factor.shape)))
        factor.stop_gradient = True
        if x.dtype != factor.dtype:
            from .tensor import cast
            factor = cast(factor, x.dtype)
            factor.stop_gradient = True
        return elementwise_pow(x, factor, name=name)
    return _pow_op(x, factor, name)


pow.__signature__ = _pow_op.__signature__
pow.__doc__ = _pow_op.__doc__ + (
    "\n\nfactor may also be a float32 Variable of shape [1] (Fluid's FactorTensor input): the layer then appends "
    "elementwise_pow(x, factor) instead of pow (same values and X@GRAD; no gradient flows to factor).")


def prelu(x, mode, param_attr=None, name=None):
    """Parametric ReLU: out = x if x > 0 else alpha * x, with a learnable alpha (initialised to 0.25) shared by
    `mode`: 'all' (one alpha, shape [1]), 'channel' (one per channel, shape [1, C, 1, 1]) or 'element' (one per
    element of a sample, shape [1] + x.shape[1:]). The parameter is named like Fluid's (prelu_N.w_0)."""
    from ..initializer import Constant
    check_variable("prelu", "x", x)
    if mode not in ("all", "channel", "element"):
        raise ValueError("prelu: mode should be one of all, channel, element, got %r" % (mode,))
    if mode != "all":
        if len(x.shape) < 2:
            raise ValueError("prelu: mode %r needs x of rank >= 2, got %s with shape %s"
                             % (mode, x.name, list(x.shape)))
        per = list(x.shape[1:2]) if mode == "channel" else list(x.shape[1:])
        if any(d < 0 for d in per):
            raise ValueError("prelu: mode %r needs x's dims after the batch dim known, got %s with shape %s"
                             % (mode, x.name, list(x.shape)))
    alpha_shape = [1]
    if mode == "channel":
        alpha_shape = [1, x.shape[1]] + [1] * max(len(x.shape) - 2, 0)
    elif mode == "element":
        alpha_shape = [1] + list(x.shape[1:])
    helper = LayerHelper("prelu", param_attr=param_attr, name=name)
    alpha = helper.create_parameter(attr=helper.param_attr, shape=alpha_shape, dtype=x.dtype, is_bias=False,
                                    default_initializer=Constant(0.25))
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="prelu", inputs={"X": [x], "Alpha": [alpha]}, outputs={"Out": [out]}, attrs={"mode": mode})
    return out


def maxout(x, groups, name=None, axis=1):
    """Maxout: out[:, c] = max over k < groups of x[:, c * groups + k] along `axis` (1 for NCHW, -1 or 3 for
    NHWC); x.shape[axis] must be divisible by groups."""
    check_variable("maxout", "x", x)
    if axis not in (1, -1, 3):
        raise ValueError("maxout: axis must be 1, -1 or 3 (Fluid 1.8), got %r" % (axis,))
    return _simple("maxout", {"X": [x]}, {"groups": int(groups), "axis": int(axis)}, name=name)


def clip_by_norm(x, max_norm, name=None):
    """out = x * max_norm / norm(x) if the L2 norm of all of x exceeds max_norm, else x. No gradient (Fluid's)."""
    check_variable("clip_by_norm", "x", x)
    return _simple("clip_by_norm", {"X": [x]}, {"max_norm": float(max_norm)}, name=name)


def _logical(op_type, binary):
    return generate_layer_fn(op_type, inputs=("x", "y") if binary else ("x",), stop_gradient=True, out_arg="out")


logical_and = _logical("logical_and", True)
logical_or = _logical("logical_or", True)
logical_xor = _logical("logical_xor", True)
logical_not = _logical("logical_not", False)

reduce_prod = _reduce("reduce_prod")
reduce_all = _reduce("reduce_all")
reduce_any = _reduce("reduce_any")
# ------------------------------------------------------------------ index and shape layers (Fluid 1.8 nn.py)

__all__ += ["where", "gather_nd", "scatter", "scatter_nd_add", "scatter_nd", "expand", "expand_as", "shape",
            "size", "unique", "unique_with_counts"]


def _index_layer(layer, op_type, inputs, out_dtype, attrs=None, name=None, stop_gradient=False):
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(dtype=out_dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs or {})
    if stop_gradient:
        out.stop_gradient = True
    return out


def where(condition):
    """The int64 coordinates [N, rank] of the true entries of ``condition`` (op where_index), in memory order.

    ``gather_nd(x, where(mask))`` is the masked-select of Fluid 1.x. N is known only at run time."""
    check_variable("where", "condition", condition)
    return _index_layer("where_index", "where_index", {"Condition": [condition]}, VarType.INT64,
                        stop_gradient=True)


def gather_nd(input, index, name=None):
    """``input[index[..., 0], index[..., 1], ...]``: ``index`` [.., k] (int32/int64) holds k-tuples into the
    first k dims of ``input``; the result is ``index.shape[:-1] + input.shape[k:]``. Out-of-range tuples raise."""
    check_variable("gather_nd", "input", input)
    check_variable("gather_nd", "index", index)
    return _index_layer("gather_nd", "gather_nd", {"X": [input], "Index": [index]}, input.dtype, name=name)


def scatter(input, index, updates, name=None, overwrite=True):
    """A copy of ``input`` with rows ``index[i]`` (dim 0) set to ``updates[i]`` (``overwrite``: the last of
    repeated indices wins) or to the sum of the updates naming them (``overwrite=False``)."""
    for arg, v in (("input", input), ("index", index), ("updates", updates)):
        check_variable("scatter", arg, v)
    return _index_layer("scatter", "scatter", {"X": [input], "Ids": [index], "Updates": [updates]}, input.dtype,
                        {"overwrite": bool(overwrite)}, name)


def scatter_nd_add(ref, index, updates, name=None):
    """A copy of ``ref`` with ``updates[i]`` added at the k-tuple ``index[i]`` ([.., k], int32/int64); repeated
    tuples accumulate. ``updates`` is ``index.shape[:-1] + ref.shape[k:]``."""
    for arg, v in (("ref", ref), ("index", index), ("updates", updates)):
        check_variable("scatter_nd_add", arg, v)
    if ref.dtype != updates.dtype:
        raise TypeError("scatter_nd_add: ref %s (%s) and updates %s (%s) must have one dtype"
                        % (ref.name, ref.dtype, updates.name, updates.dtype))
    return _index_layer("scatter_nd_add", "scatter_nd_add", {"X": [ref], "Index": [index], "Updates": [updates]},
                        ref.dtype, name=name)


def scatter_nd(index, updates, shape, name=None):
    """``scatter_nd_add(zeros(shape), index, updates)``: a ``shape`` tensor of zeros with the updates added."""
    from .tensor import fill_constant
    check_variable("scatter_nd", "updates", updates)
    return scatter_nd_add(fill_constant(shape, updates.dtype, 0.0), index, updates, name)


def expand(x, expand_times, name=None):
    """``x`` tiled ``expand_times[i]`` times along each dim i (rank 1 to 6). ``expand_times`` is a list of ints
    (and, as in Fluid, 1-element int32 Variables, read at run time) or a 1-D int32 Variable."""
    check_variable("expand", "x", x)
    if x.dtype == VarType.BOOL and not x.stop_gradient:
        raise ValueError("expand: x %s of dtype bool must have stop_gradient=True" % x.name)
    helper = LayerHelper("expand", name=name)
    inputs, attrs = {"X": [x]}, {}
    if isinstance(expand_times, Variable):
        expand_times.stop_gradient = True
        inputs["ExpandTimes"] = [expand_times]
    elif isinstance(expand_times, (list, tuple)):
        if len(expand_times) != len(x.shape):
            raise ValueError("expand: expand_times %s must have one count per dim of x %s %s"
                             % (list(expand_times), x.name, list(x.shape)))
        if any(isinstance(t, Variable) for t in expand_times):
            from .tensor import fill_constant
            tensors = []
            for t in expand_times:
                if isinstance(t, Variable):
                    t.stop_gradient = True
                    tensors.append(t)
                else:
                    tensors.append(fill_constant([1], "int32", int(t)))
            inputs["expand_times_tensor"] = tensors
        attrs["expand_times"] = [-1 if isinstance(t, Variable) else int(t) for t in expand_times]
    else:
        raise TypeError("expand: expand_times must be a list, tuple or Variable, got %s" % type(expand_times).__name__)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="expand", inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    return out


def expand_as(x, target_tensor, name=None):
    """``x`` tiled to ``target_tensor``'s shape (each of its dims a multiple of x's)."""
    check_variable("expand_as", "x", x)
    check_variable("expand_as", "target_tensor", target_tensor)
    return _index_layer("expand_as", "expand_as", {"X": [x], "target_tensor": [target_tensor]}, x.dtype, name=name)


__all__ += ["sampling_id"]


def sampling_id(x, min=0.0, max=1.0, seed=0, dtype="float32"):
    """One id per row of ``x`` ([batch, classes] probabilities) drawn from that row: an int64 [batch] Variable.
    `seed` != 0 gives the same draws on every run. `dtype` is accepted as in Fluid 1.8, whose kernel writes int64
    whatever it says; the Variable is int64 here."""
    from .checks import check_dtype
    check_dtype("sampling_id", "x", x, ("float32", "float64"))
    helper = LayerHelper("sampling_id")
    out = helper.create_variable_for_type_inference(dtype=VarType.INT64, stop_gradient=True)
    helper.append_op(type="sampling_id", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"min": float(min), "max": float(max), "seed": int(seed)})
    return out


def shape(input):
    """The dims of ``input`` as an int32 [rank] tensor (read at run time: -1 dims are filled in)."""
    check_variable("shape", "input", input)
    return _index_layer("shape", "shape", {"Input": [input]}, VarType.INT32, stop_gradient=True)


def size(input):
    """The number of elements of ``input`` as an int64 [1] tensor."""
    check_variable("size", "input", input)
    return _index_layer("size", "size", {"Input": [input]}, VarType.INT64, stop_gradient=True)


def _unique(layer, x, dtype, with_counts):
    from ..framework import convert_np_dtype_to_dtype_ as to_dtype
    check_variable(layer, "x", x)
    index_dtype = to_dtype(dtype)
    if index_dtype not in (VarType.INT32, VarType.INT64):
        raise TypeError("%s: dtype must be int32 or int64, got %s" % (layer, dtype))
    helper = LayerHelper(layer)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    outputs = {"Out": [out]}
    for slot in ("Index", "Count") if with_counts else ("Index",):
        outputs[slot] = [helper.create_variable_for_type_inference(dtype=index_dtype, stop_gradient=True)]
    helper.append_op(type=layer, inputs={"X": [x]}, outputs=outputs, attrs={"dtype": int(index_dtype)})
    out.stop_gradient = True
    return (out,) + tuple(outputs[s][0] for s in outputs if s != "Out")


def unique(x, dtype="int32"):
    """(out, index): the distinct values of the 1-D ``x`` in order of first appearance, and for each entry of x
    the position of its value in out (``dtype`` int32 or int64), so ``out[index] == x``."""
    return _unique("unique", x, dtype, False)


def unique_with_counts(x, dtype="int32"):
    """(out, index, count): as ``unique``, and how many entries of ``x`` each value of out has (``dtype``)."""
    return _unique("unique_with_counts", x, dtype, True)
def _selected_rows_layer(layer, op_type, x, name, out_type):
    check_variable(layer, "x", x)
    if x.type != VarType.SELECTED_ROWS:
        raise TypeError("%s: x '%s' must be a SelectedRows variable (a sparse gradient, e.g. of embedding with "
                        "is_sparse=True), got %s" % (layer, x.name, x.type))
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    out.desc.set_type(int(out_type))
    helper.append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]})
    return out


def merge_selected_rows(x, name=None):
    """SelectedRows x with its repeated rows summed into one, rows ascending (Fluid's MergeAdd)."""
    return _selected_rows_layer("merge_selected_rows", "merge_selected_rows", x, name, VarType.SELECTED_ROWS)


def get_tensor_from_selected_rows(x, name=None):
    """The value tensor [len(rows), ...] of SelectedRows x, as a dense LoDTensor (the rows are dropped)."""
    return _selected_rows_layer("get_tensor_from_selected_rows", "get_tensor_from_selected_rows", x, name,
                                VarType.LOD_TENSOR)


__all__ += ["merge_selected_rows", "get_tensor_from_selected_rows"]
# ------------------------------------------------------------------ image and GAN layers (issue 14, "image" part)
__all__ += ["sigmoid_cross_entropy_with_logits", "pad", "pad2d", "pad_constant_like",
            "image_resize", "resize_bilinear", "resize_nearest", "pixel_shuffle", "space_to_depth",
            "crop", "unfold"]


def _check_float(layer, name, v):
    check_variable(layer, name, v)
    if v.dtype not in (VarType.FP32, VarType.FP64):
        raise TypeError("%s: '%s' %s must be float32 or float64, got %s" % (layer, name, v.name, v.dtype))


def sigmoid_cross_entropy_with_logits(x, label, ignore_index=-100, name=None, normalize=False):
    """Elementwise sigmoid cross entropy of logits `x` against `label` (same shape and dtype, values in [0, 1]):
    max(x, 0) - x * label + log(1 + exp(-|x|)); 0 where label == ignore_index. With `normalize` each element is
    divided by the number of labels that are not ignore_index (Fluid 1.8's layer)."""
    _check_float("sigmoid_cross_entropy_with_logits", "x", x)
    _check_float("sigmoid_cross_entropy_with_logits", "label", label)
    return _simple("sigmoid_cross_entropy_with_logits", {"X": [x], "Label": [label]},
                   {"ignore_index": int(ignore_index), "normalize": bool(normalize)}, name=name)


def pad(x, paddings, pad_value=0., name=None):
    """Pads `x` with `pad_value`: `paddings` holds 2 * rank ints, [before_0, after_0, before_1, after_1, ...]."""
    _check_float("pad", "x", x)
    paddings = [int(p) for p in paddings]
    if len(paddings) != 2 * len(x.shape) or min(paddings, default=0) < 0:
        raise ValueError("pad: paddings must hold 2 * rank = %d values >= 0 for x %s of shape %s, got %s"
                         % (2 * len(x.shape), x.name, list(x.shape), paddings))
    return _simple("pad", {"X": [x]}, {"paddings": paddings, "pad_value": float(pad_value)}, name=name)


def pad2d(input, paddings=(0, 0, 0, 0), mode="constant", pad_value=0.0, data_format="NCHW", name=None):
    """Pads NCHW images by `paddings` [top, bottom, left, right] (a list, or an int32 Variable of 4 values read
    at run time) in `mode` 'constant' (`pad_value`), 'reflect' (mirrored, edge not repeated) or 'edge'.
    Only data_format 'NCHW' is supported."""
    _check_float("pad2d", "input", input)
    if data_format != "NCHW":
        raise ValueError("pad2d: data_format must be 'NCHW' (the only layout fluidlite supports), got %r"
                         % (data_format,))
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError("pad2d: mode must be 'constant', 'reflect' or 'edge', got %r" % (mode,))
    if len(input.shape) != 4:
        raise ValueError("pad2d: input %s must be 4-D [N, C, H, W], got shape %s" % (input.name, list(input.shape)))
    inputs = {"X": [input]}
    attrs = {"mode": mode, "pad_value": float(pad_value), "data_format": data_format}
    if isinstance(paddings, Variable):
        inputs["Paddings"] = [paddings]
    else:
        paddings = [int(p) for p in paddings]
        if len(paddings) != 4:
            raise ValueError("pad2d: paddings must be [top, bottom, left, right], got %s" % (paddings,))
        attrs["paddings"] = paddings
    return _simple("pad2d", inputs, attrs, name=name)


def pad_constant_like(x, y, pad_value=0., name=None):
    """Pads `y` at the end of every axis with `pad_value` up to the shape of `x` (same rank, y's dims <= x's)."""
    check_variable("pad_constant_like", "x", x)
    _check_float("pad_constant_like", "y", y)
    return _simple("pad_constant_like", {"X": [x], "Y": [y]}, {"pad_value": float(pad_value)}, name=name,
                   dtype=y.dtype)


def image_resize(input, out_shape=None, scale=None, name=None, resample="BILINEAR", actual_shape=None,
                 align_corners=True, align_mode=1, data_format="NCHW"):
    """Resizes NCHW images (ops bilinear_interp / nearest_interp, Fluid 1.8) to `out_shape` [H, W] (ints, ints and
    1-element int32 Variables, or an int32 Variable of 2 values) or by `scale` (a float > 0 or a float32
    Variable); `actual_shape` (deprecated) overrides the size at run time. `resample`: 'BILINEAR' or 'NEAREST'
    ('TRILINEAR' and data_format 'NHWC' are not supported)."""
    methods = {"BILINEAR": "bilinear", "NEAREST": "nearest"}
    layer = "image_resize"
    if resample not in methods:
        raise ValueError("%s: resample must be 'BILINEAR' or 'NEAREST' (fluidlite has no TRILINEAR), got %r"
                         % (layer, resample))
    _check_float(layer, "input", input)
    if len(input.shape) != 4:
        raise ValueError("%s: input %s must be 4-D [N, C, H, W], got shape %s" % (layer, input.name, list(input.shape)))
    if data_format != "NCHW":
        raise ValueError("%s: data_format must be 'NCHW' (the only layout fluidlite supports), got %r"
                         % (layer, data_format))
    if not isinstance(align_corners, bool):
        raise TypeError("%s: align_corners must be a bool, got %r" % (layer, align_corners))
    if align_mode not in (0, 1):
        raise ValueError("%s: align_mode must be 0 or 1, got %r" % (layer, align_mode))
    if out_shape is None and scale is None:
        raise ValueError("%s: one of out_shape and scale must not be None" % layer)
    op_type = methods[resample] + "_interp"
    inputs = {"X": [input]}
    attrs = {"out_d": -1, "out_h": -1, "out_w": -1, "scale": 0.0, "interp_method": methods[resample],
             "align_corners": align_corners, "align_mode": int(align_mode), "data_layout": data_format}
    if out_shape is not None:
        if isinstance(out_shape, Variable):
            inputs["OutSize"] = [out_shape]
        elif isinstance(out_shape, (list, tuple)):
            if len(out_shape) != 2:
                raise ValueError("%s: out_shape must be [out_h, out_w], got %r" % (layer, out_shape))
            if any(isinstance(v, Variable) for v in out_shape):
                helper = LayerHelper(op_type)
                sizes = []
                for v in out_shape:
                    if isinstance(v, Variable):
                        sizes.append(v)
                        continue
                    t = helper.create_variable_for_type_inference("int32")
                    helper.append_op(type="fill_constant", outputs={"Out": [t]},
                                     attrs={"shape": [1], "dtype": int(VarType.INT32), "value": float(v)})
                    sizes.append(t)
                inputs["SizeTensor"] = sizes
            else:
                if any(int(v) <= 0 for v in out_shape):
                    raise ValueError("%s: out_shape must be positive, got %r" % (layer, out_shape))
                attrs["out_h"], attrs["out_w"] = int(out_shape[0]), int(out_shape[1])
        else:
            raise TypeError("%s: out_shape must be a list, tuple or Variable, got %s"
                            % (layer, type(out_shape).__name__))
    else:
        if isinstance(scale, Variable):
            inputs["Scale"] = [scale]
        elif isinstance(scale, (int, float)) and scale > 0:
            attrs["scale"] = float(scale)
        else:
            raise ValueError("%s: scale must be a float > 0 or a Variable, got %r" % (layer, scale))
    if isinstance(actual_shape, Variable):
        inputs["OutSize"] = [actual_shape]
    elif actual_shape is not None:
        raise TypeError("%s: actual_shape must be a Variable, got %s" % (layer, type(actual_shape).__name__))
    return _simple(op_type, inputs, attrs, name=name, dtype=input.dtype)


def resize_bilinear(input, out_shape=None, scale=None, name=None, actual_shape=None, align_corners=True,
                    align_mode=1, data_format="NCHW"):
    """image_resize with resample='BILINEAR' (op bilinear_interp)."""
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape, align_corners, align_mode,
                        data_format)


def resize_nearest(input, out_shape=None, scale=None, name=None, actual_shape=None, align_corners=True,
                   data_format="NCHW"):
    """image_resize with resample='NEAREST' (op nearest_interp)."""
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape, align_corners, 1, data_format)


def pixel_shuffle(x, upscale_factor):
    """[N, C * r * r, H, W] -> [N, C, H * r, W * r] with r = `upscale_factor` (sub-pixel convolution)."""
    check_variable("pixel_shuffle", "x", x)
    if not isinstance(upscale_factor, int) or upscale_factor < 1:
        raise TypeError("pixel_shuffle: upscale_factor must be a positive int, got %r" % (upscale_factor,))
    return _simple("pixel_shuffle", {"X": [x]}, {"upscale_factor": upscale_factor})


def space_to_depth(x, blocksize, name=None):
    """[N, C, H, W] -> [N, C * b * b, H / b, W / b] with b = `blocksize`, in Fluid's element order (Darknet's
    reorg layer)."""
    check_variable("space_to_depth", "x", x)
    if not isinstance(blocksize, int) or blocksize < 1:
        raise TypeError("space_to_depth: blocksize must be a positive int, got %r" % (blocksize,))
    return _simple("space_to_depth", {"X": [x]}, {"blocksize": blocksize}, name=name)


def crop(x, shape=None, offsets=None, name=None):
    """The box of `x` starting at `offsets` (a list, an int32 Variable of rank values, or None: zeros) with
    `shape` (a list, -1 allowed for the batch dim, or a Variable whose shape the box takes)."""
    check_variable("crop", "x", x)
    if not isinstance(shape, (list, tuple, Variable)):
        raise TypeError("crop: shape must be a list, tuple or Variable, got %s" % type(shape).__name__)
    if offsets is None:
        offsets = [0] * len(x.shape)
    inputs, attrs = {"X": [x]}, {}
    if isinstance(shape, Variable):
        inputs["Y"] = [shape]
    else:
        attrs["shape"] = [int(v) for v in shape]
    if isinstance(offsets, Variable):
        inputs["Offsets"] = [offsets]
    else:
        attrs["offsets"] = [int(v) for v in offsets]
    return _simple("crop", inputs, attrs, name=name, dtype=x.dtype)


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """im2col (op unfold): NCHW `x` -> [N, C * kh * kw, L], one column per sliding block. `kernel_sizes`,
    `strides` and `dilations` are ints or [h, w]; `paddings` an int, [h, w] or [top, left, bottom, right]."""
    _check_float("unfold", "x", x)
    if len(x.shape) != 4:
        raise ValueError("unfold: x %s must be 4-D [N, C, H, W], got shape %s" % (x.name, list(x.shape)))

    def pair(arg, v):
        v = [v, v] if isinstance(v, int) else list(v)
        if len(v) != 2:
            raise ValueError("unfold: %s must be an int or a list of 2 ints, got %r" % (arg, v))
        return [int(e) for e in v]

    if isinstance(paddings, int):
        paddings = [paddings] * 4
    elif len(paddings) == 2:
        paddings = list(paddings) * 2
    elif len(paddings) != 4:
        raise ValueError("unfold: paddings must be an int, [h, w] or [top, left, bottom, right], got %r" % (paddings,))
    attrs = {"kernel_sizes": pair("kernel_sizes", kernel_sizes), "strides": pair("strides", strides),
             "paddings": [int(p) for p in paddings], "dilations": pair("dilations", dilations)}
    return _simple("unfold", {"X": [x]}, attrs, name=name, out_slot="Y")
