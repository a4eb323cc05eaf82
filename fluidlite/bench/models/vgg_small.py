"""vgg_small: a VGG-style CIFAR net (conv-bn-relu stacks, as Fluid's convnet benchmark vgg), one Momentum step.

3x32x32 input, [conv 3x3 + bn + relu] x2 per stage with 64, 128, 256 channels, max-pool 2x2/2 after each
stage (32 -> 16 -> 8 -> 4), fc 10 on the 256x4x4 features, softmax cross-entropy. Convolutions have no
bias (batch norm follows each); batch norm in training mode with Fluid's momentum 0.9.
"""
import fluidlite as fluid

from . import build_image_classifier, normal_images

DESCRIPTION = "VGG-style CIFAR net: (conv-bn-relu x2 + max-pool) x3 (64/128/256), fc 10, Momentum step"
DEFAULTS = {"batch_size": 32, "iterations": 5, "warmup": 2, "repeat": 5}
LEARNING_RATE = 0.01
MOMENTUM = 0.9
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
STAGES = (64, 128, 256)
CONVS_PER_STAGE = 2
TOLERANCE = {"rtol": 2e-4, "atol": 1e-5}


def network(img, label, num_classes=NUM_CLASSES):
    h = img
    for channels in STAGES:
        for _ in range(CONVS_PER_STAGE):
            h = fluid.layers.conv2d(input=h, num_filters=channels, filter_size=3, padding=1, bias_attr=False)
            h = fluid.layers.batch_norm(input=h, act="relu", momentum=BN_MOMENTUM, epsilon=BN_EPSILON)
        h = fluid.layers.pool2d(input=h, pool_size=2, pool_type="max", pool_stride=2)
    logits = fluid.layers.fc(input=h, size=num_classes)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    def optimizer():
        return fluid.optimizer.Momentum(learning_rate=LEARNING_RATE, momentum=MOMENTUM)

    return build_image_classifier(network, IMAGE_SHAPE, NUM_CLASSES, optimizer, batch_size, seed, normal_images)


def torch_network(params):
    """The same layers in the same order in PyTorch (conv2d_N / batch_norm_N / fc_0 from fluidlite)."""
    import torch
    from ..reference import TorchLayers
    nn = torch.nn
    layers = TorchLayers(params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)
    mods = []
    for _ in STAGES:
        for _ in range(CONVS_PER_STAGE):
            mods.append(layers.conv_bn(1, 1))
        mods.append(nn.MaxPool2d(2, 2))
    mods += [nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_torch(params, feed):
    from ..reference import TorchClassifier
    return TorchClassifier(torch_network(params), feed["img"], feed["label"], LEARNING_RATE, MOMENTUM)


def paddle_network(pb, params):
    """The same layers in the same order in paddle (paddle.nn layers in static mode)."""
    from ..reference import PaddleLayers
    nn = pb.paddle.nn
    layers = PaddleLayers(pb, params, bn_momentum=BN_MOMENTUM, bn_epsilon=BN_EPSILON)
    mods = []
    for _ in STAGES:
        for _ in range(CONVS_PER_STAGE):
            mods.append(layers.conv_bn(1, 1))
        mods.append(nn.MaxPool2D(2, 2))
    mods += [nn.Flatten(), layers.fc()]
    return nn.Sequential(*mods)


def reference_paddle(params, feed):
    from ..reference import paddle_classifier
    return paddle_classifier(lambda pb, img: paddle_network(pb, params)(img), feed["img"], feed["label"],
                             LEARNING_RATE, MOMENTUM)
