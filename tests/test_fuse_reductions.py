"""The fuse_reductions pass (kernels/passes/fuse_reductions.cc) and its fused_reduce op: the tuning notes' program
and the other groups it fuses (numpy references, pass on vs off bit for bit, the rewritten op list), training
programs (gradients and SGD updates equal with the pass on and off, the backward ops untouched), a StaticRNN step
block, the cases it must leave alone, the profiler row, and FLUIDLITE_DISABLE_PASSES."""
import json

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, profiler

from pass_util import only_passes  # noqa: E402


@pytest.fixture(autouse=True)
def _only_this_pass(monkeypatch):
    """The passes on by default (fusion) would rewrite what these tests count further."""
    only_passes(monkeypatch, "fuse_reductions")


L = fluid.layers


def _off():
    bs = fluid.BuildStrategy()
    bs.fuse_reductions = False
    return bs


def _build(fn):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = main.random_seed = 7  # both runs start from the same weights
    with fluid.program_guard(main, startup):
        fetch = fn()
    return main, startup, fetch


def _run_both(fn, feed, steps=1):
    """(fetches with the pass on, fetches with it off, the prepared copy with it on); each in a fresh scope."""
    main, startup, fetch = _build(fn)
    results = []
    for prog in (main, fluid.CompiledProgram(main, build_strategy=_off())):
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            for _ in range(steps):
                out = exe.run(prog, feed=feed, fetch_list=fetch)
            results.append(out)
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=list(feed), fetch_list=fetch)
    return results[0], results[1], view


def _types(view, block=0):
    return [op.type for op in view.block(block).ops]


def _fused(view, block=0):
    return [op for op in view.block(block).ops if op.type == "fused_reduce"]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y), np.abs(x - y).max()


X = np.random.RandomState(0).uniform(-2, 2, (6, 37)).astype("float32")


# -- the tuning notes' program ------------------------------------------------------------------------------------


@pytest.mark.parametrize("identity", ["scale", "assign", "none", "square"])
def test_notes_program_becomes_one_fused_reduce(identity):
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        a = L.reduce_sum(x, dim=[1])
        if identity == "square":
            p = L.square(x)
        else:
            t = {"scale": lambda: L.scale(x, 1.0), "assign": lambda: L.assign(x), "none": lambda: x}[identity]()
            p = L.elementwise_mul(x, t)
        b = L.reduce_sum(p, dim=[1])
        return [a, b]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    np.testing.assert_allclose(on[0], X.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(on[1], (X * X).sum(1), rtol=1e-5)
    assert _types(view) == ["feed", "fused_reduce", "fetch", "fetch"]
    op = _fused(view)[0]
    assert op.attr("reductions") == ["sum", "sum_square"]
    assert op.attr("dim") == [1] and op.attr("keep_dim") is False
    middle = {"scale": ["scale", "elementwise_mul"], "assign": ["assign", "elementwise_mul"],
              "none": ["elementwise_mul"], "square": ["square"]}[identity]
    assert op.attr("fused_ops") == ["reduce_sum"] + middle + ["reduce_sum"]
    # the product (and the identity's output) never materialise: their variables are gone
    names = {v.name for v in view.global_block().vars.values()}
    assert not any(n.startswith(("elementwise_mul", "scale", "assign", "square")) for n in names)
    r = view.pass_results[0]
    assert r["pass"] == "fuse_reductions" and r["changes"] == 1
    assert "fused_reduce(" in r["details"][0] and "sum_square" in r["details"][0]


def test_identity_on_either_side_and_a_lone_sum_of_squares():
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        b = L.reduce_sum(L.elementwise_mul(L.scale(x, 1.0), x), dim=[-1])  # identity first, dim -1
        return [b]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    assert _types(view) == ["feed", "fused_reduce", "fetch"]
    assert _fused(view)[0].attr("reductions") == ["sum_square"]


def test_mean_and_variance_moments_and_max_of_one_x():
    # reduce_mean(x) and reduce_mean(x * x) (a variance's moments), reduce_max and reduce_sum of the same x with the
    # same axes (dim [-2] and [1] are one axis of a rank-3 x) and keep_dim: one op.
    x3 = np.random.RandomState(1).standard_normal((4, 9, 5)).astype("float32")

    def fn():
        x = fluid.data("x", [-1, 9, 5], "float32")
        m = L.reduce_mean(x, dim=[1], keep_dim=True)
        ms = L.reduce_mean(L.elementwise_mul(x, x), dim=[-2], keep_dim=True)
        var = L.elementwise_sub(ms, L.elementwise_mul(m, m))
        mx = L.reduce_max(x, dim=[1], keep_dim=True)
        s = L.reduce_sum(x, dim=[1], keep_dim=True)
        return [m, var, mx, s]

    on, off, view = _run_both(fn, {"x": x3})
    _same(on, off)
    np.testing.assert_allclose(on[0], x3.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(on[1], x3.var(1, keepdims=True), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(on[2], x3.max(1, keepdims=True))
    np.testing.assert_allclose(on[3], x3.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["mean", "mean_square", "max", "sum"]
    assert op.attr("fused_ops") == ["reduce_mean", "elementwise_mul", "reduce_mean", "reduce_max", "reduce_sum"]
    assert "elementwise_mul" in _types(view)  # m * m of the variance stays: it is not a reduction's input


@pytest.mark.parametrize("form", ["square", "mul", "sum", "middle_axis"])
def test_variance_around_the_mean_becomes_one_op(form):
    x3 = (np.random.RandomState(3).standard_normal((4, 9, 5)) * 3 + 1).astype("float32")
    dim = [1] if form == "middle_axis" else [2]

    def fn():
        x = fluid.data("x", [-1, 9, 5], "float32")
        m = L.reduce_mean(x, dim=dim, keep_dim=True)
        d = L.elementwise_sub(x, m)
        sq = L.elementwise_mul(d, d) if form == "mul" else L.square(d)
        v = (L.reduce_sum if form == "sum" else L.reduce_mean)(sq, dim=dim, keep_dim=True)
        return [m, v]

    on, off, view = _run_both(fn, {"x": x3})
    _same(on, off)
    axis = dim[0]
    want = x3.var(axis, keepdims=True) * (x3.shape[axis] if form == "sum" else 1)
    np.testing.assert_allclose(on[1], want, rtol=1e-4, atol=1e-5)
    assert _types(view) == ["feed", "fused_reduce", "fetch", "fetch"]
    op = _fused(view)[0]
    assert op.attr("reductions") == ["mean", ("sum" if form == "sum" else "mean") + "_square_dev"]
    assert op.attr("fused_ops") == ["reduce_mean", "elementwise_sub", "elementwise_mul" if form == "mul" else "square",
                                    "reduce_sum" if form == "sum" else "reduce_mean"]


@pytest.mark.parametrize("case", ["deviation_reused", "mean_without_keep_dim", "other_axes"])
def test_variance_cases_that_keep_the_deviation(case):
    # Where x - mean is read again (a layer norm from primitives) or the mean is not the group's, the deviation
    # stays and only its square's reduction fuses (a lone mean of d * d).
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        m = L.reduce_mean(x, dim=[1], keep_dim=case != "mean_without_keep_dim")
        d = L.elementwise_sub(x, m, axis=0)
        v = L.reduce_mean(L.square(d), dim=[0] if case == "other_axes" else [1], keep_dim=True)
        fetch = [m, v]
        if case == "deviation_reused":
            fetch.append(L.elementwise_div(d, L.sqrt(L.scale(v, 1.0, bias=1e-5)), axis=0))
        return fetch

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["mean_square"]
    assert "elementwise_sub" in _types(view) and "reduce_mean" in _types(view)


def test_variance_in_training_keeps_what_the_backward_reads():
    # square_grad reads d: d stays; the mean of its square fuses alone, gradients equal.
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        h = L.fc(x, size=8, param_attr=fluid.ParamAttr(name="wv"), bias_attr=False)
        m = L.reduce_mean(h, dim=[1], keep_dim=True)
        v = L.reduce_mean(L.square(L.elementwise_sub(h, m)), dim=[1], keep_dim=True)
        loss = L.mean(L.elementwise_add(v, m))
        fluid.optimizer.SGD(0.1).minimize(loss)
        return [loss, "wv@GRAD", "wv"]

    on, off, view = _run_both(fn, {"x": X}, steps=2)
    _same(on, off)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["mean_square"] and "square_grad" in _types(view)


def test_reduce_all_groups_whatever_dim_says():
    def fn():
        x = fluid.data("x", [6, 37], "float32")
        return [L.reduce_sum(x), L.reduce_max(x), L.reduce_mean(L.square(x))]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    np.testing.assert_allclose(on[2], [(X * X).mean()], rtol=1e-5)
    assert _fused(view)[0].attr("reductions") == ["sum", "max", "mean_square"]


def test_mean_op_groups_with_reduce_all():
    # fluid.layers.mean is reduce_mean over every axis: it groups with reduce_all reductions without keep_dim.
    def fn():
        x = fluid.data("x", [6, 37], "float32")
        return [L.mean(x), L.mean(L.square(x)), L.reduce_max(x)]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    np.testing.assert_allclose(on[1], [(X * X).mean()], rtol=1e-5)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["mean", "mean_square", "max"]
    assert op.attr("reduce_all") is True and op.attr("keep_dim") is False
    assert op.attr("fused_ops") == ["mean", "square", "mean", "reduce_max"]


@pytest.mark.parametrize("form", ["softmax", "log_sum_exp", "train"])
def test_softmax_max_and_sum_as_ops_become_one(form):
    # m = reduce_max(x, keep_dim=True); e = exp(x - m); s = reduce_sum(e, keep_dim=True): one op reading x once.
    # Softmax reads e again (e / s): the fused op writes e (its Exp output); log-sum-exp does not: e never exists.
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        if form == "train":
            x = L.fc(x, size=12, param_attr=fluid.ParamAttr(name="ws"), bias_attr=False)
        m = L.reduce_max(x, dim=[1], keep_dim=True)
        e = L.exp(L.elementwise_sub(x, m))
        s = L.reduce_sum(e, dim=[1], keep_dim=True)
        if form == "log_sum_exp":
            return [L.elementwise_add(m, L.log(s))]
        y = L.elementwise_div(e, s)
        if form == "softmax":
            return [y, s]
        loss = L.mean(L.elementwise_mul(y, y))
        fluid.optimizer.SGD(0.5).minimize(loss)
        return [loss, y, "ws@GRAD", "ws"]

    on, off, view = _run_both(fn, {"x": X}, steps=2 if form == "train" else 1)
    _same(on, off)
    if form == "softmax":
        want = np.exp(X - X.max(1, keepdims=True))
        np.testing.assert_allclose(on[0], want / want.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    if form == "log_sum_exp":
        np.testing.assert_allclose(on[0][:, 0], np.log(np.exp(X.astype("float64")).sum(1)), rtol=1e-5)
    # (training: mean(y * y) of the loss is a second group, a lone mean of squares)
    (op,) = [o for o in _fused(view) if "exp" in o.attr("fused_ops")]
    assert len(_fused(view)) == (2 if form == "train" else 1)
    assert op.attr("reductions") == ["max", "sum_exp_dev"]
    assert op.attr("fused_ops") == ["reduce_max", "elementwise_sub", "exp", "reduce_sum"]
    assert (op.output("Exp") != []) == (form != "log_sum_exp")
    assert "exp" not in _types(view) and "elementwise_sub" not in _types(view)


def test_softmax_pair_without_keep_dim_max_or_with_other_axes_stays():
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        m = L.reduce_max(x, dim=[1])  # no keep_dim: broadcast with axis=0
        e = L.exp(L.elementwise_sub(x, m, axis=0))
        return [L.elementwise_div(e, L.reduce_sum(e, dim=[1]), axis=0)]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    assert "fused_reduce" not in _types(view) and "exp" in _types(view)


# -- where it must not fuse -----------------------------------------------------------------------------------------


def _unfused_types(fn):
    main, _, fetch = _build(fn)
    return [op.type for op in main.global_block().ops]


@pytest.mark.parametrize("case", ["axes", "keep_dim", "inputs", "product_fetched", "identity_fetched",
                                  "product_persistable", "scale_not_identity", "product_read_elsewhere",
                                  "x_written_between", "max_of_square"])
def test_must_not_fuse(case):
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        y = fluid.data("y", [-1, 37], "float32")
        if case in ("axes", "keep_dim", "inputs"):
            a = L.reduce_sum(x, dim=[1])
            b = {"axes": lambda: L.reduce_max(x, dim=[0]), "keep_dim": lambda: L.reduce_max(x, dim=[1], keep_dim=True),
                 "inputs": lambda: L.reduce_max(y, dim=[1])}[case]()
            return [a, b]
        if case == "x_written_between":
            a = L.reduce_sum(x, dim=[1])
            L.assign(y, output=x)  # x changes between the two reductions
            return [a, L.reduce_max(x, dim=[1])]
        if case == "max_of_square":  # fused_reduce has no max of squares
            return [L.reduce_max(L.square(x), dim=[1])]
        t = L.scale(x, 2.0) if case == "scale_not_identity" else L.scale(x, 1.0)
        p = L.elementwise_mul(x, t)
        if case == "product_persistable":
            p.persistable = True
        fetch = [L.reduce_sum(p, dim=[1])]
        if case == "product_fetched":
            fetch.append(p)
        if case == "identity_fetched":
            fetch.append(t)
        if case == "product_read_elsewhere":
            fetch.append(L.relu(p))
        return fetch

    feed = {"x": X, "y": X[::-1].copy()}
    on, off, view = _run_both(fn, feed)
    _same(on, off)
    assert "fused_reduce" not in _types(view)
    assert [t for t in _types(view) if t not in ("feed", "fetch")] == \
        [t for t in _unfused_types(fn) if t not in ("feed", "fetch")]


def test_product_read_by_a_sub_block_stays():
    # p = x * x is read inside a While body (another block reads it by name): it must stay; the plain reduce_sum of
    # x and the reduction of p are over different variables, so nothing fuses.
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        a = L.reduce_sum(x, dim=[1])
        p = L.elementwise_mul(x, x)
        s = L.reduce_sum(p, dim=[1])
        acc = L.assign(x)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 2)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.elementwise_add(acc, p), acc)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        return [a, s, acc]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    np.testing.assert_allclose(on[2], X + 2 * X * X, rtol=1e-6)
    assert "fused_reduce" not in _types(view) and "elementwise_mul" in _types(view)


def test_product_read_twice_fuses_as_reductions_of_the_product():
    # p = x * x read by two reductions: each one alone cannot absorb p (the other reads it), so the two reduce p.
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        p = L.elementwise_mul(x, x)
        return [L.reduce_sum(p, dim=[1]), L.reduce_mean(p, dim=[1])]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["sum", "mean"] and "elementwise_mul" in _types(view)


# -- training: forward, gradients and updates ------------------------------------------------------------------------


def _train_net():
    x = fluid.data("x", [-1, 37], "float32")
    h = L.fc(x, size=16, param_attr=fluid.ParamAttr(name="w"), bias_attr=False)
    a = L.reduce_sum(h, dim=[1])
    b = L.reduce_sum(L.elementwise_mul(h, L.scale(h, 1.0)), dim=[1])
    c = L.reduce_mean(h, dim=[1])
    loss = L.mean(L.elementwise_add(L.elementwise_add(a, L.scale(b, 0.01)), c))
    fluid.optimizer.SGD(0.05).minimize(loss)
    return [loss, a, b, "w@GRAD", "w"]


def test_training_gradients_and_updates_equal_with_the_pass_on_and_off():
    on, off, view = _run_both(_train_net, {"x": X}, steps=3)
    _same(on, off)
    (op,) = _fused(view)
    assert op.attr("reductions") == ["sum", "sum_square", "mean"]
    types = _types(view)
    # forward: the product and the identity are gone; backward: the reductions' grads and the product's stay
    assert types.count("elementwise_mul") == 0 and "scale" in types  # scale(b, 0.01) and the grads' scale ops
    for grad in ("reduce_sum_grad", "reduce_mean_grad", "elementwise_mul_grad"):
        assert grad in types
    # the backward ops read h where they read the product (shape only) or the identity's output (the same values)
    mul_grad = [o for o in view.global_block().ops if o.type == "elementwise_mul_grad"][0]
    assert mul_grad.input("X") == mul_grad.input("Y")


def test_training_gradient_against_numpy():
    # d/dh mean(sum(h) + 0.01 * sum(h * h) + mean(h)) over rows = (1 + 0.02 h + 1/16) / N; w@GRAD = x^T that.
    on, off, _ = _run_both(_train_net, {"x": X}, steps=1)
    w0 = on[4] + 0.05 * on[3]  # the weight before the one SGD step
    h = X @ w0
    dh = (1 + 0.02 * h + 1.0 / 16) / X.shape[0]
    np.testing.assert_allclose(on[3], X.T @ dh, rtol=1e-4, atol=1e-5)


# -- sub-blocks ------------------------------------------------------------------------------------------------------


def _rnn_net(train):
    def fn():
        xs = fluid.data("x", [3, 4, 6], "float32")
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(xs)
            h_prev = rnn.memory(shape=[-1, 6], batch_ref=x_t)
            h = L.fc([x_t, h_prev], size=6, param_attr=[fluid.ParamAttr(name="w_rnn"), fluid.ParamAttr(name="u_rnn")],
                     bias_attr=False)
            s = L.reduce_sum(h, dim=[1], keep_dim=True)
            m = L.reduce_max(h, dim=[1], keep_dim=True)
            q = L.reduce_sum(L.elementwise_mul(h, L.assign(h)), dim=[1], keep_dim=True)
            out = L.elementwise_add(L.elementwise_mul(h, L.scale(s, 0.1)), L.scale(q, 0.01), axis=0)
            out = L.elementwise_sub(out, m, axis=0)
            rnn.update_memory(h_prev, L.tanh(out))
            rnn.step_output(out)
        loss = L.mean(rnn())
        if not train:
            return [loss]
        fluid.optimizer.SGD(0.1).minimize(loss)
        return [loss, "w_rnn@GRAD", "u_rnn@GRAD", "w_rnn"]
    return fn


@pytest.mark.parametrize("train", [False, True])
def test_static_rnn_step_block_fuses_and_trains_the_same(train):
    x = np.random.RandomState(2).uniform(-1, 1, (3, 4, 6)).astype("float32")
    on, off, view = _run_both(_rnn_net(train), {"x": x}, steps=2)
    _same(on, off)
    step = [b for b in range(1, view.num_blocks) if "fused_reduce" in _types(view, b)]
    assert len(step) == 1
    (op,) = _fused(view, step[0])
    assert op.attr("keep_dim") is True
    # Inference: the step block's product and the assign go into the op. Training: the grad block reads them by
    # name (reduce_sum_grad, elementwise_mul_grad), so they stay, and only the two reductions of h fuse.
    assert op.attr("reductions") == (["sum", "max"] if train else ["sum", "max", "sum_square"])
    assert ("elementwise_mul" in [t for t in _types(view, step[0])]) is True  # h * scale(s) stays either way
    assert ("assign" in _types(view, step[0])) == train


@pytest.mark.parametrize("train", [False, True])
def test_while_body(train):
    # A While body whose state h is updated from the sum and the sum of squares of its rows. Forward only, the body's
    # four ops become one. Trained through the loop, while_grad's block reads the body's product and copy by name
    # (and h, which the body overwrites later, may not stand in for them there): nothing fuses. Equal either way.
    def fn():
        x = fluid.data("x", [-1, 37], "float32")
        x.stop_gradient = False
        h = L.assign(x)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            a = L.reduce_sum(h, dim=[1], keep_dim=True)
            b = L.reduce_sum(L.elementwise_mul(h, L.scale(h, 1.0)), dim=[1], keep_dim=True)
            L.assign(L.elementwise_add(L.scale(h, 0.5), L.elementwise_sub(L.scale(a, 0.01), L.scale(b, 0.001)),
                                       axis=0), h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(h)
        return [loss, fluid.gradients([loss], [x])[0]] if train else [loss, h]

    on, off, view = _run_both(fn, {"x": X})
    _same(on, off)
    body = [b for b in range(1, view.num_blocks) if "fused_reduce" in _types(view, b)]
    if train:
        assert body == [] and view.pass_results[0]["changes"] == 0
    else:
        (op,) = _fused(view, body[0])
        assert op.attr("reductions") == ["sum", "sum_square"]
        assert _types(view, body[0])[:2] == ["fused_reduce", "scale"]  # the update's scale(h, 0.5) follows


# -- the profiler, the switch, apply_passes --------------------------------------------------------------------------


def _notes():
    x = fluid.data("x", [-1, 37], "float32")
    return [L.reduce_sum(x, dim=[1]), L.reduce_sum(L.elementwise_mul(x, L.scale(x, 1.0)), dim=[1])]


def test_profiler_shows_one_fused_row_naming_the_ops():
    main, _, fetch = _build(_notes)
    exe = fluid.Executor(fluid.CPUPlace())
    with profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed={"x": X}, fetch_list=fetch)
    ops = [e for e in profiler.events() if e["category"] == "Operator" and e["name"] not in ("feed", "fetch")]
    assert [e["name"] for e in ops] == ["fused_reduce"]
    args = json.loads("{%s}" % ops[0]["args"])
    assert args["fused_ops"] == ["reduce_sum", "scale", "elementwise_mul", "reduce_sum"]
    assert args["inputs"] == "X[6, 37]" and args["outputs"] == "Out[6], Out[6]"
    rows = [r for r in profiler.summary() if r["category"] == "Operator"]
    assert sorted(r["event"] for r in rows) == ["feed", "fetch", "fused_reduce"]
    assert [r["calls"] for r in rows if r["event"] == "fused_reduce"] == [1]


def test_disabled_by_env(monkeypatch):
    main, _, fetch = _build(_notes)
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_reductions")
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x"], fetch_list=fetch)
    assert "fused_reduce" not in _types(view) and "elementwise_mul" in _types(view)
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "all")
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x"], fetch_list=fetch)
    assert "fused_reduce" not in _types(view)
    monkeypatch.delenv("FLUIDLITE_DISABLE_PASSES")
    view = fluid.Executor(fluid.CPUPlace()).prepared_program(main, feed=["x"], fetch_list=fetch)
    assert "fused_reduce" in _types(view)


def test_registered_and_applied_by_name_with_protected_vars():
    info = {p["name"]: p for p in core.passes()}["fuse_reductions"]
    assert info["order"] == 500
    main, _, fetch = _build(_notes)
    desc, results = core.apply_passes(main.desc, ["fuse_reductions"], protected=["x"] + [v.name for v in fetch])
    types = [desc.block(0).op(i).type() for i in range(desc.block(0).op_size())]
    assert types == ["fused_reduce"] and results[0]["changes"] == 1
    # the product protected (as a fetch is): nothing fuses but the lone plain sum's group, which has one member
    p = [op for op in main.global_block().ops if op.type == "elementwise_mul"][0].output("Out")[0]
    desc, results = core.apply_passes(main.desc, ["fuse_reductions"], protected=["x", p] + [v.name for v in fetch])
    assert results[0]["changes"] == 0 and desc.block(0).op_size() == 4
