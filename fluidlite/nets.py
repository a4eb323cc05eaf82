"""fluid.nets: small networks composed of fluid.layers, with Fluid 1.8's signatures and defaults.

Each function only appends existing layers (conv2d, pool2d, batch_norm, dropout, split, sigmoid, fc, reshape,
transpose, scale, matmul, sequence_conv, sequence_pool), so their checks, gradients and saved programs are those of
the layers.
"""
from . import layers
from .framework import dtype_to_str
from .layers.checks import check_dtype

_FLOATS = ("float32", "float64")

__all__ = ["simple_img_conv_pool", "img_conv_group", "sequence_conv_pool", "glu", "scaled_dot_product_attention"]


def simple_img_conv_pool(input, num_filters, filter_size, pool_size, pool_stride, pool_padding=0, pool_type="max",
                         global_pooling=False, conv_stride=1, conv_padding=0, conv_dilation=1, conv_groups=1,
                         param_attr=None, bias_attr=None, act=None, use_cudnn=True):
    """conv2d (with bias and ``act``) followed by pool2d; the arguments go to those layers."""
    conv_out = layers.conv2d(input=input, num_filters=num_filters, filter_size=filter_size, stride=conv_stride,
                             padding=conv_padding, dilation=conv_dilation, groups=conv_groups,
                             param_attr=param_attr, bias_attr=bias_attr, act=act, use_cudnn=use_cudnn)
    return layers.pool2d(input=conv_out, pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                         pool_padding=pool_padding, global_pooling=global_pooling, use_cudnn=use_cudnn)


def img_conv_group(input, conv_num_filter, pool_size, conv_padding=1, conv_filter_size=3, conv_act=None,
                   param_attr=None, conv_with_batchnorm=False, conv_batchnorm_drop_rate=0.0, pool_stride=1,
                   pool_type="max", use_cudnn=True):
    """One conv2d per entry of ``conv_num_filter`` (each optionally followed by batch_norm and dropout), then one
    pool2d. The per-conv arguments take one value for all convs or a list with one value per conv. A conv
    followed by batch_norm has no activation: batch_norm applies ``conv_act``; dropout follows only when its
    rate is above 1e-5 in magnitude (Fluid's rule)."""
    if not isinstance(conv_num_filter, (list, tuple)):
        raise TypeError("img_conv_group: 'conv_num_filter' must be a list or tuple, got %s"
                        % type(conv_num_filter).__name__)
    n = len(conv_num_filter)

    def per_conv(name, value):
        if not hasattr(value, "__len__"):
            return [value] * n
        if len(value) != n:
            raise ValueError("img_conv_group: '%s' must have one entry per conv (len(conv_num_filter) = %d), "
                             "got %d entries" % (name, n, len(value)))
        return list(value)

    conv_padding = per_conv("conv_padding", conv_padding)
    conv_filter_size = per_conv("conv_filter_size", conv_filter_size)
    param_attr = per_conv("param_attr", param_attr)
    conv_with_batchnorm = per_conv("conv_with_batchnorm", conv_with_batchnorm)
    conv_batchnorm_drop_rate = per_conv("conv_batchnorm_drop_rate", conv_batchnorm_drop_rate)

    tmp = input
    for i in range(n):
        tmp = layers.conv2d(input=tmp, num_filters=conv_num_filter[i], filter_size=conv_filter_size[i],
                            padding=conv_padding[i], param_attr=param_attr[i],
                            act=None if conv_with_batchnorm[i] else conv_act, use_cudnn=use_cudnn)
        if conv_with_batchnorm[i]:
            tmp = layers.batch_norm(input=tmp, act=conv_act)
            drop_rate = conv_batchnorm_drop_rate[i]
            if abs(drop_rate) > 1e-5:
                tmp = layers.dropout(x=tmp, dropout_prob=drop_rate)
    return layers.pool2d(input=tmp, pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                         use_cudnn=use_cudnn)


def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid", pool_type="max",
                       bias_attr=None):
    """sequence_conv (``num_filters`` filters of ``filter_size`` rows, with bias and ``act``) over each sequence of
    the LoD ``input`` [T, D], then sequence_pool of type ``pool_type``: one row per sequence."""
    check_dtype("sequence_conv_pool", "input", input, _FLOATS)
    conv_out = layers.sequence_conv(input=input, num_filters=num_filters, filter_size=filter_size,
                                    param_attr=param_attr, bias_attr=bias_attr, act=act)
    return layers.sequence_pool(input=conv_out, pool_type=pool_type)


def glu(input, dim=-1):
    """Gated linear unit: split ``input`` in two halves a, b along ``dim``; a * sigmoid(b)."""
    check_dtype("glu", "input", input, ("float16", "float32", "float64"))
    rank = len(input.shape)
    if not -rank <= dim < rank:
        raise ValueError("glu: 'dim' must be in [%d, %d) for the rank-%d input '%s', got %d"
                         % (-rank, rank, rank, input.name, dim))
    size = input.shape[dim]
    if size > 0 and size % 2:
        raise ValueError("glu: input '%s' of shape %s must have an even size along dim %d to split in halves, got %d"
                         % (input.name, list(input.shape), dim, size))
    a, b = layers.split(input, num_or_sections=2, dim=dim)
    return layers.elementwise_mul(x=a, y=layers.sigmoid(x=b))


def scaled_dot_product_attention(queries, keys, values, num_heads=1, dropout_rate=0.0):
    """Multi-head attention: softmax(Q K^T / sqrt(d_key)) V per head, for 3-D inputs [N, L, D].

    With ``num_heads`` > 1, queries, keys and values first go through an fc each (same width, with bias, new
    parameters) and are split into ``num_heads`` heads; the heads' outputs are joined again. ``dropout_rate``
    drops attention weights in training (``is_test`` is False; ``clone(for_test=True)`` turns it off).
    Returns [N, L_q, D_v]."""
    func = "scaled_dot_product_attention"
    for name, v in (("queries", queries), ("keys", keys), ("values", values)):
        check_dtype(func, name, v, _FLOATS)
    if not queries.dtype == keys.dtype == values.dtype:
        raise TypeError("%s: queries, keys and values must have the same dtype, got %s, %s and %s"
                        % (func, dtype_to_str(queries.dtype), dtype_to_str(keys.dtype), dtype_to_str(values.dtype)))
    if not len(queries.shape) == len(keys.shape) == len(values.shape) == 3:
        raise ValueError("%s: queries, keys and values must be 3-D [batch, length, hidden], got shapes %s, %s and %s"
                         % (func, list(queries.shape), list(keys.shape), list(values.shape)))
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError("%s: queries and keys must have the same hidden size, got %d and %d"
                         % (func, queries.shape[-1], keys.shape[-1]))
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError("%s: keys and values must have the same length, got %d and %d"
                         % (func, keys.shape[-2], values.shape[-2]))
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError("%s: num_heads must be a positive int, got %r" % (func, num_heads))
    for name, v in (("keys", keys), ("values", values)):
        if v.shape[-1] % num_heads:
            raise ValueError("%s: the hidden size of %s (%d) must be divisible by num_heads (%d)"
                             % (func, name, v.shape[-1], num_heads))

    if num_heads > 1:
        queries, keys, values = (layers.fc(input=x, size=x.shape[-1], num_flatten_dims=2)
                                 for x in (queries, keys, values))

    def split_heads(x):  # [N, L, D] -> [N, heads, L, D / heads]
        if num_heads == 1:
            return x
        x = layers.reshape(x=x, shape=[0, 0, num_heads, x.shape[-1] // num_heads])  # 0: copy the input's dim
        return layers.transpose(x=x, perm=[0, 2, 1, 3])

    q, k, v = split_heads(queries), split_heads(keys), split_heads(values)
    key_dim_per_head = keys.shape[-1] // num_heads
    product = layers.matmul(x=layers.scale(x=q, scale=key_dim_per_head ** -0.5), y=k, transpose_y=True)
    # softmax over the last axis, on a 2-D view as Fluid does (its saved programs have these reshapes)
    weights = layers.reshape(x=layers.reshape(x=product, shape=[-1, product.shape[-1]], act="softmax"),
                             shape=product.shape)
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    out = layers.matmul(weights, v)
    if num_heads == 1:
        return out
    out = layers.transpose(out, perm=[0, 2, 1, 3])  # [N, L_q, heads, d] -> [N, L_q, heads * d]
    return layers.reshape(x=out, shape=[0, 0, out.shape[2] * out.shape[3]])
