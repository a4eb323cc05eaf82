"""resnet_small: CIFAR ResNet-20 (Fluid's convnet benchmark resnet_cifar10, depth 20), one Momentum step.

3x32x32 input, conv 3x3 16 + bn + relu, then 3 stages of 3 basic blocks (16, 32, 64 channels; the first
block of stages 2 and 3 has stride 2 and a 1x1 conv + bn projection shortcut), global average pool,
fc 10, softmax cross-entropy. Convolutions have no bias (batch norm follows each). Batch norm runs in
training mode: batch statistics, running statistics updated with Fluid's momentum 0.9.
"""
import fluidlite as fluid

from . import build_image_classifier, normal_images

DESCRIPTION = "ResNet-20 (CIFAR, 3x32x32, 16/32/64, batch norm), fc 10, Momentum step"
DEFAULTS = {"batch_size": 32, "iterations": 10, "warmup": 3, "repeat": 5}
LEARNING_RATE = 0.01
MOMENTUM = 0.9
BN_MOMENTUM = 0.9  # Fluid's: running = 0.9 * running + 0.1 * batch
BN_EPSILON = 1e-5
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
STAGES = ((16, 1), (32, 2), (64, 2))  # (channels, stride of the first block)
BLOCKS_PER_STAGE = 3  # (20 - 2) / 6
# 19 convolutions and 19 batch norms in float32, summed in a different order than torch's.
TOLERANCE = {"rtol": 2e-4, "atol": 1e-5}


def conv_bn(x, filters, size, stride, padding, act="relu"):
    """conv (no bias) -> batch_norm(act)."""
    h = fluid.layers.conv2d(input=x, num_filters=filters, filter_size=size, stride=stride, padding=padding,
                            bias_attr=False)
    return fluid.layers.batch_norm(input=h, act=act, momentum=BN_MOMENTUM, epsilon=BN_EPSILON)


def basic_block(x, ch_in, ch_out, stride):
    h = conv_bn(x, ch_out, 3, stride, 1)
    h = conv_bn(h, ch_out, 3, 1, 1, act=None)
    short = conv_bn(x, ch_out, 1, stride, 0, act=None) if ch_in != ch_out or stride != 1 else x
    return fluid.layers.elementwise_add(x=h, y=short, act="relu")


def network(img, label, num_classes=NUM_CLASSES):
    h = conv_bn(img, STAGES[0][0], 3, 1, 1)
    ch = STAGES[0][0]
    for channels, stride in STAGES:
        for b in range(BLOCKS_PER_STAGE):
            h = basic_block(h, ch, channels, stride if b == 0 else 1)
            ch = channels
    h = fluid.layers.pool2d(input=h, pool_type="avg", global_pooling=True)
    logits = fluid.layers.fc(input=h, size=num_classes)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    def optimizer():
        return fluid.optimizer.Momentum(learning_rate=LEARNING_RATE, momentum=MOMENTUM)

    return build_image_classifier(network, IMAGE_SHAPE, NUM_CLASSES, optimizer, batch_size, seed, normal_images)


# ---------------------------------------------------------------------------------------------------
# PyTorch: the same layers created in the same order as network() creates them, so conv2d_N and
# batch_norm_N name the same layer in both.

def torch_network(params):
    import torch
    from ..reference import TorchLayers
    nn = torch.nn
    layers = TorchLayers(params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)

    class Block(nn.Module):
        def __init__(self, ch_in, ch_out, stride):
            super().__init__()
            self.a = layers.conv_bn(stride, 1)
            self.b = layers.conv_bn(1, 1, relu=False)
            self.short = layers.conv_bn(stride, 0, relu=False) if ch_in != ch_out or stride != 1 else None

        def forward(self, x):
            short = self.short(x) if self.short is not None else x
            return torch.relu(self.b(self.a(x)) + short)

    mods = [layers.conv_bn(1, 1)]
    ch = STAGES[0][0]
    for channels, stride in STAGES:
        for b in range(BLOCKS_PER_STAGE):
            mods.append(Block(ch, channels, stride if b == 0 else 1))
            ch = channels
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_torch(params, feed):
    from ..reference import TorchClassifier
    return TorchClassifier(torch_network(params), feed["img"], feed["label"], LEARNING_RATE, MOMENTUM)


# ---------------------------------------------------------------------------------------------------
# Paddle (paddle.nn layers in static mode): the same layers created in the same order.

def paddle_network(pb, params):
    from ..reference import PaddleLayers
    paddle = pb.paddle
    nn = paddle.nn
    layers = PaddleLayers(pb, params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)

    class Block(nn.Layer):
        def __init__(self, ch_in, ch_out, stride):
            super().__init__()
            self.a = layers.conv_bn(stride, 1)
            self.b = layers.conv_bn(1, 1, relu=False)
            self.short = layers.conv_bn(stride, 0, relu=False) if ch_in != ch_out or stride != 1 else None

        def forward(self, x):
            short = self.short(x) if self.short is not None else x
            return nn.functional.relu(self.b(self.a(x)) + short)

    mods = [layers.conv_bn(1, 1)]
    ch = STAGES[0][0]
    for channels, stride in STAGES:
        for b in range(BLOCKS_PER_STAGE):
            mods.append(Block(ch, channels, stride if b == 0 else 1))
            ch = channels
    mods += [nn.AdaptiveAvgPool2D(1), nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_paddle(params, feed):
    from ..reference import paddle_classifier
    return paddle_classifier(lambda pb, img: paddle_network(pb, params)(img), feed["img"], feed["label"],
                             LEARNING_RATE, MOMENTUM)
