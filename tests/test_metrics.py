"""fluid.metrics and fluid.average: Fluid 1.x's Python accumulators, against numpy over several batches, with
their reset/get_config state rules and input errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import metrics

rng = np.random.RandomState(4)


def test_metric_base_states_reset_and_config():
    class Counts(metrics.MetricBase):
        def __init__(self, name=None):
            super().__init__(name)
            self.n = 0
            self.total = 0.0
            self.hist = np.zeros(3)
            self.last = "x"
            self._private = 7

        def update(self, preds, labels):
            self.n += 1
            self.total += float(preds.sum())
            self.hist += preds[:3]

    m = Counts()
    assert str(m) == "Counts" and str(Counts("mine")) == "mine"
    m.update(np.array([1.0, 2.0, 3.0]), None)
    cfg = m.get_config()
    assert cfg["name"] == "Counts" and sorted(cfg["states"]) == ["hist", "last", "n", "total"]
    assert cfg["states"]["n"] == 1 and cfg["states"]["total"] == 6.0
    m.update(np.array([1.0, 1.0, 1.0]), None)
    np.testing.assert_array_equal(cfg["states"]["hist"], [1, 2, 3])  # a deep copy, not the live array
    m.reset()
    assert (m.n, m.total, m.last, m._private) == (0, 0.0, None, 7)
    assert isinstance(m.n, int) and isinstance(m.total, float)
    np.testing.assert_array_equal(m.hist, np.zeros(3))
    with pytest.raises(NotImplementedError, match="Should not use it directly, please extend it."):
        metrics.MetricBase("b").eval()
    with pytest.raises(NotImplementedError):
        metrics.MetricBase("b").update(None, None)


def _binary_batches(n=5):
    out = []
    for _ in range(n):
        k = int(rng.randint(4, 20))
        preds = rng.uniform(0, 1, (k, 1)).astype("float32")
        labels = rng.randint(0, 2, (k, 1)).astype("int64")
        out.append((preds, labels))
    return out


def test_precision_and_recall_over_batches():
    batches = _binary_batches()
    p, r = metrics.Precision(), metrics.Recall()
    for preds, labels in batches:
        p.update(preds, labels)
        r.update(preds, labels)
    pr = np.rint(np.concatenate([b[0] for b in batches])).astype(int).reshape(-1)
    lb = np.concatenate([b[1] for b in batches]).reshape(-1)
    tp = int(((pr == 1) & (lb == 1)).sum())
    fp = int(((pr == 1) & (lb == 0)).sum())
    fn = int(((pr == 0) & (lb == 1)).sum())
    assert (p.tp, p.fp, r.tp, r.fn) == (tp, fp, tp, fn)
    assert p.eval() == tp / (tp + fp) and r.eval() == tp / (tp + fn)
    p.reset()
    r.reset()
    assert p.eval() == 0.0 and r.eval() == 0.0 and (p.tp, p.fp, r.tp, r.fn) == (0, 0, 0, 0)


def test_precision_recall_input_errors():
    with pytest.raises(ValueError, match="The 'preds' must be a numpy ndarray."):
        metrics.Precision().update([1, 0], np.array([1, 0]))
    with pytest.raises(ValueError, match="The 'labels' must be a numpy ndarray."):
        metrics.Recall().update(np.array([1, 0]), [1, 0])


def test_accuracy_with_the_accuracy_layer():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        acc = fluid.layers.accuracy(x, y)
    exe = fluid.Executor(fluid.CPUPlace())
    m = metrics.Accuracy()
    hits = total = 0
    for n in (7, 13, 5):
        xv = rng.rand(n, 4).astype("float32")
        yv = rng.randint(0, 4, (n, 1)).astype("int64")
        a, = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[acc])
        m.update(value=a, weight=n)
        hits += int((xv.argmax(1) == yv[:, 0]).sum())
        total += n
    np.testing.assert_allclose(m.eval(), [hits / total], rtol=1e-6)
    assert m.weight == total
    m.reset()
    assert (m.value, m.weight) == (0.0, 0.0)
    with pytest.raises(ValueError, match="There is no data in Accuracy Metrics. Please check layers.accuracy "
                                         "output has added to Accuracy."):
        m.eval()
    with pytest.raises(ValueError, match=r"The 'value' must be a number\(int, float\) or a numpy ndarray."):
        m.update("0.5", 2)
    with pytest.raises(ValueError, match=r"The 'weight' must be a number\(int, float\)."):
        m.update(0.5, np.array([1, 2]))
    with pytest.raises(ValueError, match="The 'weight' can not be negative"):
        m.update(0.5, -1)


def test_chunk_evaluator():
    m = metrics.ChunkEvaluator()
    assert m.eval() == (0, 0, 0)
    counts = [(np.array([5]), np.array([6]), np.array([4])), (3, 2, 2), (np.array([0]), np.array([1]), 0)]
    for c in counts:
        m.update(*c)
    infer, label, correct = 8, 9, 6
    precision, recall, f1 = m.eval()
    assert precision == correct / infer and recall == correct / label
    assert f1 == pytest.approx(2 * precision * recall / (precision + recall), rel=1e-15)
    with pytest.raises(ValueError, match=r"The 'num_infer_chunks' must be a number\(int\) or a numpy ndarray."):
        m.update("1", 1, 1)
    with pytest.raises(ValueError, match="The 'num_correct_chunks' must be"):
        m.update(1, 1, [1])
    m.reset()
    assert (m.num_infer_chunks, m.num_label_chunks, m.num_correct_chunks) == (0, 0, 0)


def test_edit_distance():
    m = metrics.EditDistance("ed")
    with pytest.raises(ValueError, match="There is no data in EditDistance Metric"):
        m.eval()
    d1 = np.array([[0.0], [2.0], [1.0]], "float32")
    d2 = np.array([[0.0], [0.0]], "float32")
    m.update(d1, 3)
    m.update(d2, np.array([2], "int64"))
    avg, inst = m.eval()
    assert avg == pytest.approx(3.0 / 5) and inst == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="The 'distances' must be a numpy ndarray."):
        m.update([0.0], 1)
    with pytest.raises(ValueError, match=r"The 'seq_num' must be a number\(int, float\)."):
        m.update(d1, "3")


def test_auc_against_rank_auc():
    m = metrics.Auc("auc", num_thresholds=4095)
    ps, ys = [], []
    for _ in range(4):
        p1 = rng.uniform(0, 1, 50)
        y = (rng.uniform(0, 1, 50) < p1).astype("int64")
        preds = np.stack([1 - p1, p1], 1)
        m.update(preds, y.reshape(-1, 1))
        ps.append(p1)
        ys.append(y)
    p1, y = np.concatenate(ps), np.concatenate(ys)
    ranks = p1.argsort().argsort() + 1.0
    npos = y.sum()
    exact = (ranks[y == 1].sum() - npos * (npos + 1) / 2) / (npos * (len(y) - npos))
    assert abs(m.eval() - exact) < 2e-3
    # The histograms are "_"-prefixed, so reset() keeps them, as in Fluid.
    m.reset()
    assert abs(m.eval() - exact) < 2e-3
    assert metrics.Auc("a").eval() == 0.0


def test_auc_errors():
    m = metrics.Auc("auc", num_thresholds=10)
    with pytest.raises(ValueError, match="The 'labels' must be a numpy ndarray."):
        m.update(np.zeros((1, 2)), [1])
    with pytest.raises(ValueError, match="The 'predictions' must be a numpy ndarray."):
        m.update([[0.5, 0.5]], np.array([1]))
    with pytest.raises(ValueError, match=r"Auc.update: preds\[1, 1\] = 1.5 is not a probability in \[0, 1\]"):
        m.update(np.array([[0.5, 0.5], [0.0, 1.5]]), np.array([1, 0]))
    with pytest.raises(ValueError, match=r"preds\[0, 1\] = nan is not a probability"):
        m.update(np.array([[0.5, np.nan]]), np.array([1]))
    assert sum(m._stat_pos) + sum(m._stat_neg) == 1  # the row before the bad one was counted


def test_composite_metric():
    comp = metrics.CompositeMetric()
    p, r = metrics.Precision(), metrics.Recall()
    comp.add_metric(p)
    comp.add_metric(r)
    with pytest.raises(ValueError, match="SubMetric should be inherit from MetricBase."):
        comp.add_metric(object())
    preds = np.array([[0.9], [0.2], [0.8], [0.4]])
    labels = np.array([[1], [1], [0], [0]])
    comp.update(preds, labels)
    assert comp.eval() == [0.5, 0.5]
    assert str(comp) == "CompositeMetric"


def test_detection_map_is_out_of_scope():
    with pytest.raises(AttributeError, match="DetectionMAP"):
        _ = fluid.metrics.DetectionMAP


def test_weighted_average():
    with pytest.warns(Warning, match="The WeightedAverage is deprecated, please use fluid.metrics.Accuracy "
                                     "instead."):
        avg = fluid.average.WeightedAverage()
    with pytest.raises(ValueError, match="There is no data to be averaged in WeightedAverage."):
        avg.eval()
    avg.add(value=2.0, weight=1)
    avg.add(value=4.0, weight=2)
    assert avg.eval() == pytest.approx(10.0 / 3)
    avg.reset()
    avg.add(np.array([1.0, 3.0]), 2)
    avg.add(np.array([3.0, 3.0]), np.array([2]))
    np.testing.assert_allclose(avg.eval(), [2.0, 3.0])
    with pytest.raises(ValueError, match=r"The 'value' must be a number\(int, float\) or a numpy ndarray."):
        avg.add("1", 1)
    with pytest.raises(ValueError, match=r"The 'weight' must be a number\(int, float\)."):
        avg.add(1.0, None)
