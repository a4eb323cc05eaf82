"""Convolution layers (Fluid 1.x names): conv2d."""
from ..framework import Variable
from ..initializer import Normal
from ..layer_helper import LayerHelper

__all__ = ["conv2d"]


def _pair(layer, name, value):
    """An int or a pair of ints -> [a, b]."""
    if isinstance(value, int):
        return [value, value]
    try:
        pair = [int(v) for v in value]
    except TypeError:
        pair = []
    if len(pair) != 2 or any(p != v for p, v in zip(pair, value)):
        raise ValueError("%s: %s must be an int or a pair of ints, got %r" % (layer, name, value))
    return pair


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None, param_attr=None,
           bias_attr=None, use_cudnn=True, act=None, name=None):
    """2-D convolution of an NCHW `input` with `num_filters` filters of `filter_size` (int or (h, w)), plus a
    bias per filter and `act`. `stride`, `padding` and `dilation` are ints or (h, w) pairs; `groups` splits
    the channels into independent convolutions (groups == channels: depthwise). The filter
    ``conv2d_N.w_0`` [num_filters, C/groups, kh, kw] starts as Normal(0, sqrt(2 / (kh*kw*C))), like Fluid."""
    if not isinstance(input, Variable):
        raise TypeError("conv2d: 'input' must be a Variable, got %s" % type(input).__name__)
    if len(input.shape) != 4:
        raise ValueError("conv2d: input %s must be 4-D [N, C, H, W], got shape %s" % (input.name, list(input.shape)))
    if param_attr is False:
        raise ValueError("conv2d: param_attr cannot be False (the filter is required)")
    if not isinstance(use_cudnn, bool):
        raise ValueError("conv2d: use_cudnn must be a bool, got %r" % (use_cudnn,))
    num_channels = input.shape[1]
    if num_channels < 0:
        raise ValueError("conv2d: input %s has an unknown channel count in shape %s" % (input.name, list(input.shape)))
    # Fluid's choice of op type: depthwise_conv2d when every group holds one input channel (and cuDNN is off).
    op_type = "conv2d"
    if groups is not None and num_channels == groups and num_filters % num_channels == 0 and not use_cudnn:
        op_type = "depthwise_conv2d"
    helper = LayerHelper(op_type, input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    groups = 1 if groups is None else int(groups)
    filter_size = _pair("conv2d", "filter_size", filter_size)
    stride = _pair("conv2d", "stride", stride)
    padding = _pair("conv2d", "padding", padding)
    dilation = _pair("conv2d", "dilation", dilation)
    if min(filter_size) <= 0:
        raise ValueError("conv2d: filter_size must be positive, got %s" % (filter_size,))
    # The op's shape inference rejects bad groups (and every other shape error) with the shapes named.
    filter_shape = [num_filters, num_channels // groups if groups >= 1 else num_channels] + filter_size
    std = (2.0 / (filter_size[0] * filter_size[1] * num_channels)) ** 0.5
    w = helper.create_parameter(attr=helper.param_attr, shape=filter_shape, dtype=dtype,
                                default_initializer=Normal(0.0, std, 0))
    pre_bias = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type=op_type, inputs={"Input": [input], "Filter": [w]}, outputs={"Output": [pre_bias]},
                     attrs={"strides": stride, "paddings": padding, "dilations": dilation, "groups": groups,
                            "use_cudnn": use_cudnn, "use_mkldnn": False})
    pre_act = helper.append_bias_op(pre_bias, dim_start=1, dim_end=2)
    return helper.append_activation(pre_act)
