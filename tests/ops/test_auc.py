"""auc: the op against a numpy model of its histograms (global and sliding window), streaming across runs
through layers.auc's persistable buffers, against fluid.metrics.Auc and a rank-based ROC AUC, and its errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked


class NpAuc:
    """The op's state and arithmetic in numpy: bucket = uint32(p * num_thresholds) in p's dtype."""

    def __init__(self, num_thresholds, slide_steps):
        self.nt, self.slide = num_thresholds, slide_steps
        b = num_thresholds + 1
        size = (1 + slide_steps) * b + (1 if slide_steps else 0)
        self.pos = np.zeros(size, np.int64)
        self.neg = np.zeros(size, np.int64)

    def update(self, predict, label):
        b = self.nt + 1
        p = predict[:, -1]
        bins = (p * p.dtype.type(self.nt)).astype(np.uint32)
        label = label.reshape(-1)
        hp = np.bincount(bins[label > 0], minlength=b).astype(np.int64)
        hn = np.bincount(bins[label == 0], minlength=b).astype(np.int64)
        if self.slide == 0:
            self.pos += hp
            self.neg += hn
            return self.auc(self.pos, self.neg)
        cur = int(self.pos[(self.slide + 1) * b]) % self.slide
        ring = slice(cur * b, (cur + 1) * b)
        total = slice(self.slide * b, (self.slide + 1) * b)
        for st, h in ((self.pos, hp), (self.neg, hn)):
            st[total] -= st[ring]
            st[ring] = h
            st[total] += h
        a = self.auc(self.pos[total], self.neg[total])
        self.pos[-1] += 1
        self.neg[-1] += 1
        return a

    @staticmethod
    def auc(pos, neg):
        tp = np.cumsum(pos[::-1].astype(np.float64))
        fp = np.cumsum(neg[::-1].astype(np.float64))
        tp_prev = np.concatenate([[0.0], tp[:-1]])
        fp_prev = np.concatenate([[0.0], fp[:-1]])
        area = np.sum(np.abs(fp - fp_prev) * (tp + tp_prev) / 2.0)
        return area / tp[-1] / fp[-1] if tp[-1] > 0 and fp[-1] > 0 else 0.0


def _batch(rng, n, dtype="float32", width=2, label_dtype="int64"):
    p1 = rng.uniform(0, 1, n).astype(dtype)
    predict = np.stack([1 - p1, p1], axis=1) if width == 2 else p1.reshape(n, 1)
    label = (rng.uniform(0, 1, n) < p1).astype(label_dtype).reshape(n, 1)  # informative: AUC well above 0.5
    return predict.astype(dtype), label


@pytest.mark.parametrize("slide_steps", [0, 1, 3])
@pytest.mark.parametrize("dtype,width,label_dtype", [("float32", 2, "int64"), ("float64", 1, "int32")])
def test_op_from_given_state(slide_steps, dtype, width, label_dtype):
    rng = np.random.RandomState(3 + slide_steps)
    nt = 63
    ref = NpAuc(nt, slide_steps)
    for _ in range(4):  # a state with history in it (for slide_steps 3, one ring entry is still empty)
        ref.update(*_batch(rng, 20, dtype, width, label_dtype))
    pos_in, neg_in = ref.pos.copy(), ref.neg.copy()
    predict, label = _batch(rng, 30, dtype, width, label_dtype)
    want = ref.update(predict, label)
    OpTest("auc", {"Predict": predict, "Label": label, "StatPos": pos_in, "StatNeg": neg_in},
           {"AUC": np.array([want]), "StatPosOut": ref.pos, "StatNegOut": ref.neg},
           {"num_thresholds": nt, "slide_steps": slide_steps}).check_output(atol=0, rtol=1e-12)


def test_bucket_edges_and_skipped_labels():
    # p = 1 goes to the last bucket; float32 p * 4 truncates; label -1 is skipped; label 3 counts as positive.
    predict = np.array([[0, 1.0], [1, 0.0], [0.5, 0.5], [0.75, 0.25], [0.1, 0.9], [0.3, 0.7]], np.float32)
    label = np.array([[1], [0], [3], [0], [-1], [0]], np.int64)
    pos, neg = np.zeros(5, np.int64), np.zeros(5, np.int64)
    want_pos = np.array([0, 0, 1, 0, 1], np.int64)   # p=0.5 -> 2, p=1 -> 4
    want_neg = np.array([1, 1, 1, 0, 0], np.int64)   # p=0 -> 0, p=0.25 -> 1, p=0.7 -> 2
    # from the top: tp 1,1,2,2,2 and fp 0,0,1,2,3 -> area 0 + 0 + 1.5 + 2 + 2 = 5.5 over 2 * 3
    OpTest("auc", {"Predict": predict, "Label": label, "StatPos": pos, "StatNeg": neg},
           {"AUC": np.array([5.5 / 6]), "StatPosOut": want_pos, "StatNegOut": want_neg},
           {"num_thresholds": 4, "slide_steps": 0}).check_output(atol=0, rtol=1e-15)


def _auc_program(num_thresholds=255, slide_steps=1, curve="ROC"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="p", shape=[2], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        outs = fluid.layers.auc(x, y, curve=curve, num_thresholds=num_thresholds, slide_steps=slide_steps)
    return main, startup, outs


@pytest.mark.parametrize("slide_steps", [1, 2, 5])
def test_layer_streams_across_runs(slide_steps):
    nt = 255
    main, startup, (auc_out, batch_auc, states) = _auc_program(nt, slide_steps)
    assert [s.persistable for s in states] == [True] * 4
    assert [tuple(s.shape) for s in states] == [((1 + slide_steps) * (nt + 1) + 1,)] * 2 + [(1, nt + 1)] * 2
    assert auc_out.dtype == batch_auc.dtype == fluid.core.VarDesc.VarType.FP64
    assert [op.type for op in main.global_block().ops].count("auc") == 2
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(5)
    glob, win = NpAuc(nt, 0), NpAuc(nt, slide_steps)
    all_p, all_y = [], []
    for _ in range(7):
        p, y = _batch(rng, int(rng.randint(5, 40)))
        a, b, bp, bn, sp, sn = exe.run(main, feed={"p": p, "y": y}, fetch_list=[auc_out, batch_auc] + states,
                                       scope=scope)
        want_a, want_b = glob.update(p, y), win.update(p, y)
        assert a.dtype == b.dtype == np.float64 and a.shape == b.shape == (1,)
        np.testing.assert_allclose(a, [want_a], rtol=1e-12)
        np.testing.assert_allclose(b, [want_b], rtol=1e-12)
        np.testing.assert_array_equal(sp.reshape(-1), glob.pos)
        np.testing.assert_array_equal(sn.reshape(-1), glob.neg)
        np.testing.assert_array_equal(bp, win.pos)
        np.testing.assert_array_equal(bn, win.neg)
        all_p.append(p)
        all_y.append(y)
    # The global AUC is the fluid.metrics.Auc of every batch, and close to the exact rank AUC.
    m = fluid.metrics.Auc("auc", num_thresholds=nt)
    for p, y in zip(all_p, all_y):
        m.update(p, y)
    np.testing.assert_allclose(a, [m.eval()], rtol=1e-12)
    p1, yy = np.concatenate(all_p)[:, 1].astype(np.float64), np.concatenate(all_y).reshape(-1)
    ranks = p1.argsort().argsort() + 1.0
    npos = yy.sum()
    exact = (ranks[yy == 1].sum() - npos * (npos + 1) / 2) / (npos * (len(yy) - npos))
    assert abs(a[0] - exact) < 0.02 and a[0] > 0.6
    record_checked("output", "auc")


def test_slide_steps_1_is_the_batch_auc_and_restarting_resets():
    main, startup, (auc_out, batch_auc, _) = _auc_program(127, 1)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(9)
    p1, y1 = _batch(rng, 50)
    p2, y2 = _batch(rng, 50)
    a1, b1 = exe.run(main, feed={"p": p1, "y": y1}, fetch_list=[auc_out, batch_auc], scope=scope)
    a2, b2 = exe.run(main, feed={"p": p2, "y": y2}, fetch_list=[auc_out, batch_auc], scope=scope)
    fresh = NpAuc(127, 0)
    assert a1[0] == b1[0] == fresh.update(p1, y1)
    assert b2[0] == NpAuc(127, 0).update(p2, y2)  # only the current batch
    assert a2[0] == fresh.update(p2, y2) != b2[0]  # both batches
    exe.run(startup, scope=scope)  # zeroes the buffers
    a3, _ = exe.run(main, feed={"p": p2, "y": y2}, fetch_list=[auc_out, batch_auc], scope=scope)
    assert a3[0] == b2[0]


def test_one_class_only_gives_zero():
    predict = np.array([[0.2, 0.8], [0.6, 0.4]], np.float32)
    label = np.ones((2, 1), np.int64)
    OpTest("auc", {"Predict": predict, "Label": label, "StatPos": np.zeros(5, np.int64),
                   "StatNeg": np.zeros(5, np.int64)},
           {"AUC": np.array([0.0]), "StatPosOut": np.array([0, 1, 0, 1, 0], np.int64),  # 0.4 * 4, 0.8 * 4
            "StatNegOut": np.zeros(5, np.int64)}, {"num_thresholds": 4, "slide_steps": 0}).check_output(atol=0)


def _run_op(predict, label, pos, neg, **attrs):
    t = OpTest("auc", {"Predict": predict, "Label": label, "StatPos": pos, "StatNeg": neg},
               {"AUC": None, "StatPosOut": None, "StatNegOut": None}, attrs)
    main, startup, feed, _, out_vars, _ = t._build()
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[v for v, _, _ in out_vars.values()])


def test_run_time_errors():
    label = np.array([[1], [0]], np.int64)
    z = np.zeros(5, np.int64)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"auc: Predict 'in_Predict_predict_var' row 1 has "
                                                       r"positive-class probability 1\.5, outside \[0, 1\]"):
        _run_op(np.array([[0.5, 0.5], [-0.5, 1.5]], np.float32), label, z, z, num_thresholds=4, slide_steps=0)
    with pytest.raises(fluid.core.EnforceNotMet, match="row 0 has positive-class probability nan"):
        _run_op(np.array([[0.5, np.nan], [0.5, 0.5]], np.float32), label, z, z, num_thresholds=4, slide_steps=0)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"auc: StatPos 'in_StatPos_statpos_var' \[5\] must have 11 "
                                                       r"elements for num_thresholds 4 and slide_steps 1 "
                                                       r"\(\(1 \+ slide_steps\) \* \(num_thresholds \+ 1\) \+ 1 "
                                                       r"for the batch count\)"):
        _run_op(np.full((2, 2), 0.5, np.float32), label, z, z, num_thresholds=4, slide_steps=1)
    bad = np.zeros(11, np.int64)
    bad[-1] = -3
    with pytest.raises(fluid.core.EnforceNotMet, match="auc: StatPos 'in_StatPos_statpos_var' holds a negative "
                                                       "batch count -3"):
        _run_op(np.full((2, 2), 0.5, np.float32), label, bad, np.zeros(11, np.int64), num_thresholds=4,
                slide_steps=1)


def test_build_time_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        p = fluid.layers.data(name="p", shape=[2], dtype="float32")
        p3 = fluid.layers.data(name="p3", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        yf = fluid.layers.data(name="yf", shape=[1], dtype="float32")
        pi = fluid.layers.data(name="pi", shape=[2], dtype="int64")
        with pytest.raises(TypeError, match=r"auc: 'label' \(yf\) must be int32 or int64, got float32"):
            fluid.layers.auc(p, yf)
        with pytest.raises(TypeError, match=r"auc: 'input' \(pi\) must be float32 or float64, got int64"):
            fluid.layers.auc(pi, y)
        with pytest.raises(ValueError, match=r"auc: input p3 must be \[N, 2\] \(or \[N, 1\]\) probabilities, got "
                                             r"shape \[-1, 3\]"):
            fluid.layers.auc(p3, y)
        with pytest.raises(ValueError, match="auc: curve must be 'ROC' or 'PR', got 'AP'"):
            fluid.layers.auc(p, y, curve="AP")
        block = fluid.default_main_program().global_block()
        s = block.create_var(name="s", shape=[5], dtype="int64")
        out = block.create_var(name="o", dtype="float64")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"auc: Predict 'p3' \[-1, 3\] must be \[N, 2\]"):
            block.append_op(type="auc", inputs={"Predict": [p3], "Label": [y], "StatPos": [s], "StatNeg": [s]},
                            outputs={"AUC": [out], "StatPosOut": [s], "StatNegOut": [s]},
                            attrs={"num_thresholds": 4, "slide_steps": 0})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"auc: StatPos 's' \[5\] must have 10 elements"):
            block.append_op(type="auc", inputs={"Predict": [p], "Label": [y], "StatPos": [s], "StatNeg": [s]},
                            outputs={"AUC": [out], "StatPosOut": [s], "StatNegOut": [s]},
                            attrs={"num_thresholds": 9, "slide_steps": 0})


def test_pr_curve_is_accepted_and_computes_roc():
    rng = np.random.RandomState(2)
    p, y = _batch(rng, 40)
    got = []
    for curve in ("ROC", "PR"):
        main, startup, (auc_out, _, _) = _auc_program(63, 1, curve)
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        got.append(exe.run(main, feed={"p": p, "y": y}, fetch_list=[auc_out], scope=scope)[0][0])
    assert got[0] == got[1] == NpAuc(63, 0).update(p, y)


def test_auc_in_a_training_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        prob = fluid.layers.fc(x, size=2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        auc_out, batch_auc, states = fluid.layers.auc(prob, y, num_thresholds=127)
        fluid.optimizer.SGD(0.5).minimize(loss)
    assert not any(op.type == "auc_grad" for op in main.global_block().ops)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(0)
    w = rng.randn(4)
    ref = NpAuc(127, 0)
    for _ in range(10):
        xv = rng.randn(32, 4).astype("float32")
        yv = (xv @ w > 0).astype("int64").reshape(-1, 1)
        p, a, b = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[prob, auc_out, batch_auc], scope=scope)
        assert a[0] == ref.update(p, yv)
        assert b[0] == NpAuc(127, 0).update(p, yv)
    assert b[0] > 0.9  # the classifier learned the separable labels
