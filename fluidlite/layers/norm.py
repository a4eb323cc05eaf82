"""Pooling, normalisation and regularisation layers (Fluid 1.x names): pool2d, batch_norm, layer_norm, group_norm,
instance_norm, affine_channel, dropout, flatten."""
import functools
import operator
import warnings

from ..framework import dtype_to_str
from ..initializer import Constant
from ..layer_helper import LayerHelper
from .checks import check_variable
from ..param_attr import ParamAttr

__all__ = ["pool2d", "batch_norm", "layer_norm", "group_norm", "instance_norm", "affine_channel", "dropout", "flatten"]


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


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           use_cudnn=True, ceil_mode=False, name=None, exclusive=True):
    """Max or average pooling over H, W of an NCHW input. ``pool_size``, ``pool_stride`` and
    ``pool_padding`` take an int or [h, w]; ``global_pooling`` pools the whole plane to 1 x 1;
    ``ceil_mode`` rounds the output size up; ``exclusive`` (avg) leaves padding out of the divisor."""
    check_variable("pool2d", "input", input)
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
    check_variable("batch_norm", "input", input)
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
    check_variable("dropout", "x", x)
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
    check_variable("flatten", "x", x)
    if not isinstance(axis, int) or axis < 0:
        raise ValueError("flatten: axis must be a non-negative int, got %r" % (axis,))
    helper = LayerHelper("flatten2", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="flatten2", inputs={"X": x}, outputs={"Out": out, "XShape": x_shape},
                     attrs={"axis": axis})
    return out


def _check_float_input(layer, name, v):
    check_variable(layer, name, v)
    dtype = dtype_to_str(v.dtype)
    if dtype not in ("float32", "float64"):
        raise TypeError("%s: %s %s must be float32 or float64, got %s" % (layer, name, v.name, dtype))


def layer_norm(input, scale=True, shift=True, begin_norm_axis=1, epsilon=1e-05, param_attr=None, bias_attr=None,
               act=None, name=None):
    """Normalises each slice ``input[i_0, ..., i_{k-1}, :, ...]`` (k = ``begin_norm_axis``) by its own mean and
    biased variance: ``(x - mean) / sqrt(var + epsilon)``, then scales (``scale``: a parameter of the
    normalised size, init 1) and shifts (``shift``: bias, init 0). ``epsilon`` must be in [0, 0.001]."""
    _check_float_input("layer_norm", "input", input)
    shape = list(input.shape)
    if not isinstance(begin_norm_axis, int) or not 1 <= begin_norm_axis < len(shape):
        raise ValueError("layer_norm: begin_norm_axis must be an int in [1, %d) for input %s of shape %s, got %r"
                         % (len(shape), input.name, shape, begin_norm_axis))
    normalized = shape[begin_norm_axis:]
    if any(d < 0 for d in normalized):
        raise ValueError("layer_norm: the normalised dims %s (from begin_norm_axis %d) of input %s %s must be known"
                         % (normalized, begin_norm_axis, input.name, shape))
    helper = LayerHelper("layer_norm", input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    param_shape = [functools.reduce(operator.mul, normalized, 1)]
    inputs = {"X": input}
    if scale:
        if param_attr is False:
            raise ValueError("layer_norm: param_attr should not be False when using scale.")
        inputs["Scale"] = helper.create_parameter(attr=helper.param_attr, shape=param_shape, dtype=dtype,
                                                  default_initializer=Constant(1.0))
    elif param_attr:
        warnings.warn("param_attr is only available with scale is True.", stacklevel=2)
    if shift:
        if bias_attr is False:
            raise ValueError("layer_norm: bias_attr should not be False when using shift.")
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr, shape=param_shape, dtype=dtype, is_bias=True)
    elif bias_attr:
        warnings.warn("bias_attr is only available with shift is True.", stacklevel=2)
    mean = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="layer_norm", inputs=inputs, outputs={"Y": out, "Mean": mean, "Variance": variance},
                     attrs={"epsilon": float(epsilon), "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out)


def group_norm(input, groups, epsilon=1e-05, param_attr=None, bias_attr=None, act=None, data_layout="NCHW",
               name=None):
    """Normalises each sample's channels in ``groups`` groups (mean and biased variance per sample and group).
    As in Fluid 1.8, the per-channel scale (init 1) and bias (init 0) are created only when ``param_attr`` /
    ``bias_attr`` is given (truthy); by default the output is not scaled or shifted."""
    _check_float_input("group_norm", "input", input)
    shape = list(input.shape)
    if len(shape) < 2:
        raise ValueError("group_norm: input %s must have at least 2 dims, got shape %s" % (input.name, shape))
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError("group_norm: data_layout must be 'NCHW' or 'NHWC', got %r" % (data_layout,))
    channels = shape[1] if data_layout == "NCHW" else shape[-1]
    if not isinstance(groups, int) or groups < 1:
        raise ValueError("group_norm: groups must be a positive int, got %r" % (groups,))
    if channels >= 0 and channels % groups != 0:
        raise ValueError("group_norm: groups %d must divide the %d channels of input %s %s (data_layout %s)"
                         % (groups, channels, input.name, shape, data_layout))
    helper = LayerHelper("group_norm", input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    inputs = {"X": input}
    if param_attr:
        inputs["Scale"] = helper.create_parameter(attr=helper.param_attr, shape=[channels], dtype=dtype,
                                                  default_initializer=Constant(1.0))
    if bias_attr:
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr, shape=[channels], dtype=dtype, is_bias=True)
    mean = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="group_norm", inputs=inputs, outputs={"Y": out, "Mean": mean, "Variance": variance},
                     attrs={"epsilon": float(epsilon), "groups": groups, "data_layout": data_layout})
    return helper.append_activation(out)


def instance_norm(input, epsilon=1e-05, param_attr=None, bias_attr=None, name=None):
    """Normalises each (sample, channel) plane of an NCHW-style input (rank 2 to 5) by its own mean and biased
    variance, then applies a per-channel scale (init 1) and bias (init 0). ``epsilon`` must be in [0, 0.001]."""
    _check_float_input("instance_norm", "input", input)
    shape = list(input.shape)
    if not 2 <= len(shape) <= 5:
        raise ValueError("instance_norm: expected 2D or 3D or 4D or 5D input (got %dD input %s, shape %s)"
                         % (len(shape), input.name, shape))
    if shape[1] < 0:
        raise ValueError("instance_norm: the channel dim of input %s %s must be known" % (input.name, shape))
    helper = LayerHelper("instance_norm", input=input, param_attr=param_attr, bias_attr=bias_attr, name=name)
    dtype = helper.input_dtype()
    scale = helper.create_parameter(attr=helper.param_attr, shape=[shape[1]], dtype=dtype,
                                    default_initializer=Constant(1.0))
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[shape[1]], dtype=dtype, is_bias=True,
                                   default_initializer=Constant(0.0))
    saved_mean = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="instance_norm", inputs={"X": input, "Scale": scale, "Bias": bias},
                     outputs={"Y": out, "SavedMean": saved_mean, "SavedVariance": saved_variance},
                     attrs={"epsilon": float(epsilon)})
    return out


def affine_channel(x, scale=None, bias=None, data_layout="NCHW", name=None, act=None):
    """``x * scale + bias`` per channel (axis 1 for NCHW, last for NHWC); ``scale`` and ``bias`` are [C]
    Variables the caller creates (e.g. with ``create_parameter``), as in Fluid."""
    _check_float_input("affine_channel", "x", x)
    for arg, v in (("scale", scale), ("bias", bias)):
        if v is None:
            raise ValueError("affine_channel: %s must be given (a [C] Variable) for x %s" % (arg, x.name))
        check_variable("affine_channel", arg, v)
    if data_layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise ValueError("affine_channel: data_layout must be 'NCHW' or 'NHWC', got %r" % (data_layout,))
    helper = LayerHelper("affine_channel", name=name, act=act)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="affine_channel", inputs={"X": x, "Scale": scale, "Bias": bias}, outputs={"Out": out},
                     attrs={"data_layout": data_layout})
    return helper.append_activation(out)
