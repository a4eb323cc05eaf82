"""nce (kernels/nce.cc): forward against numpy with fixed negatives (custom_neg_classes) for the three
samplers' probabilities, gradients for Input, Weight and Bias against central differences, the samplers'
draws against their distributions, seeding (same seed: the same sequence of negatives in a fresh program;
steps differ), the layer (Fluid's cost / (num_neg_samples + 1)) and its errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, record_checked


def sampler_prob(kind, c, classes, custom=None):
    if kind == 0:
        return 1.0 / classes
    if kind == 1:
        return np.log((c + 2.0) / (c + 1.0)) / np.log(classes + 1.0)
    return custom[c]


def np_nce(x, label, w, b, neg, kind=0, sample_weight=None, custom=None):
    n, t = label.shape
    classes = w.shape[0]
    labels = np.concatenate([label, np.tile(np.array(neg, "int64"), (n, 1))], axis=1)
    logits = np.einsum("nd,nkd->nk", x, w[labels]) + (b[labels, 0] if b is not None else 0)
    o = 1.0 / (1.0 + np.exp(-logits))
    q = np.vectorize(lambda c: sampler_prob(kind, c, classes, custom))(labels) * len(neg)
    cost = np.where(np.arange(labels.shape[1]) < t, -np.log(o / (o + q)), -np.log(q / (o + q))).sum(1, keepdims=True)
    if sample_weight is not None:
        cost = cost * sample_weight
    return cost, o, labels


def _custom_inputs(probs):
    from fluidlite.layers.loss import _alias_tables
    alias, keep = _alias_tables(list(probs))
    return {"CustomDistProbs": probs.astype("float32"), "CustomDistAlias": alias, "CustomDistAliasProbs": keep}


def _case(rng, n=4, d=3, classes=7, t=1, dtype="float64"):
    x = rng.uniform(-1, 1, (n, d)).astype(dtype)
    w = rng.uniform(-1, 1, (classes, d)).astype(dtype)
    b = rng.uniform(-0.5, 0.5, (classes, 1)).astype(dtype)
    label = rng.randint(0, classes, (n, t)).astype("int64")
    return x, w, b, label


@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nce_forward_fixed_negatives(kind, dtype):
    rng = np.random.RandomState(kind + 1)
    x, w, b, label = _case(rng, t=2, dtype=dtype)
    neg = [0, 3, 5]
    inputs = {"Input": x, "Label": label, "Weight": w, "Bias": b}
    custom = None
    if kind == 2:
        custom = rng.dirichlet(np.ones(7))
        inputs.update(_custom_inputs(custom))
        custom = custom.astype("float32").astype("float64")
    cost, o, labels = np_nce(x.astype("float64"), label, w.astype("float64"), b.astype("float64"), neg, kind,
                             custom=custom)
    OpTest("nce", inputs, {"Cost": cost.astype(dtype), "SampleLogits": o.astype(dtype), "SampleLabels": labels},
           {"num_total_classes": 7, "num_neg_samples": 3, "sampler": kind, "custom_neg_classes": neg}).check_output(
        rtol=1e-5, atol=1e-6)


def test_nce_forward_sample_weight_no_bias():
    rng = np.random.RandomState(5)
    x, w, _, label = _case(rng)
    sw = rng.uniform(0.5, 2, (4, 1))
    neg = [1, 2]
    cost, o, labels = np_nce(x, label, w, None, neg, sample_weight=sw)
    OpTest("nce", {"Input": x, "Label": label, "Weight": w, "SampleWeight": sw},
           {"Cost": cost, "SampleLogits": o, "SampleLabels": labels},
           {"num_total_classes": 7, "num_neg_samples": 2, "custom_neg_classes": neg}).check_output()


@pytest.mark.parametrize("kind", [0, 1, 2])
def test_nce_grad(kind):
    rng = np.random.RandomState(10 + kind)
    x, w, b, label = _case(rng, n=3, d=3, classes=6, t=2)
    neg = [4, 1, 0]
    inputs = {"Input": x, "Label": label, "Weight": w, "Bias": b, "SampleWeight": rng.uniform(0.5, 2, (3, 1))}
    custom = None
    if kind == 2:
        custom = rng.dirichlet(np.ones(6))
        inputs.update(_custom_inputs(custom))
        custom = custom.astype("float32").astype("float64")
    cost, o, labels = np_nce(x, label, w, b, neg, kind, inputs["SampleWeight"], custom)
    OpTest("nce", inputs, {"Cost": cost, "SampleLogits": o, "SampleLabels": labels},
           {"num_total_classes": 6, "num_neg_samples": 3, "sampler": kind, "custom_neg_classes": neg}).check_grad(
        ["Input", "Weight", "Bias"], "Cost")


def _sampling_program(sampler, classes=20, num_neg=50, rows=400, seed=7, custom_dist=None, random_seed=None):
    main, startup = fluid.Program(), fluid.Program()
    if random_seed is not None:
        main.random_seed = random_seed
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        fluid.layers.nce(x, lbl, classes, num_neg_samples=num_neg, sampler=sampler, custom_dist=custom_dist,
                         seed=seed)
    op = [o for o in main.global_block().ops if o.type == "nce"][0]
    feed = {"x": np.ones((rows, 2), "float32"), "lbl": np.zeros((rows, 1), "int64")}
    return main, startup, feed, op.output("SampleLabels")[0]


@pytest.mark.parametrize("sampler", ["uniform", "log_uniform", "custom_dist"])
def test_nce_sampler_distributions(sampler):
    classes = 20
    custom = np.random.RandomState(3).dirichlet(np.ones(classes) * 0.5) if sampler == "custom_dist" else None
    main, startup, feed, labels = _sampling_program(sampler, classes=classes, custom_dist=custom)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed=feed, fetch_list=[labels])
    draws = got[:, 1:].ravel()  # 20,000 negatives
    assert draws.min() >= 0 and draws.max() < classes
    freq = np.bincount(draws, minlength=classes) / draws.size
    want = {"uniform": np.full(classes, 1.0 / classes),
            "log_uniform": np.log((np.arange(classes) + 2.0) / (np.arange(classes) + 1.0)) / np.log(classes + 1.0),
            "custom_dist": custom}[sampler]
    # 5 standard errors per class
    np.testing.assert_array_less(np.abs(freq - want), 5 * np.sqrt(want * (1 - want) / draws.size) + 1e-4)
    record_checked("statistical", "nce")


def test_nce_seeded_sampling_is_reproducible_and_steps_differ():
    runs = []
    for _ in range(2):
        main, startup, feed, labels = _sampling_program("uniform", rows=8, num_neg=5, seed=11)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        runs.append([exe.run(main, feed=feed, fetch_list=[labels])[0] for _ in range(3)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)  # a fresh program with the same seed: the same sequence
    assert not np.array_equal(runs[0][0], runs[0][1])  # each step draws new negatives
    # seed=0 takes the program's random_seed
    seeded = []
    for _ in range(2):
        main, startup, feed, labels = _sampling_program("log_uniform", rows=8, num_neg=5, seed=0, random_seed=90)
        assert [o for o in main.global_block().ops if o.type == "nce"][0].attr("seed") == 90
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        seeded.append(exe.run(main, feed=feed, fetch_list=[labels])[0])
    np.testing.assert_array_equal(seeded[0], seeded[1])


def test_nce_layer_matches_numpy():
    rng = np.random.RandomState(20)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        cost = fluid.layers.nce(x, lbl, 9, num_neg_samples=4, seed=5)
    nce_op = [o for o in main.global_block().ops if o.type == "nce"][0]
    w_name, b_name = nce_op.input("Weight")[0], nce_op.input("Bias")[0]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = rng.randn(5, 3).astype("float32")
    lv = rng.randint(0, 9, (5, 1)).astype("int64")
    got, labels = exe.run(main, feed={"x": xv, "lbl": lv}, fetch_list=[cost, nce_op.output("SampleLabels")[0]])
    w = fluid.global_scope().find_var(w_name).get_tensor()
    b = fluid.global_scope().find_var(b_name).get_tensor()
    w, b = np.array(w).astype("float64"), np.array(b).astype("float64")
    assert w.shape == (9, 3) and b.shape == (9, 1)
    np.testing.assert_array_equal(labels[:, :1], lv)
    # the drawn negatives differ per row; the reference scores each row with its own
    want = np.concatenate([np_nce(xv[i:i + 1].astype("float64"), lv[i:i + 1], w, b, list(labels[i, 1:]))[0]
                           for i in range(5)])
    np.testing.assert_allclose(got, want / 5.0, rtol=1e-5)


def test_nce_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        flbl = fluid.layers.data(name="flbl", shape=[1], dtype="float32")
        with pytest.raises(TypeError, match=r"nce: 'label' \(flbl\) must be int64, got float32"):
            fluid.layers.nce(x, flbl, 10)
        with pytest.raises(ValueError, match=r"nce: sampler must be 'uniform', 'log_uniform' or 'custom_dist', "
                                             r"got 'zipf'"):
            fluid.layers.nce(x, lbl, 10, sampler="zipf")
        with pytest.raises(ValueError, match=r"nce: sampler 'custom_dist' needs custom_dist with "
                                             r"num_total_classes=10 probabilities, got 3"):
            fluid.layers.nce(x, lbl, 10, sampler="custom_dist", custom_dist=[0.2, 0.3, 0.5])
        block = main.global_block()
        w = block.create_var(name="w", shape=[10, 4], dtype="float32")
        outs = {k: [block.create_var(name="o_" + k, dtype=dt)] for k, dt in
                (("Cost", "float32"), ("SampleLogits", "float32"), ("SampleLabels", "int64"))}
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"nce: Weight 'w' \[10, 4\] must be \[num_total_classes=10, D\] with D the width "
                                 r"of Input 'x' \[-1, 3\]"):
            block.append_op(type="nce", inputs={"Input": [x], "Label": [lbl], "Weight": [w]}, outputs=outs,
                            attrs={"num_total_classes": 10})
        w3 = block.create_var(name="w3", shape=[10, 3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"nce: custom_neg_classes has 2 classes but "
                                                           r"num_neg_samples is 10"):
            block.append_op(type="nce", inputs={"Input": [x], "Label": [lbl], "Weight": [w3]}, outputs=outs,
                            attrs={"num_total_classes": 10, "custom_neg_classes": [1, 2]})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"nce: sampler 2 \(custom_dist\) needs input "
                                                           r"CustomDistProbs"):
            block.append_op(type="nce", inputs={"Input": [x], "Label": [lbl], "Weight": [w3]}, outputs=outs,
                            attrs={"num_total_classes": 10, "sampler": 2})
        cost = fluid.layers.nce(x, lbl, 10)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"nce: Label 'lbl' holds 12 at row 1, out of range \[0, 10\)"):
        exe.run(main, feed={"x": np.ones((2, 3), "float32"), "lbl": np.array([[1], [12]], "int64")},
                fetch_list=[cost])
