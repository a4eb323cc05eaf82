"""lenet: Fluid's recognize_digits conv model, one SGD training step (batch 64, 1x28x28).

conv 5x5x20 -> relu -> max-pool 2x2/2 -> conv 5x5x50 -> relu -> max-pool 2x2/2 -> fc 10, softmax
cross-entropy averaged over the batch. Per step (batch 64) the convolutions and the fc do about 243 MFLOP
forward and 448 MFLOP backward (the first conv needs no input gradient): 0.69 GFLOP in all.
"""
import fluidlite as fluid

from . import build_image_classifier, uniform_images

DESCRIPTION = "LeNet-5 (recognize_digits conv): 2x (conv 5x5 + relu + max-pool 2x2), fc 10, SGD step"
DEFAULTS = {"batch_size": 64, "iterations": 20, "warmup": 5, "repeat": 5}
LEARNING_RATE = 0.01
NUM_CLASSES = 10
IMAGE_SHAPE = (1, 28, 28)
# float32 sums over ~800-term dot products in a different order than torch's: rtol 1e-4 is enough for the
# loss (~2.3) and still catches any real difference (a wrong layout or weight changes it at the 1e-2 level).
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def flops(batch_size):
    """Multiply-adds x 2 of the convolutions and the fc: (forward, backward) per training step."""
    conv1 = 20 * 24 * 24 * (1 * 5 * 5)
    conv2 = 50 * 8 * 8 * (20 * 5 * 5)
    fc = 50 * 4 * 4 * NUM_CLASSES
    fwd = 2 * batch_size * (conv1 + conv2 + fc)
    bwd = 2 * batch_size * (conv1 + 2 * conv2 + 2 * fc)  # conv1: filter grad only (the image needs none)
    return fwd, bwd


def network(img, label, num_classes=NUM_CLASSES):
    """The recognize_digits conv net (Fluid's simple_img_conv_pool twice, then fc): (logits, mean loss)."""
    h = img
    for filters in (20, 50):
        h = fluid.layers.conv2d(input=h, num_filters=filters, filter_size=5, act="relu")
        h = fluid.layers.pool2d(input=h, pool_size=2, pool_type="max", pool_stride=2)
    logits = fluid.layers.fc(input=h, size=num_classes)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    def optimizer():
        return fluid.optimizer.SGD(learning_rate=LEARNING_RATE)

    return build_image_classifier(network, IMAGE_SHAPE, NUM_CLASSES, optimizer, batch_size, seed, uniform_images)


def torch_network(params):
    """The same net in PyTorch from fluidlite's weights (fc weight [in, out] transposed for nn.Linear)."""
    import torch
    from ..reference import TorchLayers
    nn = torch.nn
    layers = TorchLayers(params)
    return nn.Sequential(layers.conv(), nn.ReLU(), nn.MaxPool2d(2, 2),
                         layers.conv(), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Flatten(), layers.fc())


def reference_torch(params, feed):
    from ..reference import TorchClassifier
    return TorchClassifier(torch_network(params), feed["img"], feed["label"], LEARNING_RATE)


def paddle_network(pb, params):
    """The same net in paddle (paddle.nn layers in static mode) from fluidlite's weights."""
    from ..reference import PaddleLayers
    nn = pb.paddle.nn
    layers = PaddleLayers(pb, params)
    return nn.Sequential(layers.conv(), nn.ReLU(), nn.MaxPool2D(2, 2),
                         layers.conv(), nn.ReLU(), nn.MaxPool2D(2, 2),
                         nn.Flatten(), layers.fc())


def reference_paddle(params, feed):
    from ..reference import paddle_classifier
    return paddle_classifier(lambda pb, img: paddle_network(pb, params)(img), feed["img"], feed["label"],
                             LEARNING_RATE)

# No numpy reference: a convolution backward in numpy would time hand-written im2col glue rather than a
# meaningful baseline, so the model reports numpy as skipped.
