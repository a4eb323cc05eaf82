"""Sparse gradients (SelectedRows): lookup_table(is_sparse=True) gradients against numpy, their aggregation by
`sum`, and sparse optimizer updates against the dense ones (or numpy where Fluid's sparse semantics differ)."""
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core

L = fluid.layers
VOCAB, DIM = 12, 3
SR = core.VarDesc.VarType.SELECTED_ROWS


def _ids(rng, n=7, vocab=VOCAB):
    ids = rng.randint(0, vocab // 2, size=(n, 1)).astype("int64")  # repeats and untouched rows
    ids[0, 0] = ids[1, 0]
    return ids


def _build(is_sparse, opt=None, update=None, shared=False, padding_idx=None, v2=False, reg=None, clip=None,
           seed=3):
    """ids -> embedding (VOCAB x DIM) [-> a second lookup of the same table] -> loss = sum(emb * c).

    opt: a fluid optimizer; update(block, param, grad): appends an optimizer op by hand. Returns
    (main, startup, loss, param name, grad name)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        if v2:
            ids = fluid.data(name="ids", shape=[-1], dtype="int64")
            emb = fluid.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse, padding_idx=padding_idx,
                                  param_attr=fluid.ParamAttr(name="w", regularizer=reg))
        else:
            ids = L.data(name="ids", shape=[1], dtype="int64")
            emb = L.embedding(ids, size=[VOCAB, DIM], is_sparse=is_sparse, padding_idx=padding_idx,
                              param_attr=fluid.ParamAttr(name="w", regularizer=reg))
        c = L.data(name="c", shape=[DIM], dtype="float32")
        loss = L.reduce_sum(L.elementwise_mul(emb, c))
        if shared:
            ids2 = L.data(name="ids2", shape=[1], dtype="int64")
            emb2 = L.embedding(ids2, size=[VOCAB, DIM], is_sparse=is_sparse, param_attr=fluid.ParamAttr(name="w"))
            loss = L.elementwise_add(loss, L.reduce_sum(L.scale(emb2, scale=2.0)))
        if opt is not None:
            opt.minimize(loss, grad_clip=clip) if clip is not None else opt.minimize(loss)
        else:
            params_grads = fluid.backward.append_backward(loss)
            if update is not None:
                for p, g in params_grads:
                    update(main.global_block(), startup.global_block(), p, g)
    return main, startup, loss


def _feed(rng, n=7, v2=False):
    ids = _ids(rng, n)
    return {"ids": ids.reshape(-1) if v2 else ids, "c": rng.randn(n, DIM).astype("float32"),
            "ids2": _ids(rng, 4)}


def _run(main, startup, feeds, w0=None, fetch=(), extra=None, keep=("w@GRAD",)):
    """Runs startup, then `main` once per feed; the variables in `keep` are made persistable so that the
    scope returned holds them after the run (temporaries live in the executor's kid scope)."""
    for name in keep:
        if name in main.global_block().vars:
            main.global_block().var(name).persistable = True
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        if w0 is not None:
            scope.var("w").get_tensor().set(w0)
        for name, value in (extra or {}).items():
            scope.var(name).get_tensor().set(value)
        names = main.global_block().vars
        for f in feeds:
            exe.run(main, feed={k: v for k, v in f.items() if k in names}, fetch_list=list(fetch))
    return scope


def test_lookup_sparse_grad_is_selected_rows_with_ids_as_rows():
    rng = np.random.RandomState(0)
    main, startup, _ = _build(True)
    assert main.global_block().var("w@GRAD").type == SR
    f = _feed(rng)
    w0 = rng.randn(VOCAB, DIM).astype("float32")
    scope = _run(main, startup, [f], w0)
    sr = scope.find_var("w@GRAD").get_selected_rows()
    assert isinstance(sr, core.SelectedRows)
    assert sr.height() == VOCAB
    assert list(sr.rows()) == list(f["ids"].reshape(-1))  # every id as seen, repeats kept (Fluid)
    np.testing.assert_array_equal(np.array(sr.get_tensor()), f["c"])
    assert scope.find_var("w@GRAD").kind() == "SelectedRows"


@pytest.mark.parametrize("v2", [False, True])
def test_lookup_sparse_grad_padding_rows_are_zero(v2):
    rng = np.random.RandomState(1)
    main, startup, _ = _build(True, padding_idx=2, v2=v2)
    f = _feed(rng, v2=v2)
    f["ids"][3] = 2
    scope = _run(main, startup, [f])
    sr = scope.find_var("w@GRAD").get_selected_rows()
    want = f["c"].copy()
    want[3] = 0
    assert list(sr.rows()) == list(f["ids"].reshape(-1))
    np.testing.assert_array_equal(np.array(sr.get_tensor()), want)


def test_sparse_grad_equals_dense_grad_when_densified():
    rng = np.random.RandomState(2)
    f = _feed(rng)
    dense = np.array(_run(*_build(False)[:2], [f]).find_var("w@GRAD").get_tensor())
    sr = _run(*_build(True)[:2], [f]).find_var("w@GRAD").get_selected_rows()
    got = np.zeros((sr.height(), DIM), "float32")
    np.add.at(got, np.array(sr.rows()), np.array(sr.get_tensor()))
    np.testing.assert_allclose(got, dense, rtol=1e-6)


def test_shared_table_gradients_are_summed_as_selected_rows():
    rng = np.random.RandomState(4)
    main, startup, _ = _build(True, shared=True)
    sums = [op for op in main.global_block().ops if op.type == "sum"]
    assert sums and main.global_block().var("w@GRAD").type == SR
    f = _feed(rng)
    sr = _run(main, startup, [f]).find_var("w@GRAD").get_selected_rows()
    rows = list(sr.rows())
    assert sorted(rows) == sorted(list(f["ids"].reshape(-1)) + list(f["ids2"].reshape(-1)))
    got = np.zeros((VOCAB, DIM), "float32")
    np.add.at(got, np.array(rows), np.array(sr.get_tensor()))
    want = np.zeros((VOCAB, DIM), "float32")
    np.add.at(want, f["ids"].reshape(-1), f["c"])
    np.add.at(want, f["ids2"].reshape(-1), 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sum_of_selected_rows_and_dense_is_dense():
    rng = np.random.RandomState(5)
    main, startup, _ = _build(True)
    block = main.global_block()
    with fluid.program_guard(main, startup):
        d = L.fill_constant(shape=[VOCAB, DIM], dtype="float32", value=0.5)
        out = block.create_var(name="mixed", dtype="float32", shape=[VOCAB, DIM])
        block.append_op(type="sum", inputs={"X": [block.var("w@GRAD"), d]}, outputs={"Out": [out]})
    f = _feed(rng)
    got = np.array(_run(main, startup, [f], keep=("mixed",)).find_var("mixed").get_tensor())
    want = np.full((VOCAB, DIM), 0.5, "float32")
    np.add.at(want, f["ids"].reshape(-1), f["c"])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_dense_op_reading_selected_rows_names_it():
    main, startup, _ = _build(True)
    block = main.global_block()
    with fluid.program_guard(main, startup):
        out = block.create_var(name="bad", dtype="float32", shape=[VOCAB, DIM])
        block.append_op(type="mean", inputs={"X": [block.var("w@GRAD")]}, outputs={"Out": [out]})
    with pytest.raises(Exception, match=r"mean: input X variable 'w@GRAD' holds a SelectedRows \(a sparse "
                                        r"gradient\), but mean reads a dense LoDTensor there"):
        _run(main, startup, [_feed(np.random.RandomState(0))])


def test_fetching_selected_rows_names_scope_access():
    main, startup, _ = _build(True)
    with pytest.raises(Exception, match=r"w@GRAD.*SelectedRows"):
        _run(main, startup, [_feed(np.random.RandomState(0))], fetch=["w@GRAD"])


# ------------------------------------------------------------------ optimizers: sparse against dense

def _compare(opt_factory=None, update=None, steps=3, rtol=1e-5, shared=False, reg=None, clip=None, params=("w",)):
    rng = np.random.RandomState(7)
    feeds = [_feed(rng) for _ in range(steps)]
    w0 = rng.randn(VOCAB, DIM).astype("float32")
    out = {}
    for sparse in (False, True):
        main, startup, _ = _build(sparse, opt=opt_factory() if opt_factory else None, update=update,
                                  shared=shared, reg=reg, clip=clip)
        if sparse:
            assert main.global_block().var("w@GRAD").type == SR
        scope = _run(main, startup, feeds, w0)
        out[sparse] = {n: np.array(scope.find_var(n).get_tensor()) for n in params}
    for n in params:
        np.testing.assert_allclose(out[True][n], out[False][n], rtol=rtol, atol=1e-6)
    return out, feeds, w0


@pytest.mark.parametrize("make", [
    lambda: fluid.optimizer.SGD(learning_rate=0.1),
    lambda: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9),
    lambda: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9, use_nesterov=True),
    lambda: fluid.optimizer.Adagrad(learning_rate=0.1),
    lambda: fluid.optimizer.Adam(learning_rate=0.1),  # not lazy: every row's moments decay, as dense
], ids=["sgd", "momentum", "nesterov", "adagrad", "adam"])
def test_sparse_update_equals_dense(make):
    out, _, w0 = _compare(make)
    assert not np.allclose(out[True]["w"], w0)  # something moved


def test_sparse_update_of_shared_table_equals_dense():
    _compare(lambda: fluid.optimizer.SGD(learning_rate=0.1), shared=True)
    _compare(lambda: fluid.optimizer.Adam(learning_rate=0.1), shared=True)


def _numpy_lazy_adam(w, feeds, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    m1, m2 = np.zeros_like(w, dtype="float64"), np.zeros_like(w, dtype="float64")
    w = w.astype("float64")
    for t, f in enumerate(feeds, 1):
        g = np.zeros_like(w)
        np.add.at(g, f["ids"].reshape(-1), f["c"])
        rows = np.unique(f["ids"].reshape(-1))
        m1[rows] = b1 * m1[rows] + (1 - b1) * g[rows]
        m2[rows] = b2 * m2[rows] + (1 - b2) * g[rows] ** 2
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        w[rows] -= lr_t * m1[rows] / (np.sqrt(m2[rows]) + eps)
    return w


def test_lazy_adam_updates_only_touched_rows():
    rng = np.random.RandomState(7)
    feeds = [_feed(rng) for _ in range(3)]
    w0 = rng.randn(VOCAB, DIM).astype("float32")
    main, startup, _ = _build(True, opt=fluid.optimizer.Adam(learning_rate=0.1, lazy_mode=True))
    got = np.array(_run(main, startup, feeds, w0).find_var("w").get_tensor())
    np.testing.assert_allclose(got, _numpy_lazy_adam(w0, feeds), rtol=1e-5, atol=1e-6)
    untouched = np.setdiff1d(np.arange(VOCAB), np.concatenate([f["ids"].reshape(-1) for f in feeds]))
    assert len(untouched) and np.array_equal(got[untouched], w0[untouched])
    # lazy_mode on a dense gradient is the ordinary update
    dense = np.array(_run(*_build(False, opt=fluid.optimizer.Adam(learning_rate=0.1, lazy_mode=True))[:2],
                          feeds, w0).find_var("w").get_tensor())
    plain = np.array(_run(*_build(False, opt=fluid.optimizer.Adam(learning_rate=0.1))[:2], feeds,
                          w0).find_var("w").get_tensor())
    np.testing.assert_array_equal(dense, plain)


def _accumulators(block, startup, param, names, value=0.0):
    out = {}
    for n in names:
        v = block.create_var(name="%s_%s" % (param.name, n), dtype=param.dtype, shape=param.shape, persistable=True)
        sv = startup.create_var(name=v.name, dtype=param.dtype, shape=param.shape, persistable=True)
        startup.append_op(type="fill_constant", outputs={"Out": [sv]},
                          attrs={"shape": list(param.shape), "dtype": int(param.dtype), "value": value})
        out[n] = v
    lr = block.create_var(name="lr_" + param.name, dtype=param.dtype, shape=[1], persistable=True)
    slr = startup.create_var(name=lr.name, dtype=param.dtype, shape=[1], persistable=True)
    startup.append_op(type="fill_constant", outputs={"Out": [slr]},
                      attrs={"shape": [1], "dtype": int(param.dtype), "value": 0.05})
    return out, lr


def _rmsprop_update(centered, momentum=0.5):
    def update(block, startup, p, g):
        acc, lr = _accumulators(block, startup, p, ["ms", "mg", "mom"])
        block.append_op(type="rmsprop",
                        inputs={"Param": p, "Grad": g, "MeanSquare": acc["ms"], "MeanGrad": acc["mg"],
                                "Moment": acc["mom"], "LearningRate": lr},
                        outputs={"ParamOut": p, "MeanSquareOut": acc["ms"], "MeanGradOut": acc["mg"],
                                 "MomentOut": acc["mom"]},
                        attrs={"decay": 0.8, "momentum": momentum, "epsilon": 1e-6, "centered": centered})
    return update


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_sparse_equals_dense_and_numpy(centered):
    out, feeds, w0 = _compare(update=_rmsprop_update(centered), params=("w", "w_ms", "w_mg", "w_mom"))
    w, ms, mg, mom = w0.astype("float64"), 0.0 * w0, 0.0 * w0, 0.0 * w0
    for f in feeds:
        g = np.zeros_like(w)
        np.add.at(g, f["ids"].reshape(-1), f["c"])
        ms = 0.8 * ms + 0.2 * g * g
        denom = ms + 1e-6
        if centered:
            mg = 0.8 * mg + 0.2 * g
            denom = denom - mg * mg
        mom = 0.5 * mom + 0.05 * g / np.sqrt(denom)
        w = w - mom
    np.testing.assert_allclose(out[True]["w"], w, rtol=1e-4, atol=1e-5)


def _ftrl_update(l1, l2, lr_power):
    def update(block, startup, p, g):
        acc, lr = _accumulators(block, startup, p, ["sq", "lin"], value=0.1)
        block.append_op(type="ftrl",
                        inputs={"Param": p, "Grad": g, "SquaredAccumulator": acc["sq"],
                                "LinearAccumulator": acc["lin"], "LearningRate": lr},
                        outputs={"ParamOut": p, "SquaredAccumOut": acc["sq"], "LinearAccumOut": acc["lin"]},
                        attrs={"l1": l1, "l2": l2, "lr_power": lr_power})
    return update


def _numpy_ftrl(w, sq, lin, g, lr, l1, l2, lr_power):
    new_sq = sq + g * g
    pw = (lambda x: np.sqrt(x)) if lr_power == -0.5 else (lambda x: x ** -lr_power)
    lin = lin + g - (pw(new_sq) - pw(sq)) / lr * w
    w = np.where(np.abs(lin) > l1, (l1 * np.sign(lin) - lin) / (pw(new_sq) / lr + 2 * l2), 0.0)
    return w, new_sq, lin


@pytest.mark.parametrize("l1,l2,lr_power", [(0.0, 0.0, -0.5), (0.01, 0.1, -0.5), (0.01, 0.1, -0.7)])
def test_ftrl_dense_and_sparse_against_numpy(l1, l2, lr_power):
    rng = np.random.RandomState(8)
    feeds = [_feed(rng) for _ in range(3)]
    w0 = rng.randn(VOCAB, DIM).astype("float32")
    got = {}
    for sparse in (False, True):
        main, startup, _ = _build(sparse, update=_ftrl_update(l1, l2, lr_power))
        scope = _run(main, startup, feeds, w0)
        got[sparse] = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "w_sq", "w_lin")}
    # dense: every element follows the formula; sparse (Fluid 2's SparseFTRL): only the merged rows move
    w, sq, lin = w0.astype("float64"), np.full(w0.shape, 0.1), np.full(w0.shape, 0.1)
    ws, sqs, lins = w.copy(), sq.copy(), lin.copy()
    for f in feeds:
        g = np.zeros_like(w)
        np.add.at(g, f["ids"].reshape(-1), f["c"])
        w, sq, lin = _numpy_ftrl(w, sq, lin, g, 0.05, l1, l2, lr_power)
        rows = np.unique(f["ids"].reshape(-1))
        ws[rows], sqs[rows], lins[rows] = _numpy_ftrl(ws[rows], sqs[rows], lins[rows], g[rows], 0.05, l1, l2,
                                                      lr_power)
    for name, want in (("w", w), ("w_sq", sq), ("w_lin", lin)):
        np.testing.assert_allclose(got[False][name], want, rtol=1e-4, atol=1e-5)
    for name, want in (("w", ws), ("w_sq", sqs), ("w_lin", lins)):
        np.testing.assert_allclose(got[True][name], want, rtol=1e-4, atol=1e-5)


def test_regularizer_on_sparse_grad_gives_dense_update():
    # Fluid 1.8: grad (SelectedRows) + decay(param) (dense) is summed into a dense gradient: every row decays.
    out, feeds, w0 = _compare(lambda: fluid.optimizer.SGD(learning_rate=0.1,
                                                          regularization=fluid.regularizer.L2Decay(0.5)))
    untouched = np.setdiff1d(np.arange(VOCAB), np.concatenate([f["ids"].reshape(-1) for f in feeds]))
    np.testing.assert_allclose(out[True]["w"][untouched], w0[untouched] * 0.95 ** 3, rtol=1e-5)
    _compare(lambda: fluid.optimizer.SGD(learning_rate=0.1, regularization=fluid.regularizer.L1Decay(0.5)))


def test_sparse_update_rejects_a_gradient_of_the_wrong_height():
    def update(block, startup, p, g):
        small = block.create_var(name="small", dtype=p.dtype, shape=[VOCAB - 2, DIM], persistable=True)
        s = startup.create_var(name="small", dtype=p.dtype, shape=[VOCAB - 2, DIM], persistable=True)
        startup.append_op(type="fill_constant", outputs={"Out": [s]},
                          attrs={"shape": [VOCAB - 2, DIM], "dtype": int(p.dtype), "value": 0.0})
        _, lr = _accumulators(block, startup, p, [])
        block.append_op(type="sgd", inputs={"Param": small, "Grad": g, "LearningRate": lr},
                        outputs={"ParamOut": small})
    with pytest.raises(Exception, match="must have the shape of|does not match the dims"):
        main, startup, _ = _build(True, update=update)
        _run(main, startup, [_feed(np.random.RandomState(0))])


@pytest.mark.parametrize("clip", [lambda: fluid.clip.GradientClipByValue(0.3, -0.2),
                                  lambda: fluid.clip.GradientClipByGlobalNorm(0.5)], ids=["value", "global_norm"])
def test_clip_on_sparse_grad_equals_dense(clip):
    # Fluid: the sparse gradient's rows are merged first (clip of a sum, not a sum of clips); the result stays
    # SelectedRows, so sgd still touches only the rows seen.
    out, feeds, w0 = _compare(lambda: fluid.optimizer.SGD(learning_rate=0.5), clip=clip())
    main, _, _ = _build(True, opt=fluid.optimizer.SGD(learning_rate=0.5), clip=clip())
    sgd = [op for op in main.global_block().ops if op.type == "sgd"][0]
    assert main.global_block().var(sgd.input("Grad")[0]).type == SR
    assert not np.allclose(out[True]["w"], w0)



GLOG_SCRIPT = r"""
import re

import numpy as np
import fluidlite as fluid
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(ids, size=[10, 4], is_sparse=True, param_attr=fluid.ParamAttr(name="w"))
    fluid.optimizer.SGD(learning_rate=0.1).minimize(fluid.layers.mean(emb))
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
exe.run(main, feed={"ids": np.array([[1], [3], [1]], "int64")})
"""


def test_glog_and_profiler_show_selected_rows_by_value_dims():
    import os
    import subprocess
    import sys
    env = dict(os.environ, GLOG_v="4")
    p = subprocess.run([sys.executable, "-c", GLOG_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # Fluid's DebugStringEx prints a SelectedRows by its value's dims, without LoD
    assert re.search(r"Op\(sgd\), inputs:\{Grad\[w@GRAD:float\[3, 4\]\(\)\], LearningRate", p.stderr), p.stderr
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = L.data(name="ids", shape=[1], dtype="int64")
        emb = L.embedding(ids, size=[10, 4], is_sparse=True)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(L.mean(emb))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed={"ids": np.array([[1], [3]], "int64")})
    sgd = next(e for e in fluid.profiler.events() if e["name"] == "sgd")
    assert sgd["args"].startswith('"inputs":"Param[10, 4], LearningRate[1], Grad[2, 4]","outputs":"ParamOut[10, 4]",')


@pytest.mark.parametrize("fluid_mode", [False, True])
def test_sparse_lookup_inside_static_rnn_equals_dense(fluid_mode):
    # the step scopes' SelectedRows gradients are added into the table's (dense) outer gradient
    rng = np.random.RandomState(11)
    words = rng.randint(0, VOCAB, size=(4, 5, 1)).astype("int64")
    words[1, 0, 0] = words[0, 0, 0]
    w0 = rng.randn(VOCAB, DIM).astype("float32")
    got = {}
    old = core.get_recurrent_fluid_mode()
    core.set_recurrent_fluid_mode(fluid_mode)
    try:
        for sparse in (False, True):
            main, startup = fluid.Program(), fluid.Program()
            with fluid.program_guard(main, startup), fluid.unique_name.guard():
                x = L.data(name="words", shape=[4, -1, 1], dtype="int64", append_batch_size=False)
                h0 = L.data(name="h0", shape=[DIM], dtype="float32")
                rnn = L.StaticRNN()
                with rnn.step():
                    x_t = rnn.step_input(x)
                    e = L.embedding(x_t, size=[VOCAB, DIM], is_sparse=sparse, param_attr=fluid.ParamAttr(name="w"))
                    h_prev = rnn.memory(init=h0)
                    h = L.tanh(L.elementwise_add(h_prev, e))
                    rnn.update_memory(h_prev, h)
                    rnn.step_output(h)
                loss = L.reduce_sum(L.square(rnn()))
                fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            feed = {"words": words, "h0": np.zeros((5, DIM), "float32")}
            got[sparse] = np.array(_run(main, startup, [feed] * 2, w0).find_var("w").get_tensor())
    finally:
        core.set_recurrent_fluid_mode(old)
    assert not np.allclose(got[True], w0)
    np.testing.assert_allclose(got[True], got[False], rtol=1e-5, atol=1e-6)
