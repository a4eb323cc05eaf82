"""Convolution layers (Fluid 1.x names): conv2d, conv2d_transpose."""
from ..framework import Variable
from ..initializer import Normal
from ..layer_helper import LayerHelper

__all__ = ["conv2d", "conv2d_transpose"]


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


def _transpose_padding(padding):
    """Fluid 1.8's padding argument of conv2d_transpose -> (padding_algorithm, [top, bottom, left, right])."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise ValueError("conv2d_transpose: padding must be 'SAME', 'VALID', an int or a list, got %r" % (padding,))
        return algo, [0, 0, 0, 0]
    if isinstance(padding, (list, tuple)) and len(padding) == 4:
        if all(isinstance(p, (list, tuple)) for p in padding):
            # [[0, 0], [0, 0], [top, bottom], [left, right]] (NCHW): the batch and channel pads must be 0.
            if any(list(p) != [0, 0] for p in padding[:2]):
                raise ValueError("conv2d_transpose: non-zero padding %r on the batch or channel dim" % (padding,))
            padding = [v for p in padding[2:] for v in p]
        try:
            pads = [int(p) for p in padding]
        except TypeError:
            pads = []
        if len(pads) != 4 or any(p != v for p, v in zip(pads, padding)):
            raise ValueError("conv2d_transpose: padding must be an int, a pair or 4 ints, got %r" % (padding,))
        return "EXPLICIT", pads
    pair = _pair("conv2d_transpose", "padding", padding)
    return "EXPLICIT", [pair[0], pair[0], pair[1], pair[1]]


def conv2d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0, stride=1, dilation=1,
                     groups=None, param_attr=None, bias_attr=None, use_cudnn=True, act=None, name=None,
                     data_format="NCHW"):
    """2-D transposed convolution (the data gradient of conv2d) of an NCHW `input` [N, C, H, W] with
    `num_filters` filters, plus a bias per filter and `act`, as in Fluid 1.8. The output is
    [N, num_filters, Ho, Wo] with Ho = (H - 1) * stride - pad_top - pad_bottom + dilation * (kh - 1) + 1;
    `output_size` (int or (h, w)) may ask for up to stride - 1 more. Without `filter_size` the kernel is sized
    so that the output is `output_size`. `padding` is an int, (h, w), [top, bottom, left, right] or 'SAME' /
    'VALID'. The filter ``conv2d_transpose_N.w_0`` is [C, num_filters / groups, kh, kw] (Xavier by default).
    Only data_format 'NCHW' is supported; `use_cudnn` only picks the op type, as in Fluid."""
    if not isinstance(input, Variable):
        raise TypeError("conv2d_transpose: 'input' must be a Variable, got %s" % type(input).__name__)
    if param_attr is False:
        raise ValueError("conv2d_transpose: param_attr cannot be False (the filter is required)")
    if data_format != "NCHW":
        raise ValueError("conv2d_transpose: data_format must be 'NCHW' (the only layout fluidlite supports), got %r"
                         % (data_format,))
    if len(input.shape) != 4:
        raise ValueError("conv2d_transpose: input %s must be 4-D [N, C, H, W], got shape %s"
                         % (input.name, list(input.shape)))
    if not isinstance(use_cudnn, bool):
        raise ValueError("conv2d_transpose: use_cudnn must be a bool, got %r" % (use_cudnn,))
    input_channel = input.shape[1]
    if input_channel < 0:
        raise ValueError("conv2d_transpose: input %s has an unknown channel count in shape %s"
                         % (input.name, list(input.shape)))
    op_type = "conv2d_transpose"
    if input_channel == groups and num_filters == input_channel and not use_cudnn:
        op_type = "depthwise_conv2d_transpose"
    helper = LayerHelper(op_type, input=input, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    stride = _pair("conv2d_transpose", "stride", stride)
    dilation = _pair("conv2d_transpose", "dilation", dilation)
    padding_algorithm, padding = _transpose_padding(padding)
    if output_size is not None and not isinstance(output_size, (int, list, tuple)):
        raise ValueError("conv2d_transpose: output_size should be int, list[int] or tuple[int], got %r"
                         % (output_size,))
    if output_size is not None:
        output_size = _pair("conv2d_transpose", "output_size", output_size)
    if filter_size is None:
        if output_size is None:
            raise ValueError("conv2d_transpose: output_size must be set when filter_size is None")
        h_in, w_in = input.shape[2], input.shape[3]
        if h_in < 0 or w_in < 0:
            raise ValueError("conv2d_transpose: filter_size cannot be inferred from output_size: input %s has "
                             "unknown spatial dims %s" % (input.name, list(input.shape)))
        filter_size = [(output_size[0] - (h_in - 1) * stride[0] + padding[0] + padding[1] - 1) // dilation[0] + 1,
                       (output_size[1] - (w_in - 1) * stride[1] + padding[2] + padding[3] - 1) // dilation[1] + 1]
    else:
        filter_size = _pair("conv2d_transpose", "filter_size", filter_size)
    if min(filter_size) <= 0:
        raise ValueError("conv2d_transpose: filter_size must be positive, got %s (output_size %s, input %s %s)"
                         % (filter_size, output_size, input.name, list(input.shape)))
    if padding[0] == padding[1] and padding[2] == padding[3]:
        padding = [padding[0], padding[2]]
    groups = 1 if groups is None else int(groups)
    if groups < 1 or num_filters % groups != 0:
        raise ValueError("conv2d_transpose: num_filters = %d must be divisible by groups = %d" % (num_filters, groups))
    filter_shape = [input_channel, num_filters // groups] + filter_size
    w = helper.create_parameter(attr=helper.param_attr, shape=filter_shape, dtype=dtype)
    pre_bias = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type=op_type, inputs={"Input": [input], "Filter": [w]}, outputs={"Output": [pre_bias]},
                     attrs={"output_size": output_size or [], "strides": stride, "paddings": padding,
                            "padding_algorithm": padding_algorithm, "dilations": dilation, "groups": groups,
                            "use_cudnn": use_cudnn, "data_format": data_format})
    pre_act = helper.append_bias_op(pre_bias, dim_start=1, dim_end=2)
    return helper.append_activation(pre_act)
