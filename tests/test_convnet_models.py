"""Benchmark conv models: LeNet learns a synthetic 10-class image task; lenet, resnet_small and vgg_small
build, run, and agree with their PyTorch references (same initial weights) over the first steps; so does text_cnn,
the sequence convolution net on LoD ids, against its padded-batch Conv1d reference."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models


def _run(mod, batch_size, seed=3):
    built = mod.build(batch_size, seed)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    names = sorted(p.name for p in built.main.global_block().all_parameters())
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    feed = built.feed()

    def step():
        return float(np.asarray(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0]).ravel()[0])
    return built, step, params, feed, scope


@pytest.fixture
def one_thread():
    """One BLAS/kernel thread: on a shared 2-core machine two spinning threads can run 5x slower."""
    saved = fluid.core.get_num_threads()
    fluid.core.set_num_threads(1)
    yield
    fluid.core.set_num_threads(saved)


def test_lenet_learns_synthetic_digits(one_thread):
    # 10 class templates (uniform pixels, centred) + Gaussian noise of std 0.5: > 90 % training accuracy
    # after 48 Momentum steps of batch 64 (seeded: ~98 %).
    lenet = models.load("lenet")
    rng = np.random.RandomState(0)
    templates = rng.rand(10, 1, 28, 28).astype("float32") - 0.5
    n = 512
    labels = rng.randint(0, 10, size=(n, 1)).astype("int64")
    images = templates[labels[:, 0]] + 0.5 * rng.randn(n, 1, 28, 28).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=[1, 28, 28], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        logits, loss = lenet.network(img, label)
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        test_program = main.clone(for_test=True)
        fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    first = None
    for step in range(48):
        i = (step * 64) % n
        loss_value, = exe.run(main, feed={"img": images[i:i + 64], "label": labels[i:i + 64]}, fetch_list=[loss],
                              scope=scope)
        first = float(loss_value.ravel()[0]) if first is None else first
    a, loss_value = exe.run(test_program, feed={"img": images, "label": labels}, fetch_list=[acc, loss], scope=scope)
    assert float(a.ravel()[0]) > 0.9, (float(a.ravel()[0]), first, float(loss_value.ravel()[0]))
    assert float(loss_value.ravel()[0]) < 0.5 * first


@pytest.mark.parametrize("name,batch", [("lenet", 8), ("resnet_small", 4), ("vgg_small", 4), ("mobilenet_v2", 4)])
def test_model_builds_and_steps(name, batch):
    mod = models.load(name)
    built, step, params, feed, _ = _run(mod, batch)
    losses = [step() for _ in range(3)]
    assert all(np.isfinite(losses))
    assert abs(losses[0] - np.log(mod.NUM_CLASSES)) < 2.0  # near chance at initialisation
    assert losses[2] < losses[0]  # the same batch three times: the optimizer step lowers its loss
    assert feed["img"].shape == (batch,) + mod.IMAGE_SHAPE


def test_resnet_structure():
    resnet = models.load("resnet_small")
    built = resnet.build(2, 0)
    ops = [op.type for op in built.main.global_block().ops]
    n_conv = 1 + 3 * 3 * 2 + 2  # stem, 9 blocks x 2, two projections
    assert ops.count("conv2d") == n_conv and ops.count("batch_norm") == n_conv
    # momentum: a filter, bn scale and bias per conv; the fc weight and bias
    assert ops.count("conv2d_grad") == n_conv and ops.count("momentum") == 3 * n_conv + 2
    assert ops.count("pool2d") == 1 and ops.count("mul") == 1


def test_mobilenet_v2_structure():
    mobilenet = models.load("mobilenet_v2")
    built = mobilenet.build(2, 0)
    ops = [op.type for op in built.main.global_block().ops]
    units = sum(n for _, _, n, _ in mobilenet.BOTTLENECKS)  # 17 inverted residual units
    # stem + 2 pointwise convs per unit + the 1280 head are conv2d; one depthwise conv per unit.
    assert ops.count("conv2d") == 2 + 2 * units and ops.count("depthwise_conv2d") == units
    assert ops.count("batch_norm") == 2 + 3 * units and ops.count("relu6") == 2 + 2 * units
    assert ops.count("elementwise_add") == units - len(mobilenet.BOTTLENECKS) + 1  # + the fc bias
    assert ops.count("depthwise_conv2d_grad") == units and ops.count("momentum") == 3 * (2 + 3 * units) + 2


@pytest.mark.parametrize("name,batch", [("lenet", 16), ("resnet_small", 8), ("vgg_small", 4), ("mobilenet_v2", 16)])
def test_first_steps_agree_with_torch(name, batch):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    mod = models.load(name)
    built, step, params, feed, scope = _run(mod, batch)
    ref = mod.reference_torch(params, feed)
    # step 1: the initial weights; steps 2-3: after the optimizer updates (gradients, momentum).
    ours = [step() for _ in range(3)]
    theirs = [float(ref.step()) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **mod.TOLERANCE)
    # MobileNetV2's gradient at initialisation is ill-conditioned (batch norms over 2x2 maps): scaling the
    # input by 1 + 1e-6 moves some first-step updates by 1-14% in fluidlite alone, so its later losses drift
    # from torch's (batch 16: 0.7% and 0.6%; batch 4: 23%); the others agree to float32 rounding.
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=0.05 if name == "mobilenet_v2" else 2e-3, atol=1e-4)
    assert abs(ours[2] - ours[0]) > 1e-3  # the later steps compare updated weights, not the initial ones
    if name == "lenet":
        return
    # batch norm's running statistics after 3 steps: the mean alike; torch's running variance uses the
    # unbiased batch variance (x n / (n - 1)), Fluid's the biased one.
    bns = [m for m in ref.model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(bns) == len([n for n in params if n.startswith("batch_norm_") and n.endswith(".w_1")])
    for k, bn in enumerate(bns[:3]):
        mean = np.array(scope.find_var("batch_norm_%d.w_1" % k).get_tensor())
        # (MobileNetV2's: after updates that differ by up to 14%, see above; a wrong momentum is off by 3x.)
        tol = dict(rtol=0.2, atol=1e-2) if name == "mobilenet_v2" else dict(rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(mean, bn.running_mean.numpy(), **tol)


@pytest.mark.parametrize("name", ["lenet", "resnet_small", "vgg_small", "lstm", "mobilenet_v2", "text_cnn"])
def test_new_models_are_listed_with_a_torch_reference_only(name):
    from fluidlite.bench import reference
    assert name in models.MODELS
    mod = models.load(name)
    assert callable(reference.factory(mod, "torch"))
    assert reference.factory(mod, "numpy") is None  # reported as skipped by --compare numpy
    assert set(mod.DEFAULTS) == {"batch_size", "iterations", "warmup", "repeat"} and mod.DESCRIPTION


@pytest.mark.parametrize("name,batch", [("resnet_small", 4), ("lstm", 32)])
def test_eager_deletion_changes_no_result(name, batch, monkeypatch):
    # Releasing temporaries of >= 64 KiB after their last use (ResNet's activations and gradients; the
    # LSTM's [20, 32, 128] step inputs, read by StaticRNN's step block) must not change a single bit of
    # the training trajectory against keeping every buffer (FLAGS_eager_delete_tensor_gb=-1, read when
    # each scope's run is prepared). Both runs start from the same weights.
    built = models.load(name).build(batch, 0)
    exe = fluid.Executor(fluid.CPUPlace())
    scopes = {"-1": fluid.Scope(), "0": fluid.Scope()}
    exe.run(built.startup, scope=scopes["-1"])
    for v in built.main.list_vars():
        if v.persistable and scopes["-1"].find_var(v.name) is not None:
            value = np.array(scopes["-1"].find_var(v.name).get_tensor())
            scopes["0"].var(v.name).get_tensor().set(value, fluid.CPUPlace())
    feed = built.feed()
    losses = {}
    for flag, scope in scopes.items():
        monkeypatch.setenv("FLAGS_eager_delete_tensor_gb", flag)
        losses[flag] = [exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0]
                        for _ in range(3)]
    for a, b in zip(losses["-1"], losses["0"]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(losses["0"][0], losses["0"][2])  # the steps trained: later losses differ


# ------------------------------------------------------------------ text_cnn: sequence convolutions on LoD ids

def test_text_cnn_builds_steps_and_feeds_one_lod_batch():
    mod = models.load("text_cnn")
    built, step, params, feed, _ = _run(mod, 16)
    words = feed["words"]
    lens, = words.recursive_sequence_lengths()
    assert len(lens) == 16 and min(lens) >= mod.MIN_LEN and max(lens) <= mod.MAX_LEN
    assert np.array(words).shape == (sum(lens), 1) and feed["label"].shape == (16, 1)
    ops = [op.type for op in built.main.global_block().ops]
    for t in ("sequence_conv", "sequence_pool", "sequence_conv_grad", "sequence_pool_grad"):
        assert ops.count(t) == 2, (t, ops)
    assert "sequence_pad" not in ops and ops.count("adagrad") == 8  # table, 2 x (filter, bias), fc w_0, w_1, b_0
    assert params["sequence_conv_0.w_0"].shape == (3 * 128, 128) and params["sequence_conv_1.w_0"].shape == (512, 128)
    losses = [step() for _ in range(3)]
    assert abs(losses[0] - np.log(mod.NUM_CLASSES)) < 0.5  # near chance at initialisation
    assert losses[2] < losses[0]  # the same batch three times: Adagrad lowers its loss


def test_text_cnn_first_steps_agree_with_padded_conv1d():
    pytest.importorskip("torch")
    from fluidlite.bench import reference
    mod = models.load("text_cnn")
    built, step, params, feed, _ = _run(mod, 64)
    ref = mod.reference_torch(params, reference.plain_feed(feed))
    assert tuple(ref.words.shape) == (64, max(feed["words"].recursive_sequence_lengths()[0]))
    # step 1: the initial weights; steps 2-3: after Adagrad's updates (sparse for the table in both)
    ours = [step() for _ in range(3)]
    theirs = [float(ref.step()) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **mod.TOLERANCE)
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=2e-3, atol=1e-4)
    assert abs(ours[2] - ours[0]) > 1e-3  # the later steps compare updated weights, not the initial ones
