"""Pooling, normalisation and regularisation layers (Fluid 1.x names): pool2d, batch_norm, dropout, flatten."""
from ..framework import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["pool2d", "batch_norm", "dropout", "flatten"]


def _pair(value, name, layer):
    """An int or a 2-sequence of ints as [a, b] (Fluid's utils.convert_to_list(value, 2, name))."""
    if isinstance(value, int):
        return [value, value]
    try:
        values = [int(v) for v in value]
    except TypeError:
        raise TypeError("%s: %s must be an int or a list of 2 ints, got %r" % (layer, name, value)) from None
    if len(values) != 2:
        raise ValueError("%s: %s must be an int or a list of 2 ints, got %r" % (layer, name, value))
    return values


def _check_var(layer, name, v):
    if not isinstance(v, Variable):
        raise TypeError("%s: '%s' must be a Variable, got %s" % (layer, name, type(v).__name__))


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           use_cudnn=True, ceil_mode=False, name=None, exclusive=True):
    """Max or average pooling over H, W of an NCHW input. ``pool_size``, ``pool_stride`` and
    ``pool_padding`` take an int or [h, w]; ``global_pooling`` pools the whole plane to 1 x 1;
    ``ceil_mode`` rounds the output size up; ``exclusive`` (avg) leaves padding out of the divisor."""
    _check_var("pool2d", "input", input)
    if pool_type not in ("max", "avg"):
        raise ValueError("pool2d: pool_type must be 'max' or 'avg', got %r" % (pool_type,))
    if not global_pooling and pool_size == -1:
        raise ValueError("pool2d: pool_size must be given when global_pooling is False")
    helper = LayerHelper("pool2d", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="pool2d", inputs={"X": input}, outputs={"Out": out},
                     attrs={"pooling_type": pool_type,
                            "ksize": _pair(pool_size, "pool_size", "pool2d") if pool_size != -1 else [-1, -1],
                            "global_pooling": bool(global_pooling),
                            "strides": _pair(pool_stride, "pool_stride", "pool2d"),
                            "paddings": _pair(pool_padding, "pool_padding", "pool2d"),
                            "use_cudnn": bool(use_cudnn), "ceil_mode": bool(ceil_mode), "exclusive": bool(exclusive)})
    return out


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None, bias_attr=None,
               data_layout="NCHW", in_place=False, name=None, moving_mean_name=None, moving_variance_name=None,
               do_model_average_for_mean_and_var=False, fuse_with_relu=False, use_global_stats=False):
    """Batch normalisation over the channel axis (1 for NCHW, last for NHWC): scale (init 1) and bias
    (init 0) are trainable; the moving mean (init 0) and variance (init 1) are persistable, not trainable,
    updated in training as ``old * momentum + batch * (1 - momentum)`` and used when ``is_test`` or
    ``use_global_stats`` (``Program.clone(for_test=True)`` sets ``is_test``)."""
    _check_var("batch_norm", "input", input)
    helper = LayerHelper("batch_norm", input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    shape = input.shape
    if len(shape) < 2:
        raise ValueError("batch_norm: input %s must have at least 2 dims (a batch of channels), got shape %s"
                         % (input.name, list(shape)))
    if data_layout == "NCHW":
        channels = shape[1]
    elif data_layout == "NHWC":
        channels = shape[-1]
    else:
        raise ValueError("batch_norm: unsupported data_layout %r (NCHW or NHWC)" % (data_layout,))
    if channels < 0:
        raise ValueError("batch_norm: the channel dim of input %s %s must be known" % (input.name, list(shape)))
    param_shape = [channels]
    scale = helper.create_parameter(attr=helper.param_attr, shape=param_shape, dtype=dtype,
                                    default_initializer=Constant(1.0))
    bias = helper.create_parameter(attr=helper.bias_attr, shape=param_shape, dtype=dtype, is_bias=True)
    mean = helper.create_parameter(attr=ParamAttr(name=moving_mean_name, initializer=Constant(0.0), trainable=False,
                                                  do_model_average=do_model_average_for_mean_and_var),
                                   shape=param_shape, dtype=dtype)
    mean.stop_gradient = True
    variance = helper.create_parameter(attr=ParamAttr(name=moving_variance_name, initializer=Constant(1.0),
                                                      trainable=False,
                                                      do_model_average=do_model_average_for_mean_and_var),
                                       shape=param_shape, dtype=dtype)
    variance.stop_gradient = True
    saved_mean = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    out = input if in_place else helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="batch_norm",
                     inputs={"X": input, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance},
                     outputs={"Y": out, "MeanOut": mean, "VarianceOut": variance, "SavedMean": saved_mean,
                              "SavedVariance": saved_variance},
                     attrs={"momentum": float(momentum), "epsilon": float(epsilon), "is_test": bool(is_test),
                            "data_layout": data_layout, "fuse_with_relu": bool(fuse_with_relu),
                            "use_global_stats": bool(use_global_stats)})
    return helper.append_activation(out)


def dropout(x, dropout_prob, is_test=False, seed=None, name=None, dropout_implementation="downgrade_in_infer"):
    """Zeroes each element with probability ``dropout_prob`` in training. ``downgrade_in_infer`` scales by
    1 - p at inference; ``upscale_in_train`` divides kept elements by 1 - p in training. A ``seed`` (or the
    program's ``random_seed``) makes the mask reproducible."""
    _check_var("dropout", "x", x)
    helper = LayerHelper("dropout", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    mask = helper.create_variable_for_type_inference(dtype=x.dtype, stop_gradient=True)
    if (seed is None or seed == 0) and helper.main_program.random_seed != 0:
        seed = helper.main_program.random_seed
    helper.append_op(type="dropout", inputs={"X": [x]}, outputs={"Out": [out], "Mask": [mask]},
                     attrs={"dropout_prob": float(dropout_prob), "is_test": bool(is_test),
                            "fix_seed": seed is not None, "seed": int(seed) if seed is not None else 0,
                            "dropout_implementation": dropout_implementation})
    return out


def flatten(x, axis=1, name=None):
    """[d0, ..., dn-1] -> [d0 * ... * d(axis-1), d(axis) * ... * dn-1] without copying (op flatten2)."""
    _check_var("flatten", "x", x)
    if not isinstance(axis, int) or axis < 0:
        raise ValueError("flatten: axis must be a non-negative int, got %r" % (axis,))
    helper = LayerHelper("flatten2", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="flatten2", inputs={"X": x}, outputs={"Out": out, "XShape": x_shape},
                     attrs={"axis": axis})
    return out
