"""mobilenet_v2: MobileNetV2 (PaddleCV's mobilenet_v2.py layer for layer) at CIFAR size, one Momentum step.

3x32x32 input, conv 3x3 32 (stride 1 for 32x32 images) + bn + relu6, then the 7 groups of inverted residual
units (t, c, n, s) = (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
(6, 160, 3, 2), (6, 320, 1, 1) at width 1.0: each unit a 1x1 expansion conv + bn + relu6, a 3x3 depthwise
conv (groups = channels, use_cudnn=False: Fluid's depthwise_conv2d) + bn + relu6 and a 1x1 linear conv + bn,
with a residual add in all but a group's first unit; then conv 1x1 1280 + bn + relu6, global average pool,
fc 10, softmax cross-entropy. Convolutions have no bias. Batch norm in training mode (momentum 0.9).
"""
import fluidlite as fluid

from . import build_image_classifier, normal_images

DESCRIPTION = "MobileNetV2 (CIFAR, 3x32x32, width 1.0, depthwise convs, relu6), fc 10, Momentum step"
DEFAULTS = {"batch_size": 32, "iterations": 3, "warmup": 1, "repeat": 3}
LEARNING_RATE = 0.01
MOMENTUM = 0.9
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
SCALE = 1.0
# (expansion t, output channels c, units n, stride s of the first unit), as PaddleCV's MobileNetV2.
BOTTLENECKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1))
# 52 convolutions and batch norms in float32, summed in a different order than torch's.
TOLERANCE = {"rtol": 5e-4, "atol": 1e-5}


def conv_bn(x, filters, size, stride, padding, groups=1, act=True):
    """conv (no bias; depthwise_conv2d when groups > 1) -> batch_norm -> relu6 (if act)."""
    h = fluid.layers.conv2d(input=x, num_filters=filters, filter_size=size, stride=stride, padding=padding,
                            groups=groups, use_cudnn=groups == 1, bias_attr=False)
    h = fluid.layers.batch_norm(input=h, momentum=BN_MOMENTUM, epsilon=BN_EPSILON)
    return fluid.layers.relu6(h) if act else h


def inverted_residual(x, ch_in, ch_out, stride, expansion, shortcut):
    expanded = int(round(ch_in * expansion))
    h = conv_bn(x, expanded, 1, 1, 0)
    h = conv_bn(h, expanded, 3, stride, 1, groups=expanded)
    h = conv_bn(h, ch_out, 1, 1, 0, act=False)
    return fluid.layers.elementwise_add(x, h) if shortcut else h


def network(img, label, num_classes=NUM_CLASSES):
    ch = int(32 * SCALE)
    h = conv_bn(img, ch, 3, 1, 1)
    for t, c, n, s in BOTTLENECKS:
        out = int(c * SCALE)
        for i in range(n):
            h = inverted_residual(h, ch, out, s if i == 0 else 1, t, shortcut=i > 0)
            ch = out
    h = conv_bn(h, int(1280 * SCALE) if SCALE > 1.0 else 1280, 1, 1, 0)
    h = fluid.layers.pool2d(input=h, pool_type="avg", global_pooling=True)
    logits = fluid.layers.fc(input=h, size=num_classes)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    def optimizer():
        return fluid.optimizer.Momentum(learning_rate=LEARNING_RATE, momentum=MOMENTUM)

    return build_image_classifier(network, IMAGE_SHAPE, NUM_CLASSES, optimizer, batch_size, seed, normal_images)


# ---------------------------------------------------------------------------------------------------
# PyTorch: the same layers created in the same order as network() creates them (conv2d_N, depthwise_conv2d_N
# and batch_norm_N name the same layer in both).

def torch_network(params):
    import torch
    from ..reference import TorchLayers, _torch_copy
    nn = torch.nn
    layers = TorchLayers(params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)
    depthwise = [0]

    def conv_bn(stride, padding, groups=1, act=True):
        if groups == 1:
            conv = layers.conv(stride, padding)
        else:
            w = params["depthwise_conv2d_%d.w_0" % depthwise[0]]
            depthwise[0] += 1
            conv = nn.Conv2d(w.shape[0], w.shape[0], tuple(w.shape[2:]), stride=stride, padding=padding,
                             groups=groups, bias=False)
            _torch_copy(conv.weight, w)
        return nn.Sequential(conv, layers.bn(), *([nn.ReLU6()] if act else []))

    class Unit(nn.Module):
        def __init__(self, ch_in, stride, expansion, shortcut):
            super().__init__()
            expanded = int(round(ch_in * expansion))
            self.body = nn.Sequential(conv_bn(1, 0), conv_bn(stride, 1, groups=expanded), conv_bn(1, 0, act=False))
            self.shortcut = shortcut

        def forward(self, x):
            h = self.body(x)
            return x + h if self.shortcut else h

    mods = [conv_bn(1, 1)]
    ch = int(32 * SCALE)
    for t, c, n, s in BOTTLENECKS:
        for i in range(n):
            mods.append(Unit(ch, s if i == 0 else 1, t, i > 0))
            ch = int(c * SCALE)
    mods += [conv_bn(1, 0), nn.AdaptiveAvgPool2d(1), nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_torch(params, feed):
    from ..reference import TorchClassifier
    return TorchClassifier(torch_network(params), feed["img"], feed["label"], LEARNING_RATE, MOMENTUM)


# ---------------------------------------------------------------------------------------------------
# Paddle (paddle.nn layers in static mode): the same layers in the same order; the depthwise convs are
# nn.Conv2D(groups = channels), which paddle runs as its depthwise_conv2d kernel.

def paddle_network(pb, params):
    from ..reference import PaddleLayers
    nn = pb.paddle.nn
    layers = PaddleLayers(pb, params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)

    def conv_bn(stride, padding, groups=1, act=True):
        return nn.Sequential(layers.conv(stride, padding, groups), layers.bn(), *([nn.ReLU6()] if act else []))

    class Unit(nn.Layer):
        def __init__(self, ch_in, stride, expansion, shortcut):
            super().__init__()
            expanded = int(round(ch_in * expansion))
            self.body = nn.Sequential(conv_bn(1, 0), conv_bn(stride, 1, groups=expanded), conv_bn(1, 0, act=False))
            self.shortcut = shortcut

        def forward(self, x):
            h = self.body(x)
            return x + h if self.shortcut else h

    mods = [conv_bn(1, 1)]
    ch = int(32 * SCALE)
    for t, c, n, s in BOTTLENECKS:
        for i in range(n):
            mods.append(Unit(ch, s if i == 0 else 1, t, i > 0))
            ch = int(c * SCALE)
    mods += [conv_bn(1, 0), nn.AdaptiveAvgPool2D(1), nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_paddle(params, feed):
    from ..reference import paddle_classifier
    return paddle_classifier(lambda pb, img: paddle_network(pb, params)(img), feed["img"], feed["label"],
                             LEARNING_RATE, MOMENTUM)
