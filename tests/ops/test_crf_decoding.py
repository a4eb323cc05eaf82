"""crf_decoding (kernels/crf_decoding.cc, layers.crf_decoding): the Viterbi path of each sequence against a
brute-force search over every tag path (written per sequence), in the LoD and the padded (Length) forms, with and
without Label (1 / 0 per position), empty and one-element sequences, a single sequence, two LoD levels, ties, large
emissions; the layer reusing linear_chain_crf's transition parameter by name; the errors."""
import itertools

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare


def path_score(x, w, path):
    s = w[0, path[0]] + w[1, path[-1]] + sum(x[k, t] for k, t in enumerate(path))
    return s + sum(w[2 + path[k - 1], path[k]] for k in range(1, len(path)))


def brute_force_path(x, w):
    """The best path of one sequence x [L, D] over all D^L paths. Among equal scores, Fluid's: the smallest last tag,
    then the smallest tag before it, and so on (its backtrack keeps the first best predecessor), i.e. the first
    path in lexicographic order of the reversed paths."""
    best, best_score = None, -np.inf
    for r in itertools.product(range(x.shape[1]), repeat=x.shape[0]):
        p = r[::-1]
        s = path_score(x, w, p)
        if s > best_score:
            best, best_score = p, s
    return list(best)


def viterbi_path(x, w):
    """The same by dynamic programming, for sequences too long to enumerate (ties aside)."""
    score, back = w[0] + x[0], []
    for k in range(1, x.shape[0]):
        cand = score[:, None] + w[2:]
        back.append(cand.argmax(0))
        score = cand.max(0) + x[k]
    path = [int((score + w[1]).argmax())]
    for b in reversed(back):
        path.append(int(b[path[-1]]))
    return path[::-1]


def reference(x, w, lens, decode=brute_force_path):
    out, start = [], 0
    for n in lens:
        if n:
            out += decode(x[start:start + n], w)
        start += n
    return np.array(out, "int64").reshape(-1, 1)


def rand_case(rng, lens, tags, scale=1.0, dtype="float64"):
    x = (rng.uniform(-1, 1, (sum(lens), tags)) * scale).astype(dtype)
    w = rng.uniform(-1, 1, (tags + 2, tags)).astype(dtype)
    return x, w


@pytest.mark.parametrize("tags", [1, 2, 3, 4])
@pytest.mark.parametrize("lens", [[1, 3, 2], [4], [1], [3, 0, 1, 2, 0]])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_brute_force(tags, lens, dtype):
    x, w = rand_case(np.random.RandomState(tags + 10 * len(lens)), lens, tags, scale=2.0, dtype=dtype)
    path = reference(x.astype("float64"), w.astype("float64"), lens)
    OpTest("crf_decoding", {"Emission": (x, [lens]), "Transition": w},
           {"ViterbiPath": (path, [lens])}).check_output()


def test_brute_force_agrees_with_dynamic_programming():
    x, w = rand_case(np.random.RandomState(0), [6], 4, scale=2.0)
    assert brute_force_path(x, w) == viterbi_path(x, w)


@pytest.mark.parametrize("lens,tags", [([1, 9, 20, 3], 7), ([40], 16), ([5] * 16, 59), ([30, 2], 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_longer_sequences(lens, tags, dtype):
    x, w = rand_case(np.random.RandomState(tags), lens, tags, scale=3.0, dtype=dtype)
    path = reference(x.astype("float64"), w.astype("float64"), lens, decode=viterbi_path)
    OpTest("crf_decoding", {"Emission": (x, [lens]), "Transition": w},
           {"ViterbiPath": (path, [lens])}).check_output()


def test_large_emissions():
    lens = [5, 3]
    x, w = rand_case(np.random.RandomState(1), lens, 4, scale=1e6)
    x[0] += 1e7
    path = reference(x, w, lens)
    OpTest("crf_decoding", {"Emission": (x.astype("float32"), [lens]), "Transition": w.astype("float32")},
           {"ViterbiPath": (path, [lens])}).check_output()


def test_ties_go_to_the_smaller_tag():
    # every path scores the same: the first one, all zeros; and equal best scores for tags 1 and 2 at the end
    x, w = np.zeros((4, 3)), np.zeros((5, 3))
    OpTest("crf_decoding", {"Emission": (x, [[4]]), "Transition": w},
           {"ViterbiPath": (np.zeros((4, 1), "int64"), [[4]])}).check_output()
    x = np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    assert brute_force_path(x, w) == [1, 0]
    OpTest("crf_decoding", {"Emission": (x, [[2]]), "Transition": w},
           {"ViterbiPath": (np.array([[1], [0]], "int64"), [[2]])}).check_output()


@pytest.mark.parametrize("tags", [4, 9, 11])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_many_ties_against_brute_force(tags, dtype):
    # scores of small integers: many paths tie exactly; the kernel's register tiles (32 float / 16 double tags, the
    # last one padded) must keep Fluid's choice
    rng = np.random.RandomState(tags)
    lens = [3, 1, 2]
    x = rng.randint(0, 2, (sum(lens), tags)).astype(dtype)
    w = rng.randint(-1, 1, (tags + 2, tags)).astype(dtype)
    path = reference(x.astype("float64"), w.astype("float64"), lens)
    OpTest("crf_decoding", {"Emission": (x, [lens]), "Transition": w},
           {"ViterbiPath": (path, [lens])}).check_output()


def test_tie_rule_is_not_plain_lexicographic():
    # (0, 1) and (1, 0) both score 2, the others 1: Fluid keeps the smaller LAST tag, so (1, 0)
    x, w = np.ones((2, 2)), np.zeros((4, 2))
    w[2:] = [[-1.0, 0.0], [0.0, -1.0]]  # 0 -> 0 and 1 -> 1 cost 1
    assert path_score(x, w, (0, 1)) == path_score(x, w, (1, 0)) == 2.0
    assert brute_force_path(x, w) == [1, 0]
    OpTest("crf_decoding", {"Emission": (x, [[2]]), "Transition": w},
           {"ViterbiPath": (np.array([[1], [0]], "int64"), [[2]])}).check_output()


def test_two_lod_levels():
    lod = [[2, 1], [2, 3, 1]]
    x, w = rand_case(np.random.RandomState(2), lod[1], 3)
    OpTest("crf_decoding", {"Emission": (x, lod), "Transition": w},
           {"ViterbiPath": (reference(x, w, lod[1]), lod)}).check_output()


@pytest.mark.parametrize("label_shape", [(-1, 1), (-1,)])
def test_with_label_one_where_the_path_matches(label_shape):
    lens = [3, 1, 0, 4]
    x, w = rand_case(np.random.RandomState(3), lens, 3)
    path = reference(x, w, lens)
    label = path.copy()
    label[[0, 3, 5, 7]] = (label[[0, 3, 5, 7]] + 1) % 3  # four mismatches
    match = (label == path).astype("int64")
    assert match.sum() == 4
    OpTest("crf_decoding", {"Emission": (x, [lens]), "Transition": w, "Label": (label.reshape(label_shape), [lens])},
           {"ViterbiPath": (match, [lens])}).check_output()


def padded(x, lens, max_len):
    xp = np.full((len(lens), max_len, x.shape[1]), 5.0, x.dtype)  # padding that must not be read
    start = 0
    for i, m in enumerate(lens):
        xp[i, :m] = x[start:start + m]
        start += m
    return xp


def padded_rows(a, lens, max_len):
    out, start = np.zeros((len(lens), max_len), a.dtype), 0
    for i, m in enumerate(lens):
        out[i, :m] = a[start:start + m, 0]
        start += m
    return out


@pytest.mark.parametrize("lens", [[3, 1, 4], [4], [0, 2, 4, 0]])
@pytest.mark.parametrize("length_shape", [(-1, 1), (-1,)])
@pytest.mark.parametrize("with_label", [False, True])
def test_padded_form(lens, length_shape, with_label):
    max_len, tags = 4, 3
    x, w = rand_case(np.random.RandomState(sum(lens)), lens, tags)
    path = reference(x, w, lens)
    inputs = {"Emission": padded(x, lens, max_len), "Transition": w,
              "Length": np.array(lens, "int64").reshape(length_shape)}
    want = padded_rows(path, lens, max_len)
    if with_label:
        label = path.copy()
        label[::2] = (label[::2] + 1) % tags
        lp = padded_rows(label, lens, max_len)
        inputs["Label"] = lp[:, :, None]
        want = padded_rows((label == path).astype("int64"), lens, max_len)  # 0 at the padding too
    OpTest("crf_decoding", inputs, {"ViterbiPath": want}).check_output()


def test_a_batch_of_no_sequences():
    OpTest("crf_decoding", {"Emission": np.zeros((0, 3, 4)), "Transition": np.zeros((6, 4)),
                            "Length": np.zeros((0,), "int64")},
           {"ViterbiPath": np.zeros((0, 3), "int64")}).check_output()


# ------------------------------------------------------------------ the layer

def test_layer_reuses_the_trained_transition():
    # linear_chain_crf trains 'crfw'; crf_decoding decodes with the same parameter, and after training the
    # decoded path is the one the numpy Viterbi finds with the trained weights
    rng = np.random.RandomState(4)
    lens, tags, feat = [4, 6, 1, 5], 4, 5
    feats = rng.uniform(-1, 1, (sum(lens), feat)).astype("float32")
    label = rng.randint(0, tags, (sum(lens), 1)).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("feats", [-1, feat], "float32", lod_level=1)
        y = fluid.data("label", [-1, 1], "int64", lod_level=1)
        emission = fluid.layers.fc(x, size=tags)
        cost = fluid.layers.linear_chain_crf(emission, y, param_attr=fluid.ParamAttr(name="crfw"))
        fluid.optimizer.SGD(0.5).minimize(fluid.layers.mean(cost))
        decoded = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
        matches = fluid.layers.crf_decoding(emission, param_attr="crfw", label=y)
    assert decoded.dtype == fluid.core.VarDesc.VarType.INT64 and decoded.shape == (-1, 1) and decoded.lod_level == 1
    assert [p.name for p in main.global_block().all_parameters()].count("crfw") == 1
    decode_op = [op for op in main.global_block().ops if op.type == "crf_decoding"][0]
    assert decode_op.input("Transition") == ["crfw"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for _ in range(40):
        em, path, match = exe.run(main, feed={"feats": (feats, [lens]), "label": (label, [lens])},
                                  fetch_list=[emission, decoded, matches], return_numpy=False)
    trans = np.array(fluid.global_scope().find_var("crfw").get_tensor()).astype("float64")
    assert path.recursive_sequence_lengths() == [lens]
    want = reference(np.array(em).astype("float64"), trans, lens, decode=viterbi_path)
    np.testing.assert_array_equal(np.array(path), want)
    np.testing.assert_array_equal(np.array(match), (want == label).astype("int64"))
    assert (want == label).mean() > 0.5  # it learned something


def test_layer_padded_form():
    lens, max_len, tags = [3, 0, 4], 4, 3
    x, w = rand_case(np.random.RandomState(5), lens, tags)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xv = fluid.data("x", [-1, max_len, tags], "float64")
        lv = fluid.data("label", [-1, max_len, 1], "int64")
        nv = fluid.data("length", [-1, 1], "int64")
        fluid.layers.linear_chain_crf(xv, lv, length=nv, param_attr=fluid.ParamAttr(
            name="crfw_pad", initializer=fluid.initializer.NumpyArrayInitializer(w)))
        path = fluid.layers.crf_decoding(xv, param_attr=fluid.ParamAttr(name="crfw_pad"), length=nv)
        assert path.shape == (-1, max_len)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, = exe.run(main, feed={"x": padded(x, lens, max_len), "length": np.array([[m] for m in lens], "int64"),
                               "label": np.zeros((3, max_len, 1), "int64")}, fetch_list=[path])
    w32 = w.astype("float32").astype("float64")  # NumpyArrayInitializer holds float32 values, as Fluid's
    np.testing.assert_array_equal(got, padded_rows(reference(x, w32, lens), lens, max_len))


def test_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 4], "float32", lod_level=1)
        with pytest.raises(ValueError, match=r"crf_decoding: no parameter named 'crfw' in the main program: create it "
                                             r"first with linear_chain_crf\(\.\.\., param_attr=fluid\.ParamAttr\("
                                             r"name='crfw'\)\)"):
            fluid.layers.crf_decoding(x, param_attr=fluid.ParamAttr(name="crfw"))
        with pytest.raises(ValueError, match=r"crf_decoding: param_attr must name the transition parameter"):
            fluid.layers.crf_decoding(x, param_attr=None)
        with pytest.raises(TypeError, match=r"crf_decoding: 'label' \(y\) must be int64, got float32"):
            fluid.layers.crf_decoding(x, param_attr="crfw", label=fluid.data("y", [-1, 1], "float32"))


# ------------------------------------------------------------------ errors

def test_label_and_emission_lod_mismatch():
    x, w, label = np.zeros((4, 3)), np.zeros((5, 3)), np.zeros((4, 1), "int64")
    t = OpTest("crf_decoding", {"Emission": (x, [[2, 2]]), "Transition": w, "Label": (label, [[3, 1]])},
               {"ViterbiPath": np.zeros((4, 1), "int64")})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"crf_decoding: Emission 'in_Emission_emission_var' \[4, 3\] "
                                                       r"LoD \{\{0, 2, 4\}\} and Label 'in_Label_label_var' \[4, 1\] "
                                                       r"LoD \{\{0, 3, 4\}\} must describe the same sequences"):
        t.check_output()


def test_emission_without_lod():
    t = OpTest("crf_decoding", {"Emission": np.zeros((4, 3)), "Transition": np.zeros((5, 3))},
               {"ViterbiPath": np.zeros((4, 1), "int64")})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"crf_decoding: Emission 'in_Emission_emission_var' \[4, 3\] "
                                                       r"must be a LoDTensor with at least 1 LoD level"):
        t.check_output()


def test_length_errors():
    xp, w = np.zeros((2, 3, 3)), np.zeros((5, 3))
    for length, message in (([1, -1], r"Length 'in_Length_length_var'\[1\] = -1 is not a length in \[0, 3\]"),
                            ([1, 2, 3], r"Length 'in_Length_length_var' \[3\] must hold one length per row of "
                                        r"Emission 'in_Emission_emission_var' \[2, 3, 3\]")):
        t = OpTest("crf_decoding", {"Emission": xp, "Transition": w, "Length": np.array(length, "int64")},
                   {"ViterbiPath": np.zeros((2, 3), "int64")})
        with pytest.raises(fluid.core.EnforceNotMet, match="crf_decoding: " + message):
            t.check_output()


@pytest.mark.parametrize("x_shape,w_shape,label_shape,message", [
    ([-1, 4], [6, 5], None, r"Transition 'w' \[6, 5\] must be \[D \+ 2, D\]"),
    ([-1, 3], [6, 4], None, r"Emission 'x' \[-1, 3\] has 3 tags but Transition 'w' \[6, 4\] is for 4"),
    ([-1, 0], [2, 0], None, r"Emission 'x' \[-1, 0\] must have at least one tag \(its last dim\)"),
    ([-1, 2, 4], [6, 4], None, r"Emission 'x' \[-1, 2, 4\] must have rank 2 \[T, D\]"),
    ([-1, 4], [6, 4], [-1, 3], r"Label 'label' \[-1, 3\] must be \[T\] or \[T, 1\]"),
    ([6, 4], [6, 4], [5, 1], r"Label 'label' \[5, 1\] and Emission 'x' \[6, 4\] must have the same number of rows"),
])
def test_build_time_errors(x_shape, w_shape, label_shape, message):
    block = fluid.Program().global_block()
    inputs = {"Emission": [declare(block, "x", x_shape)], "Transition": [declare(block, "w", w_shape)]}
    if label_shape is not None:
        inputs["Label"] = [declare(block, "label", label_shape, "int64")]
    with pytest.raises(fluid.core.EnforceNotMet, match="crf_decoding: " + message):
        block.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": [declare(block, "out", None)]})
