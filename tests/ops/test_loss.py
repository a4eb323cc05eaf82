"""The regression and ranking losses (kernels/loss.cc): huber_loss, smooth_l1_loss, log_loss, kldiv_loss,
margin_rank_loss, rank_loss, bpr_loss and label_smooth. Each: forward vs numpy, gradients vs central
differences, shape/dtype errors naming the layer or op and the variables; the layers (fluid.layers.*) with
Fluid's arguments, and npair_loss (composed of layers) against numpy."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def _away_from(x, points, gap=0.05):
    """x with every element nudged at least `gap` away from each kink in `points` (numeric gradients)."""
    x = x.copy()
    for p in points:
        close = np.abs(x - p) < gap
        x[close] = p + gap * np.where(x[close] >= p, 1, -1)
    return x


# ------------------------------------------------------------------ huber_loss

def np_huber(x, y, delta):
    r = y - x
    a = np.abs(r)
    return r, np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("delta", [0.5, 1.0, 3.0])
def test_huber_loss_forward(dtype, delta):
    rng = np.random.RandomState(1)
    x = rng.uniform(-3, 3, (8, 1)).astype(dtype)
    y = rng.uniform(-3, 3, (8, 1)).astype(dtype)
    r, out = np_huber(x, y, delta)
    OpTest("huber_loss", {"X": x, "Y": y}, {"Residual": r.astype(dtype), "Out": out.astype(dtype)},
           {"delta": delta}).check_output()


def test_huber_loss_grad():
    rng = np.random.RandomState(2)
    x = rng.uniform(-2, 2, (6, 1))
    y = rng.uniform(-2, 2, (6, 1))
    y = x + _away_from(y - x, [-0.8, 0.8])
    r, out = np_huber(x, y, 0.8)
    OpTest("huber_loss", {"X": x, "Y": y}, {"Residual": r, "Out": out}, {"delta": 0.8}).check_grad(["X", "Y"], "Out")


def test_huber_loss_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        out = fluid.layers.huber_loss(x, y, delta=1.0)
        assert out.shape == (-1, 1)
        bad = fluid.layers.data(name="bad", shape=[2], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"huber_loss: X 'x' \[-1, 1\] and Y 'bad' \[-1, 2\] must have the same shape"):
            fluid.layers.huber_loss(x, bad, delta=1.0)
        with pytest.raises(TypeError, match=r"huber_loss: 'label' must be a Variable, got ndarray"):
            fluid.layers.huber_loss(x, np.zeros((2, 1)), delta=1.0)
    xv = np.array([[0.0], [1.0], [5.0]], "float32")
    yv = np.array([[0.5], [-1.0], [0.0]], "float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=[out])
    np.testing.assert_allclose(got, np_huber(xv, yv, 1.0)[1], rtol=1e-6)


# ------------------------------------------------------------------ smooth_l1_loss

def np_smooth_l1(x, y, sigma, iw=None, ow=None):
    s2 = sigma * sigma
    d = (x - y) * (iw if iw is not None else 1)
    a = np.abs(d)
    e = np.where(a < 1.0 / s2, 0.5 * d * d * s2, a - 0.5 / s2)
    if ow is not None:
        e = e * ow
    return d, e.reshape(x.shape[0], -1).sum(1, keepdims=True)


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4)])
@pytest.mark.parametrize("sigma", [1.0, 3.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_smooth_l1_forward(shape, sigma, weighted):
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, shape).astype("float32")
    y = rng.uniform(-1, 1, shape).astype("float32")
    inputs = {"X": x, "Y": y}
    iw = ow = None
    if weighted:
        iw = rng.uniform(0, 2, shape).astype("float32")
        ow = rng.uniform(0, 2, shape).astype("float32")
        inputs.update(InsideWeight=iw, OutsideWeight=ow)
    d, out = np_smooth_l1(x, y, sigma, iw, ow)
    OpTest("smooth_l1_loss", inputs, {"Diff": d, "Out": out}, {"sigma": sigma}).check_output()


@pytest.mark.parametrize("weighted", [False, True])
def test_smooth_l1_grad(weighted):
    rng = np.random.RandomState(4)
    shape = (4, 3)
    x = rng.uniform(-1, 1, shape)
    y = rng.uniform(-1, 1, shape)
    inputs = {"X": x, "Y": y}
    iw = ow = None
    if weighted:
        iw = rng.uniform(0.5, 2, shape)
        ow = rng.uniform(0.5, 2, shape)
        inputs.update(InsideWeight=iw, OutsideWeight=ow)
    sigma = 2.0
    # keep |d| away from the kink 1 / sigma^2 and from 0
    d = _away_from((x - y) * (iw if weighted else 1), [-0.25, 0.0, 0.25])
    y = x - d / (iw if weighted else 1)
    inputs["Y"] = y
    dd, out = np_smooth_l1(x, y, sigma, iw, ow)
    OpTest("smooth_l1_loss", inputs, {"Diff": dd, "Out": out}, {"sigma": sigma}).check_grad(["X", "Y"], "Out")


def test_smooth_l1_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[3], dtype="float32")
        w = fluid.layers.data(name="w", shape=[3], dtype="float32")
        out = fluid.layers.smooth_l1(x, y)
        out_w = fluid.layers.smooth_l1(x, y, inside_weight=w, outside_weight=w, sigma=2.0)
        assert out.shape == (-1, 1)
        with pytest.raises(ValueError, match="smooth_l1: inside_weight and outside_weight must be given together"):
            fluid.layers.smooth_l1(x, y, inside_weight=w)
        y4 = fluid.layers.data(name="y4", shape=[4], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"smooth_l1_loss: X 'x' \[-1, 3\] and Y 'y4' \[-1, 4\] must have the same shape"):
            fluid.layers.smooth_l1(x, y4)
        v = fluid.layers.data(name="v", shape=[3], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"smooth_l1_loss: X 'v' \[3\] must have rank >= 2"):
            fluid.layers.smooth_l1(v, v)
    rng = np.random.RandomState(5)
    xv, yv, wv = (rng.uniform(-1, 1, (4, 3)).astype("float32") for _ in range(3))
    a, b = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv, "w": wv}, fetch_list=[out, out_w])
    np.testing.assert_allclose(a, np_smooth_l1(xv, yv, 1.0)[1], rtol=1e-5)
    np.testing.assert_allclose(b, np_smooth_l1(xv, yv, 2.0, wv, wv)[1], rtol=1e-5)


# ------------------------------------------------------------------ log_loss

def np_log_loss(p, y, eps=1e-4):
    return -y * np.log(p + eps) - (1 - y) * np.log(1 - p + eps)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_loss_forward(dtype):
    rng = np.random.RandomState(6)
    p = rng.uniform(0.05, 0.95, (7, 1)).astype(dtype)
    y = rng.randint(0, 2, (7, 1)).astype(dtype)
    OpTest("log_loss", {"Predicted": p, "Labels": y}, {"Loss": np_log_loss(p, y).astype(dtype)},
           {"epsilon": 1e-4}).check_output()
    OpTest("log_loss", {"Predicted": p, "Labels": y}, {"Loss": np_log_loss(p, y, 0.1).astype(dtype)},
           {"epsilon": 0.1}).check_output()


def test_log_loss_grad():
    rng = np.random.RandomState(7)
    p = rng.uniform(0.1, 0.9, (5, 1))
    y = rng.uniform(0, 1, (5, 1))
    OpTest("log_loss", {"Predicted": p, "Labels": y}, {"Loss": np_log_loss(p, y)}).check_grad(["Predicted"], "Loss")


def test_log_loss_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.layers.data(name="p", shape=[1], dtype="float32")
        y = fluid.layers.data(name="l", shape=[1], dtype="float32")
        loss = fluid.layers.log_loss(p, y)
        p2 = fluid.layers.data(name="p2", shape=[2], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"log_loss: Predicted 'p2' \[-1, 2\] must have rank 2 with last dim 1"):
            fluid.layers.log_loss(p2, p2)
        li = fluid.layers.data(name="li", shape=[1], dtype="int64")
        with pytest.raises(TypeError, match=r"log_loss: 'label' \(li\) must be float32 or float64, got int64"):
            fluid.layers.log_loss(p, li)
    pv = np.array([[0.2], [0.9]], "float32")
    lv = np.array([[0.0], [1.0]], "float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"p": pv, "l": lv}, fetch_list=[loss])
    np.testing.assert_allclose(got, np_log_loss(pv, lv), rtol=1e-5)


# ------------------------------------------------------------------ kldiv_loss

def np_kldiv(x, t, reduction):
    safe = np.where(t > 0, t, 1.0)
    loss = np.where(t > 0, t * (np.log(safe) - x), 0.0)
    if reduction == "none":
        return loss
    s = loss.sum()
    return np.array([{"sum": s, "mean": s / loss.size, "batchmean": s / x.shape[0]}[reduction]])


@pytest.mark.parametrize("reduction", ["none", "batchmean", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_kldiv_loss_forward(reduction, shape):
    rng = np.random.RandomState(8)
    x = rng.uniform(-3, 0, shape)
    t = rng.uniform(0, 1, shape)
    t[0, 0] = 0.0  # no contribution (and no NaN) where the target is 0
    t[-1, -1] = -0.5
    for dtype in ("float32", "float64"):
        OpTest("kldiv_loss", {"X": x.astype(dtype), "Target": t.astype(dtype)},
               {"Loss": np_kldiv(x, t, reduction).astype(dtype)}, {"reduction": reduction}).check_output(rtol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "batchmean", "mean", "sum"])
def test_kldiv_loss_grad(reduction):
    rng = np.random.RandomState(9)
    x = rng.uniform(-3, 0, (3, 4))
    t = rng.uniform(0, 1, (3, 4))
    t[1, 2] = 0.0
    OpTest("kldiv_loss", {"X": x, "Target": t}, {"Loss": np_kldiv(x, t, reduction)},
           {"reduction": reduction}).check_grad(["X"], "Loss")


def test_kldiv_loss_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32")
        t = fluid.layers.data(name="t", shape=[5], dtype="float32")
        mean = fluid.layers.kldiv_loss(x, t)
        none = fluid.layers.kldiv_loss(x, t, reduction="none")
        assert mean.shape == (1,) and none.shape == (-1, 5)
        with pytest.raises(ValueError, match="kldiv_loss: reduction must be 'none', 'batchmean', 'mean' or 'sum', "
                                             "got 'avg'"):
            fluid.layers.kldiv_loss(x, t, reduction="avg")
        t4 = fluid.layers.data(name="t4", shape=[4], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"kldiv_loss: X 'x' \[-1, 5\] and Target 't4' \[-1, 4\] must have the same shape"):
            fluid.layers.kldiv_loss(x, t4)
        block = main.global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"reduction"):
            block.append_op(type="kldiv_loss", inputs={"X": [x], "Target": [t]}, outputs={"Loss": [out]},
                            attrs={"reduction": "avg"})
    rng = np.random.RandomState(10)
    xv = np.log(rng.dirichlet(np.ones(5), 3)).astype("float32")
    tv = rng.dirichlet(np.ones(5), 3).astype("float32")
    a, b = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "t": tv}, fetch_list=[mean, none])
    np.testing.assert_allclose(a, np_kldiv(xv, tv, "mean"), rtol=1e-5)
    np.testing.assert_allclose(b, np_kldiv(xv, tv, "none"), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ margin_rank_loss, rank_loss

def test_margin_rank_loss_forward_and_grad():
    rng = np.random.RandomState(11)
    x1 = rng.uniform(-1, 1, (8, 1))
    x2 = rng.uniform(-1, 1, (8, 1))
    label = rng.choice([-1.0, 1.0], (8, 1))
    margin = 0.3
    x2 = x1 - _away_from(x1 - x2, [margin, -margin])  # away from the hinge
    out = np.maximum(0, -label * (x1 - x2) + margin)
    act = (out > 0).astype("float64")
    assert 0 < act.sum() < 8
    t = OpTest("margin_rank_loss", {"X1": x1, "X2": x2, "Label": label}, {"Out": out, "Activated": act},
               {"margin": margin})
    t.check_output()
    t.check_grad(["X1", "X2"], "Out")
    f32 = {k: v.astype("float32") for k, v in (("X1", x1), ("X2", x2), ("Label", label))}
    OpTest("margin_rank_loss", f32, {"Out": out.astype("float32"), "Activated": act.astype("float32")},
           {"margin": margin}).check_output()


def np_rank_loss(label, left, right):
    o = left - right
    return np.log1p(np.exp(o)) - label * o


def test_rank_loss_forward_and_grad():
    rng = np.random.RandomState(12)
    left = rng.uniform(-2, 2, (6, 1))
    right = rng.uniform(-2, 2, (6, 1))
    label = rng.randint(0, 2, (6, 1)).astype("float64")
    t = OpTest("rank_loss", {"Label": label, "Left": left, "Right": right},
               {"Out": np_rank_loss(label, left, right)})
    t.check_output()
    t.check_grad(["Left", "Right"], "Out")
    # large differences stay finite
    big = OpTest("rank_loss", {"Label": np.ones((2, 1), "float32"), "Left": np.array([[100.0], [-100.0]], "float32"),
                               "Right": np.zeros((2, 1), "float32")},
                 {"Out": np.array([[0.0], [100.0]], "float32")})
    big.check_output(atol=1e-4)


def test_rank_layers_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="float32")
        left = fluid.layers.data(name="left", shape=[1], dtype="float32")
        right = fluid.layers.data(name="right", shape=[1], dtype="float32")
        m = fluid.layers.margin_rank_loss(lbl, left, right)  # Fluid's default margin 0.1
        r = fluid.layers.rank_loss(lbl, left, right)
        wide = fluid.layers.data(name="wide", shape=[2], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"rank_loss: Left 'left' \[-1, 1\] and Right 'wide' \[-1, 2\] must have the same"):
            fluid.layers.rank_loss(lbl, left, wide)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"margin_rank_loss: X1 'left' \[-1, 1\] and Label 'wide' \[-1, 2\] must have"):
            fluid.layers.margin_rank_loss(wide, left, right)
    lv = np.array([[1.0], [-1.0]], "float32")
    a = np.array([[0.5], [0.2]], "float32")
    b = np.array([[0.0], [0.6]], "float32")
    gm, gr = fluid.Executor(fluid.CPUPlace()).run(main, feed={"lbl": lv, "left": a, "right": b}, fetch_list=[m, r])
    np.testing.assert_allclose(gm, np.maximum(0, -lv * (a - b) + 0.1), rtol=1e-6)
    np.testing.assert_allclose(gr, np_rank_loss(lv, a, b), rtol=1e-6)


# ------------------------------------------------------------------ bpr_loss

def np_bpr(x, label):
    n, c = x.shape
    y = np.zeros((n, 1))
    for i in range(n):
        pos = x[i, label[i, 0]]
        others = np.delete(x[i], label[i, 0])
        y[i, 0] = -np.log(1.0 / (1.0 + np.exp(others - pos))).sum() / (c - 1)
    return y


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bpr_loss_forward(dtype):
    rng = np.random.RandomState(13)
    x = rng.uniform(-2, 2, (5, 6)).astype(dtype)
    label = rng.randint(0, 6, (5, 1)).astype("int64")
    OpTest("bpr_loss", {"X": x, "Label": label}, {"Y": np_bpr(x.astype("float64"), label).astype(dtype)}).check_output()


def test_bpr_loss_grad():
    rng = np.random.RandomState(14)
    x = rng.uniform(-2, 2, (4, 5))
    label = rng.randint(0, 5, (4, 1)).astype("int64")
    OpTest("bpr_loss", {"X": x, "Label": label}, {"Y": np_bpr(x, label)}).check_grad(["X"], "Y")


def test_bpr_loss_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        y = fluid.layers.bpr_loss(x, lbl)
        flbl = fluid.layers.data(name="flbl", shape=[1], dtype="float32")
        with pytest.raises(TypeError, match=r"bpr_loss: 'label' \(flbl\) must be int64, got float32"):
            fluid.layers.bpr_loss(x, flbl)
        lbl2 = fluid.layers.data(name="lbl2", shape=[2], dtype="int64")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"bpr_loss: Label 'lbl2' \[-1, 2\] must have rank 2 with last dim 1"):
            fluid.layers.bpr_loss(x, lbl2)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.random.RandomState(15).rand(3, 4).astype("float32")
    got, = exe.run(main, feed={"x": xv, "lbl": np.array([[0], [3], [1]], "int64")}, fetch_list=[y])
    np.testing.assert_allclose(got, np_bpr(xv.astype("float64"), np.array([[0], [3], [1]])), rtol=1e-5)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"bpr_loss: Label 'lbl' holds 4 at row 1, out of range \[0, 4\) for X 'x' \[3, 4\]"):
        exe.run(main, feed={"x": xv, "lbl": np.array([[0], [4], [1]], "int64")}, fetch_list=[y])


# ------------------------------------------------------------------ label_smooth

@pytest.mark.parametrize("prior", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_label_smooth_forward(prior, dtype):
    rng = np.random.RandomState(16)
    k = 6
    x = np.eye(k)[rng.randint(0, k, 5)].astype(dtype)
    eps = 0.2
    inputs = {"X": x}
    if prior:
        p = rng.dirichlet(np.ones(k)).reshape(1, k).astype(dtype)
        inputs["PriorDist"] = p
        want = (1 - eps) * x + eps * p
    else:
        want = (1 - eps) * x + eps / k
    OpTest("label_smooth", inputs, {"Out": want.astype(dtype)}, {"epsilon": eps}).check_output()


def test_label_smooth_grad():
    x = np.random.RandomState(17).rand(3, 4)
    OpTest("label_smooth", {"X": x}, {"Out": 0.7 * x + 0.3 / 4}, {"epsilon": 0.3}).check_grad(["X"], "Out")


def test_label_smooth_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        one_hot = fluid.layers.one_hot(lbl, depth=4)
        smooth = fluid.layers.label_smooth(one_hot)  # Fluid's default epsilon 0.1
        with pytest.raises(ValueError, match=r"label_smooth: epsilon must be in \[0, 1\], got 1.5"):
            fluid.layers.label_smooth(one_hot, epsilon=1.5)
        prior = fluid.layers.data(name="prior", shape=[1, 3], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"label_smooth: PriorDist 'prior' \[1, 3\] must be \[1, K\] with K = the last dim"):
            fluid.layers.label_smooth(one_hot, prior_dist=prior)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"lbl": np.array([[2], [0]], "int64")},
                                                fetch_list=[smooth])
    np.testing.assert_allclose(got, 0.9 * np.eye(4)[[2, 0]] + 0.025, rtol=1e-6)


# ------------------------------------------------------------------ npair_loss (composed)

def np_npair(anchor, positive, labels, l2_reg):
    same = (labels.reshape(-1, 1) == labels.reshape(1, -1)).astype("float64")
    same = same / same.sum(1, keepdims=True)
    l2 = ((anchor ** 2).sum(1).mean() + (positive ** 2).sum(1).mean()) * 0.25 * l2_reg
    sim = anchor @ positive.T
    logp = sim - sim.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    ce = -(same * logp).sum(1, keepdims=True)  # [N, 1]
    return l2 + (same * ce).sum(0).mean()


def test_npair_loss_matches_numpy_and_trains():
    rng = np.random.RandomState(18)
    n, d = 6, 5
    a = rng.randn(n, d).astype("float32")
    p = rng.randn(n, d).astype("float32")
    labels = np.array([0, 1, 0, 2, 1, 3], "float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        av = fluid.layers.data(name="a", shape=[n, d], dtype="float32", append_batch_size=False)
        pv = fluid.layers.data(name="p", shape=[n, d], dtype="float32", append_batch_size=False)
        lv = fluid.layers.data(name="l", shape=[n], dtype="float32", append_batch_size=False)
        av.stop_gradient = False
        loss = fluid.layers.npair_loss(av, pv, lv, l2_reg=0.01)
        grad, = fluid.gradients([loss], [av])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, g = exe.run(main, feed={"a": a, "p": p, "l": labels}, fetch_list=[loss, grad])
    want = np_npair(a.astype("float64"), p.astype("float64"), labels, 0.01)
    np.testing.assert_allclose(got, [want], rtol=1e-5)
    # the gradient w.r.t. the anchor against central differences of the numpy reference
    num = np.zeros_like(a, dtype="float64")
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a, dtype="float64")
        e[i] = 1e-6
        num[i] = (np_npair(a + e, p.astype("float64"), labels, 0.01)
                  - np_npair(a - e, p.astype("float64"), labels, 0.01)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-3, atol=1e-5)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        lab = fluid.layers.data(name="lab", shape=[1], dtype="float32")
        with pytest.raises(ValueError, match=r"npair_loss: the batch size of labels lab must be known at build time"):
            fluid.layers.npair_loss(x, x, lab)
