"""linear_chain_crf (kernels/linear_chain_crf.cc, layers.linear_chain_crf): the negative log-likelihood of each
sequence against a brute-force enumeration of every tag path (tiny cases) and a log-space forward algorithm
(larger ones), written per sequence; Fluid's scaled Alpha, EmissionExps and TransitionExps; the LoD and the padded
(Length) forms, empty and one-element sequences, a single sequence, two LoD levels, large emissions; gradients for
Emission and Transition against central differences; the layer (a trained CRF's loss falls); the errors."""
import itertools

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare


def logsumexp(a, axis=None):
    m = np.max(a, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))
    return np.squeeze(out, axis=axis) if axis is not None else out.item()


def path_score(x, w, path):
    """The CRF score of one tag path of one sequence x [L, D]: start + end + emissions + transitions."""
    s = w[0, path[0]] + w[1, path[-1]] + sum(x[k, t] for k, t in enumerate(path))
    return s + sum(w[2 + path[k - 1], path[k]] for k in range(1, len(path)))


def brute_force_nll(x, w, label):
    """log Z - score(label), Z summed over all D^L paths."""
    paths = itertools.product(range(x.shape[1]), repeat=x.shape[0])
    return logsumexp(np.array([path_score(x, w, p) for p in paths])) - path_score(x, w, label)


def log_alpha(x, w):
    """The forward algorithm in log space: row k is log of the summed exp(score) of the paths ending at k in each
    tag (start weights and emissions included, end weights not)."""
    rows = [w[0] + x[0]]
    for k in range(1, x.shape[0]):
        rows.append(logsumexp(rows[-1][:, None] + w[2:], axis=0) + x[k])
    return np.array(rows)


def forward_nll(x, w, label):
    return logsumexp(log_alpha(x, w)[-1] + w[1]) - path_score(x, w, label)


def softmax_rows(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def reference(x, w, label, lens, nll=forward_nll):
    """Per sequence of a LoD batch: (LogLikelihood [S, 1], Alpha, EmissionExps, TransitionExps) as Fluid computes
    them (Alpha's rows the forward vectors scaled to sum 1)."""
    ll, alpha = [], np.zeros_like(x)
    start = 0
    for n in lens:
        xs, ls = x[start:start + n], label[start:start + n, 0]
        ll.append(nll(xs, w, ls) if n else 0.0)
        if n:
            alpha[start:start + n] = softmax_rows(log_alpha(xs, w))
        start += n
    return np.array(ll).reshape(-1, 1), alpha, np.exp(x - x.max(1, keepdims=True)), np.exp(w)


def rand_case(rng, lens, tags, scale=1.0, dtype="float64"):
    t = sum(lens)
    x = (rng.uniform(-1, 1, (t, tags)) * scale).astype(dtype)
    w = rng.uniform(-1, 1, (tags + 2, tags)).astype(dtype)
    label = rng.randint(0, tags, (t, 1)).astype("int64")
    return x, w, label


def lod_test(x, w, label, lod, outputs):
    ll, alpha, xe, we = outputs
    return OpTest("linear_chain_crf", {"Emission": (x, lod), "Transition": w, "Label": (label, lod)},
                  {"LogLikelihood": ll, "Alpha": alpha, "EmissionExps": xe, "TransitionExps": we})


@pytest.mark.parametrize("tags", [1, 2, 3])
@pytest.mark.parametrize("lens", [[1, 3, 2], [4], [1], [2, 1, 1, 3]])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_brute_force(tags, lens, dtype):
    x, w, label = rand_case(np.random.RandomState(tags * 10 + len(lens)), lens, tags, scale=2.0, dtype=dtype)
    out = reference(x.astype("float64"), w.astype("float64"), label, lens, nll=brute_force_nll)
    tol = 1e-5 if dtype == "float32" else 1e-11
    lod_test(x, w, label, [lens], [o.astype(dtype) for o in out]).check_output(atol=tol, rtol=tol)


def test_brute_force_agrees_with_the_forward_algorithm():
    # the two references of this file, against each other first
    rng = np.random.RandomState(0)
    x, w, label = rand_case(rng, [5], 3, scale=3.0)
    assert np.isclose(brute_force_nll(x, w, label[:, 0]), forward_nll(x, w, label[:, 0]), rtol=1e-12)


@pytest.mark.parametrize("lens,tags", [([1, 9, 20, 3], 7), ([37], 12), ([5] * 16, 59), ([2, 0, 3, 0], 4)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_algorithm(lens, tags, dtype):
    x, w, label = rand_case(np.random.RandomState(tags), lens, tags, scale=3.0, dtype=dtype)
    out = reference(x.astype("float64"), w.astype("float64"), label, lens)
    tol = 2e-5 if dtype == "float32" else 1e-11
    lod_test(x, w, label, [lens], [o.astype(dtype) for o in out]).check_output(atol=tol, rtol=tol)


def test_empty_sequences_cost_zero():
    x, w, label = rand_case(np.random.RandomState(2), [3, 2], 3)
    out = reference(x, w, label, [0, 3, 0, 2, 0])
    assert out[0][[0, 2, 4], 0].tolist() == [0.0, 0.0, 0.0] and (out[0][[1, 3], 0] > 0).all()
    lod_test(x, w, label, [[0, 3, 0, 2, 0]], out).check_output(atol=1e-11, rtol=1e-11)


def test_two_lod_levels_one_cost_per_last_level_sequence():
    # 2 outer sequences of 2 and 1 inner ones: the inner ones are the CRF chains; the cost keeps the outer level
    lod = [[2, 1], [2, 3, 1]]
    x, w, label = rand_case(np.random.RandomState(3), lod[1], 4)
    ll, alpha, xe, we = reference(x, w, label, lod[1])
    lod_test(x, w, label, lod, ((ll, [[2, 1]]), alpha, xe, we)).check_output(atol=1e-11, rtol=1e-11)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_emissions_stay_finite_and_exact(dtype):
    # emissions of +-3e4 (and a row offset of 1e4): exp(x) alone would overflow both dtypes
    rng = np.random.RandomState(4)
    lens = [6, 1, 4]
    x, w, label = rand_case(rng, lens, 5, scale=3e4, dtype=dtype)
    x[2] += 1e4
    ll, _, xe, _ = reference(x.astype("float64"), w.astype("float64"), label, lens)
    assert np.isfinite(ll).all() and ll.max() > 1e4
    # float32 sums the row maxima (~3e4 each) to 6e-8 relative: the cost to that of its magnitude
    tol = 1e-6 * np.abs(x).max() if dtype == "float32" else 1e-9
    t = lod_test(x, w, label, [lens], reference(x.astype("float64"), w.astype("float64"), label, lens))
    t.outputs.update(LogLikelihood=ll.astype(dtype), EmissionExps=xe.astype(dtype), Alpha=None)
    t.check_output(atol=tol, rtol=1e-6)


def test_a_certain_label_costs_nothing():
    # one tag dominates every position by a margin of 1e3: its path has probability 1, the cost is ~0 (not a
    # difference of two huge numbers gone wrong); any other label costs about the margin
    lens = [4, 3]
    x = np.zeros((7, 3))
    x[np.arange(7), [0, 2, 2, 1, 0, 0, 1]] = 1e3
    w = np.zeros((5, 3))
    best = np.array([[0], [2], [2], [1], [0], [0], [1]], "int64")
    other = best.copy()
    other[1, 0] = 0
    for label, want in ((best, [0.0, 0.0]), (other, [1e3, 0.0])):
        ll = reference(x, w, label, lens)[0]
        np.testing.assert_allclose(ll[:, 0], want, atol=1e-9)
        t = lod_test(x, w, label, [lens], reference(x, w, label, lens))
        t.outputs.update(Alpha=None)
        t.check_output(atol=1e-9, rtol=1e-12)


# ------------------------------------------------------------------ the padded form (Length)

def padded(x, label, lens, max_len, label_rank=3):
    """The LoD batch (x [T, D], label [T, 1]) as [N, max_len, D] and [N, max_len, 1] (or [N, max_len]), padding
    with garbage that must not be read."""
    n, d = len(lens), x.shape[1]
    xp = np.full((n, max_len, d), 7.0, x.dtype)
    lp = np.full((n, max_len, 1), 99, "int64")
    start = 0
    for i, m in enumerate(lens):
        xp[i, :m], lp[i, :m] = x[start:start + m], label[start:start + m]
        start += m
    return xp, (lp if label_rank == 3 else lp[:, :, 0])


def unpad_rows(a, lens, max_len):
    """Rows of a LoD batch [T, ...] placed into the padded layout [N, max_len, ...] (zeros elsewhere)."""
    out = np.zeros((len(lens), max_len) + a.shape[1:], a.dtype)
    start = 0
    for i, m in enumerate(lens):
        out[i, :m] = a[start:start + m]
        start += m
    return out


@pytest.mark.parametrize("lens", [[3, 1, 4], [4], [0, 2, 4, 0]])
@pytest.mark.parametrize("label_rank,length_shape", [(3, (-1, 1)), (2, (-1,))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_padded_form(lens, label_rank, length_shape, dtype):
    max_len, tags = 4, 3
    x, w, label = rand_case(np.random.RandomState(sum(lens)), lens, tags, scale=2.0)
    ll, alpha, xe, we = reference(x, w, label, lens)
    xp, lp = padded(x, label, lens, max_len, label_rank)
    tol = 1e-5 if dtype == "float32" else 1e-11
    OpTest("linear_chain_crf", {"Emission": xp.astype(dtype), "Transition": w.astype(dtype), "Label": lp,
                                "Length": np.array(lens, "int64").reshape(length_shape)},
           {"LogLikelihood": ll.astype(dtype), "Alpha": unpad_rows(alpha, lens, max_len).astype(dtype),
            "EmissionExps": unpad_rows(xe, lens, max_len).astype(dtype), "TransitionExps": we.astype(dtype)}
           ).check_output(atol=tol, rtol=tol)


def test_a_batch_of_no_sequences():
    OpTest("linear_chain_crf", {"Emission": np.zeros((0, 3, 4)), "Transition": np.zeros((6, 4)),
                                "Label": np.zeros((0, 3), "int64"), "Length": np.zeros((0,), "int64")},
           {"LogLikelihood": np.zeros((0, 1)), "Alpha": np.zeros((0, 3, 4)), "EmissionExps": np.zeros((0, 3, 4)),
            "TransitionExps": np.ones((6, 4))}).check_output()


# ------------------------------------------------------------------ gradients

@pytest.mark.parametrize("lens", [[1, 3, 2], [4], [1], [2, 0, 3]])
def test_grad_lod(lens):
    x, w, label = rand_case(np.random.RandomState(len(lens) + 7), lens, 3, scale=2.0)
    lod_test(x, w, label, [lens], reference(x, w, label, lens)).check_grad(["Emission", "Transition"],
                                                                          "LogLikelihood")


def test_grad_two_lod_levels():
    lod = [[1, 2], [2, 1, 3]]
    x, w, label = rand_case(np.random.RandomState(8), lod[1], 3)
    ll, alpha, xe, we = reference(x, w, label, lod[1])
    lod_test(x, w, label, lod, ((ll, [[1, 2]]), alpha, xe, we)).check_grad(["Emission", "Transition"],
                                                                          "LogLikelihood")


def test_grad_transition_only_and_large_emissions():
    # Emission without a gradient (a data layer): Transition@GRAD still needs the emission marginals
    lens = [3, 2]
    x, w, label = rand_case(np.random.RandomState(9), lens, 4, scale=40.0)
    lod_test(x, w, label, [lens], reference(x, w, label, lens)).check_grad(["Transition"], "LogLikelihood")
    lod_test(x, w, label, [lens], reference(x, w, label, lens)).check_grad(["Emission"], "LogLikelihood")


def test_grad_padded():
    lens, max_len = [2, 0, 3], 3
    x, w, label = rand_case(np.random.RandomState(10), lens, 3, scale=2.0)
    ll, alpha, xe, we = reference(x, w, label, lens)
    xp, lp = padded(x, label, lens, max_len)
    t = OpTest("linear_chain_crf", {"Emission": xp, "Transition": w, "Label": lp,
                                    "Length": np.array([[m] for m in lens], "int64")},
               {"LogLikelihood": ll, "Alpha": None, "EmissionExps": None, "TransitionExps": None})
    t.check_grad(["Emission", "Transition"], "LogLikelihood")


def test_grad_is_marginals_minus_label_counts():
    # Emission@GRAD of a one-sequence batch, by the closed form: per position, P(tag) - [tag == label]
    lens = [5]
    x, w, label = rand_case(np.random.RandomState(11), lens, 3, scale=2.0)
    w = w.astype("float32").astype("float64")  # what NumpyArrayInitializer holds (float32 values, as Fluid's)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [-1, 3], "float64", lod_level=1)
        xv.stop_gradient = False
        lv = fluid.data("label", [-1, 1], "int64", lod_level=1)
        ll = fluid.layers.linear_chain_crf(xv, lv, param_attr=fluid.ParamAttr(
            name="crfw", initializer=fluid.initializer.NumpyArrayInitializer(w)))
        dx, = fluid.gradients([fluid.layers.reduce_sum(ll)], [xv])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": (x, [lens]), "label": (label, [lens])}, fetch_list=[dx], return_numpy=False)
    got = np.array(got)
    paths = list(itertools.product(range(3), repeat=5))
    p = np.exp([path_score(x, w, q) for q in paths])
    p /= p.sum()
    marg = np.zeros((5, 3))
    for q, pq in zip(paths, p):
        marg[np.arange(5), q] += pq
    marg[np.arange(5), label[:, 0]] -= 1
    np.testing.assert_allclose(got, marg, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ errors

def run_op(feed_x, feed_w, feed_label, length=None):
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[-1, 3], dtype="float64", lod_level=1)
    w = block.create_var(name="w", shape=[5, 3], dtype="float64")
    lab = block.create_var(name="label", shape=[-1, 1], dtype="int64", lod_level=1)
    outs = {s: [declare(block, s.lower(), None, "float64")]
            for s in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    block.append_op(type="linear_chain_crf", inputs={"Emission": [x], "Transition": [w], "Label": [lab]},
                    outputs=outs)
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed={"x": feed_x, "w": feed_w, "label": feed_label}, fetch_list=["loglikelihood"])


def test_label_out_of_range():
    x, w = np.zeros((4, 3)), np.zeros((5, 3))
    for bad in (3, -1):
        label = np.array([[0], [1], [bad], [2]], "int64")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf: Label 'label' holds %d at position 0 "
                                                           r"of sequence 1 \(row 2\); it must be in \[0, 2\], a tag "
                                                           r"of Emission 'x' \[4, 3\]" % bad):
            run_op((x, [[2, 2]]), w, (label, [[2, 2]]))


def test_label_and_emission_lod_mismatch():
    x, w, label = np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((4, 1), "int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf: Label 'label' \[4, 1\] LoD \{\{0, 1, 4\}\} "
                                                       r"and Emission 'x' \[4, 3\] LoD \{\{0, 2, 4\}\} must describe "
                                                       r"the same sequences"):
        run_op((x, [[2, 2]]), w, (label, [[1, 3]]))


def test_label_without_lod():
    x, w, label = np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((4, 1), "int64")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf: Label 'label' \[4, 1\] must be a "
                                                       r"LoDTensor with at least 1 LoD level\(s\), got 0"):
        run_op((x, [[2, 2]]), w, label)


def test_invalid_lod():
    label = np.zeros((4, 1), "int64")
    t = fluid.core.LoDTensor()
    t.set(label, fluid.CPUPlace())
    # a LoD that does not fit the rows is refused where it is set, before any op can read it (Fluid's CheckLoD)
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, 2, 3\]\]: the last level ends at 3 "
                                         r"but the tensor has 4 rows"):
        t.set_lod([[0, 2, 3]])


def test_nan_emission_is_an_error_not_garbage():
    x, w, label = np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((4, 1), "int64")
    x[3, 1] = np.nan
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf: the forward probabilities of sequence 1 at "
                                                       r"position 1 sum to nan, not a positive finite number: Emission "
                                                       r"'x' or Transition 'w' holds NaN or Inf"):
        run_op((x, [[2, 2]]), w, (label, [[2, 2]]))


def test_grad_of_foreign_forward_outputs_is_an_error():
    # linear_chain_crf_grad built by hand over an Alpha of zeros: no tag has any probability mass
    main = fluid.Program()
    block = main.global_block()
    names = {"Emission": [4, 3], "Transition": [5, 3], "Alpha": [4, 3], "EmissionExps": [4, 3],
             "TransitionExps": [5, 3], "LogLikelihood@GRAD": [2, 1]}
    ins = {slot: [declare(block, slot.lower().replace("@", "_"), shape, "float64")] for slot, shape in names.items()}
    ins["Label"] = [declare(block, "label", [4, 1], "int64")]
    block.append_op(type="linear_chain_crf_grad", inputs=ins,
                    outputs={"Emission@GRAD": [declare(block, "dx", None, "float64")]})
    feed = {v[0].name: np.ones(names[s]) for s, v in ins.items() if s != "Label"}
    feed["alpha"] = np.zeros((4, 3))
    feed["label"] = (np.zeros((4, 1), "int64"), [[2, 2]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf_grad: the tag probabilities of sequence 0 "
                                                       r"at position 0 sum to 0: the forward and backward vectors "
                                                       r"underflowed, or Alpha 'alpha' and EmissionExps "
                                                       r"'emissionexps' are not linear_chain_crf's outputs"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["dx"])


def build_errors():
    block = fluid.Program().global_block()
    outs = {s: [declare(block, s.lower(), None)] for s in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}

    def build(x_shape, w_shape, label_shape, length_shape=None, x_dtype="float32", label_dtype="int64"):
        inputs = {"Emission": [declare(block, "x", x_shape, x_dtype)], "Transition": [declare(block, "w", w_shape)],
                  "Label": [declare(block, "label", label_shape, label_dtype)]}
        if length_shape is not None:
            inputs["Length"] = [declare(block, "length", length_shape, "int64")]
        block.append_op(type="linear_chain_crf", inputs=inputs, outputs=outs)
    return build


@pytest.mark.parametrize("args,message", [
    (([-1, 4], [5, 4], [-1, 1]), r"Transition 'w' \[5, 4\] must be \[D \+ 2, D\]"),
    (([-1, 4], [6, 4, 1], [-1, 1]), r"Transition 'w' \[6, 4, 1\] must have rank 2"),
    (([-1, 3], [6, 4], [-1, 1]), r"Emission 'x' \[-1, 3\] has 3 tags but Transition 'w' \[6, 4\] is for 4"),
    (([-1, 2, 4], [6, 4], [-1, 1]), r"Emission 'x' \[-1, 2, 4\] must have rank 2 \[T, D\] \(a LoDTensor: no Length "
                                    r"is given\)"),
    (([-1, 4], [6, 4], [-1, 2]), r"Label 'label' \[-1, 2\] must be \[T\] or \[T, 1\]"),
    (([5, 4], [6, 4], [4, 1]), r"Label 'label' \[4, 1\] and Emission 'x' \[5, 4\] must have the same number of rows"),
    (([-1, 4], [6, 4], [-1, 1], None, "float32", "int32"), r"Label 'label' \[-1, 1\] must be int64, got int32"),
    (([-1, 4], [6, 4], [-1, 1], None, "int64"), r"Emission 'x' \[-1, 4\] must be float32 or float64, got int64"),
    (([-1, 4], [6, 4], [-1, 1], [-1]), r"Emission 'x' \[-1, 4\] must have rank 3 \[N, L, D\] \(the padded form"),
    (([-1, 5, 4], [6, 4], [-1, 4], [-1]), r"Label 'label' \[-1, 4\] and Emission 'x' \[-1, 5, 4\] must have the same "
                                          r"padded length"),
    (([3, 5, 4], [6, 4], [3, 5], [2]), r"Length 'length' \[2\] must hold one length per row of Emission 'x' "
                                       r"\[3, 5, 4\]"),
])
def test_build_time_errors(args, message):
    with pytest.raises(fluid.core.EnforceNotMet, match="linear_chain_crf: " + message):
        build_errors()(*args)


def test_padded_length_errors():
    xp, w, lp = np.zeros((2, 3, 3)), np.zeros((5, 3)), np.zeros((2, 3), "int64")
    t = OpTest("linear_chain_crf", {"Emission": xp, "Transition": w, "Label": lp,
                                    "Length": np.array([4, 1], "int64")},
               {"LogLikelihood": np.zeros((2, 1)), "Alpha": None, "EmissionExps": None, "TransitionExps": None})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"linear_chain_crf: Length 'in_Length_length_var'\[0\] = 4 is "
                                                       r"not a length in \[0, 3\] \(the padded length of Emission "
                                                       r"'in_Emission_emission_var' \[2, 3, 3\]\)"):
        t.check_output()


# ------------------------------------------------------------------ the layer

def test_layer_parameter_and_training():
    # The book's use: a named transition with its own learning rate; SGD on the mean cost makes it fall
    rng = np.random.RandomState(12)
    lens, tags, feat = [4, 7, 1, 5], 5, 6
    feats = rng.uniform(-1, 1, (sum(lens), feat)).astype("float32")
    label = rng.randint(0, tags, (sum(lens), 1)).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("feats", [-1, feat], "float32", lod_level=1)
        y = fluid.data("label", [-1, 1], "int64", lod_level=1)
        emission = fluid.layers.fc(x, size=tags)
        cost = fluid.layers.linear_chain_crf(emission, y, param_attr=fluid.ParamAttr(name="crfw", learning_rate=0.5))
        assert cost.shape == (-1, 1) and cost.dtype == fluid.core.VarDesc.VarType.FP32
        avg = fluid.layers.mean(cost)
        fluid.optimizer.SGD(0.5).minimize(avg)
    crfw = main.global_block().var("crfw")
    assert isinstance(crfw, fluid.framework.Parameter) and crfw.shape == (tags + 2, tags)
    assert crfw.optimize_attr["learning_rate"] == 0.5
    assert [op.type for op in main.global_block().ops].count("linear_chain_crf_grad") == 1
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scope = fluid.global_scope()
    fc_w = np.array(scope.find_var("fc_0.w_0").get_tensor()).astype("float64")
    fc_b = np.array(scope.find_var("fc_0.b_0").get_tensor()).astype("float64")
    trans = np.array(scope.find_var("crfw").get_tensor()).astype("float64")
    costs = []
    for step in range(30):
        c, = exe.run(main, feed={"feats": (feats, [lens]), "label": (label, [lens])}, fetch_list=[cost])
        if step == 0:  # the first step's cost, from the initial weights, against the reference
            want = reference(feats.astype("float64") @ fc_w + fc_b, trans, label, lens)[0]
            np.testing.assert_allclose(c, want, rtol=1e-5)
        costs.append(float(c.mean()))
    assert costs[-1] < 0.5 * costs[0], costs


def test_layer_padded_form():
    rng = np.random.RandomState(13)
    lens, max_len, tags = [3, 1, 0, 4], 4, 3
    x, w, label = rand_case(rng, lens, tags)
    xp, lp = padded(x, label, lens, max_len)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xv = fluid.data("x", [-1, max_len, tags], "float64")
        lv = fluid.data("label", [-1, max_len, 1], "int64")
        nv = fluid.data("length", [-1, 1], "int64")
        cost = fluid.layers.linear_chain_crf(xv, lv, param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.NumpyArrayInitializer(w)), length=nv)
        assert cost.shape == (-1, 1)
    assert main.global_block().all_parameters()[0].name == "linear_chain_crf_0.w_0"
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": xp, "label": lp, "length": np.array([[m] for m in lens], "int64")},
                   fetch_list=[cost])
    # NumpyArrayInitializer holds float32 values, as Fluid's
    np.testing.assert_allclose(got, reference(x, w.astype("float32").astype("float64"), label, lens)[0], rtol=1e-11)


def test_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 4], "float32", lod_level=1)
        y = fluid.data("y", [-1, 1], "int64", lod_level=1)
        with pytest.raises(TypeError, match=r"linear_chain_crf: 'label' \(y32\) must be int64, got int32"):
            fluid.layers.linear_chain_crf(x, fluid.data("y32", [-1, 1], "int32", lod_level=1))
        with pytest.raises(TypeError, match=r"linear_chain_crf: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.linear_chain_crf(fluid.data("ids", [-1, 4], "int64"), y)
        with pytest.raises(ValueError, match=r"linear_chain_crf: input x must have rank 3 \(\[N, L, D\], padded with "
                                             r"length\), got shape \[-1, 4\]"):
            fluid.layers.linear_chain_crf(x, y, length=fluid.data("n", [-1], "int64"))
