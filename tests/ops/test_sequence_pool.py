"""sequence_pool (and its layers sequence_pool / sequence_first_step / sequence_last_step): every pool type against a
numpy reference written per sequence, MaxIndex, empty and one-element sequences, a single sequence, two LoD levels,
rank-3 rows, numeric gradients, is_test, and errors at build and run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare

rng = np.random.RandomState(11)
TYPES = ["AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"]


def offsets(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(int)


def np_pool(x, lens, pooltype, pad_value=0.0):
    """(Out, MaxIndex): one row per sequence, written sequence by sequence."""
    off = offsets(lens)
    out = np.zeros((len(lens),) + x.shape[1:], x.dtype)
    index = np.full((len(lens),) + x.shape[1:], -1, np.int32)
    for s in range(len(lens)):
        seq = x[off[s]:off[s + 1]]
        if len(seq) == 0:
            out[s] = pad_value
            continue
        if pooltype == "AVERAGE":
            out[s] = seq.sum(0) / len(seq)
        elif pooltype == "SUM":
            out[s] = seq.sum(0)
        elif pooltype == "SQRT":
            out[s] = seq.sum(0) / np.sqrt(len(seq))
        elif pooltype == "MAX":
            out[s] = seq.max(0)
            index[s] = off[s] + seq.argmax(0)  # the first maximum
        elif pooltype == "LAST":
            out[s] = seq[-1]
        else:
            out[s] = seq[0]
    return out, index


CASES = {
    "ragged": [3, 1, 4, 2],
    "empty_sequences": [2, 0, 3, 0],
    "one_element_each": [1, 1, 1],
    "single_sequence": [5],
    "all_empty": [0, 0],
}


def pool_test(x, lens, pooltype, pad_value=0.0, upper=None):
    """An OpTest of sequence_pool on x with last-level lengths `lens` (and upper levels `upper`)."""
    out, index = np_pool(x, lens, pooltype, pad_value)
    lod = (upper or []) + [lens]
    outputs = {"Out": (out, upper or [])}
    outputs["MaxIndex"] = index if pooltype == "MAX" else None
    return OpTest("sequence_pool", {"X": (x, lod)}, outputs, {"pooltype": pooltype, "pad_value": pad_value})


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("pooltype", TYPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward(case, pooltype, dtype):
    lens = CASES[case]
    x = rng.uniform(-1, 1, (sum(lens), 3)).astype(dtype)
    pool_test(x, lens, pooltype, pad_value=0.5).check_output()


@pytest.mark.parametrize("pooltype", TYPES)
def test_forward_rank3_rows(pooltype):
    lens = [2, 3, 1]
    x = rng.uniform(-1, 1, (6, 2, 3))
    pool_test(x, lens, pooltype).check_output()


@pytest.mark.parametrize("pooltype", TYPES)
def test_two_levels_pool_the_last_and_keep_the_first(pooltype):
    # 2 paragraphs of 2 and 1 sentences; sentences of 2, 3 and 1 words (one paragraph's sentence empty too)
    upper, lens = [2, 2], [2, 3, 0, 1]
    x = rng.uniform(-1, 1, (6, 4))
    pool_test(x, lens, pooltype, pad_value=-2.0, upper=[upper]).check_output()


def test_max_index_takes_the_first_maximum():
    x = np.array([[1, 5], [3, 5], [3, 2], [7, 7]], "float32")
    out, index = np_pool(x, [3, 1], "MAX")
    np.testing.assert_array_equal(index, [[1, 0], [3, 3]])  # ties: the earlier row
    OpTest("sequence_pool", {"X": (x, [[3, 1]])}, {"Out": out, "MaxIndex": index}, {"pooltype": "MAX"}).check_output()


@pytest.mark.parametrize("case", ["ragged", "empty_sequences", "one_element_each", "single_sequence"])
@pytest.mark.parametrize("pooltype", TYPES)
def test_grad(case, pooltype):
    lens = CASES[case]
    x = rng.uniform(-1, 1, (sum(lens), 3))
    pool_test(x, lens, pooltype, pad_value=0.3).check_grad(["X"], "Out")


@pytest.mark.parametrize("pooltype", TYPES)
def test_grad_two_levels_rank3(pooltype):
    x = rng.uniform(-1, 1, (6, 2, 2))
    pool_test(x, [2, 3, 0, 1], pooltype, upper=[[3, 1]]).check_grad(["X"], "Out")


def test_grad_values_per_sequence():
    # d(sum of Out)/dX: every row of a sequence gets 1 (SUM), 1/len (AVERAGE), 1/sqrt(len) (SQRT); FIRST/LAST only
    # their row; MAX the arg max; an empty sequence's pad row gives nothing.
    lens = [3, 0, 1]
    x = np.array([[1.0], [4.0], [2.0], [5.0]])
    want = {"SUM": [1, 1, 1, 1], "AVERAGE": [1 / 3, 1 / 3, 1 / 3, 1], "SQRT": [3 ** -0.5] * 3 + [1],
            "FIRST": [1, 0, 0, 1], "LAST": [0, 0, 1, 1], "MAX": [0, 1, 0, 1]}
    for pooltype, g in want.items():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            v = fluid.layers.data("x", shape=[1], dtype="float64", lod_level=1)
            v.stop_gradient = False
            out = fluid.layers.sequence_pool(v, pooltype.lower(), pad_value=9.0)
            gx, = fluid.gradients([fluid.layers.reduce_sum(out)], [v])
        exe = fluid.Executor(fluid.CPUPlace())
        got_out, got_g = exe.run(main, feed={"x": (x, [lens])}, fetch_list=[out, gx], return_numpy=False)
        np.testing.assert_allclose(np.array(got_out), np_pool(x, lens, pooltype, 9.0)[0], err_msg=pooltype)
        np.testing.assert_allclose(np.array(got_g)[:, 0], g, err_msg=pooltype)
        assert got_g.recursive_sequence_lengths() == [lens]  # X@GRAD has X's LoD


def test_is_test_skips_max_index():
    x = rng.uniform(-1, 1, (5, 3)).astype("float32")
    out, _ = np_pool(x, [2, 3], "MAX")
    t = OpTest("sequence_pool", {"X": (x, [[2, 3]])}, {"Out": out, "MaxIndex": None},
               {"pooltype": "MAX", "is_test": True})
    main = t.check_output()
    index_var = [op for op in main.global_block().ops if op.type == "sequence_pool"][0].output("MaxIndex")[0]
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(fluid.core.EnforceNotMet, match="MaxIndex|out_MaxIndex"):
        exe.run(main, feed={"in_X_x_var": (x, [[2, 3]])}, fetch_list=[index_var])


def test_clone_for_test_sets_is_test():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", shape=[2], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_pool(v, "max")
    test_program = main.clone(for_test=True)
    op, = [op for op in test_program.global_block().ops if op.type == "sequence_pool"]
    assert op.attr("is_test") is True
    x = rng.uniform(-1, 1, (4, 2)).astype("float32")
    got, = fluid.Executor(fluid.CPUPlace()).run(test_program, feed={"x": (x, [[1, 3]])}, fetch_list=[out])
    np.testing.assert_allclose(got, np_pool(x, [1, 3], "MAX")[0])


# ------------------------------------------------------------------ layers

def test_layers_and_their_lod():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.layers.data("w", shape=[3], dtype="float32", lod_level=2)
        sentences = fluid.layers.sequence_pool(words, "Sum")  # any case, as Fluid
        first = fluid.layers.sequence_first_step(sentences)
        last = fluid.layers.sequence_last_step(sentences)
        assert sentences.shape == (-1, 3) and sentences.lod_level == 1 and first.lod_level == 0
    op_types = [op.type for op in main.global_block().ops]
    assert op_types == ["sequence_pool"] * 3
    pools = [op.attr("pooltype") for op in main.global_block().ops]
    assert pools == ["SUM", "FIRST", "LAST"]
    x = rng.uniform(-1, 1, (7, 3)).astype("float32")
    upper, lens = [2, 1], [3, 0, 4]
    got_s, got_f, got_l = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"w": (x, [upper, lens])}, fetch_list=[sentences, first, last], return_numpy=False)
    s = np_pool(x, lens, "SUM")[0]
    np.testing.assert_allclose(np.array(got_s), s, rtol=1e-6)
    assert got_s.recursive_sequence_lengths() == [upper]
    np.testing.assert_allclose(np.array(got_f), np_pool(s, upper, "FIRST")[0], rtol=1e-6)
    np.testing.assert_allclose(np.array(got_l), np_pool(s, upper, "LAST")[0], rtol=1e-6)
    assert got_l.recursive_sequence_lengths() == []


def test_layer_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32", lod_level=1)
        ids = fluid.layers.data("ids", shape=[1], dtype="int64", lod_level=1)
        with pytest.raises(ValueError, match=r"sequence_pool: pool_type must be one of average, sum, sqrt, max, "
                                             r"last, first \(any case\), got 'mean'"):
            fluid.layers.sequence_pool(x, "mean")
        with pytest.raises(TypeError, match=r"sequence_pool: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.sequence_pool(ids, "sum")
        with pytest.raises(TypeError, match=r"sequence_last_step: 'input' \(ids\) must be float32 or float64"):
            fluid.layers.sequence_last_step(ids)
        with pytest.raises(TypeError, match="sequence_first_step: 'input' must be a Variable, got ndarray"):
            fluid.layers.sequence_first_step(np.zeros((2, 3)))


# ------------------------------------------------------------------ op errors

def _pool_program(pooltype="SUM", **attrs):
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [-1, 3])
    out, index = declare(block, "out", None), declare(block, "index", None)
    block.append_op(type="sequence_pool", inputs={"X": [x]}, outputs={"Out": [out], "MaxIndex": [index]},
                    attrs=dict(pooltype=pooltype, **attrs))
    return main, out


def test_op_attribute_and_slot_errors():
    with pytest.raises(fluid.core.EnforceNotMet, match="sequence_pool: attribute 'pooltype'.*MEAN"):
        _pool_program("MEAN")
    main = fluid.Program()
    block = main.global_block()
    with pytest.raises(fluid.core.EnforceNotMet, match="sequence_pool: pooltype MAX needs the MaxIndex output"):
        block.append_op(type="sequence_pool", inputs={"X": [declare(block, "x", [-1, 3])]},
                        outputs={"Out": [declare(block, "out", None)]}, attrs={"pooltype": "MAX"})


def test_run_time_lod_errors():
    main, out = _pool_program()
    exe = fluid.Executor(fluid.CPUPlace())
    x = np.zeros((4, 3), "float32")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pool: X 'x' \[4, 3\] must be a LoDTensor with at "
                                                       r"least 1 LoD level\(s\), got 0"):
        exe.run(main, feed={"x": x}, fetch_list=[out])
    bad = fluid.core.LoDTensor()
    bad.set(x, fluid.CPUPlace())
    bad.set_lod([[0, 3, 4]])
    bad.set(np.zeros((5, 3), "float32"), fluid.CPUPlace())  # set() keeps the LoD: it no longer fits the rows
    with pytest.raises(ValueError, match=r"feed: variable 'x' \[5, 3\] is fed the invalid LoD \{\{0, 3, 4\}\}: the "
                                         r"last level ends at 4 but the tensor has 5 rows"):
        exe.run(main, feed={"x": bad}, fetch_list=[out])


def test_grad_op_checks_its_inputs():
    # A hand-built sequence_pool_grad with an Out@GRAD of the wrong row count and a MaxIndex pointing outside its
    # sequence: errors naming the variables, never a write outside X@GRAD.
    main = fluid.Program()
    block = main.global_block()
    x = declare(block, "x", [-1, 2], "float32")
    dout = declare(block, "dout", [-1, 2], "float32")
    index = declare(block, "idx", [-1, 2], "int32")
    dx = declare(block, "dx", None)
    block.append_op(type="sequence_pool_grad", inputs={"X": [x], "MaxIndex": [index], "Out@GRAD": [dout]},
                    outputs={"X@GRAD": [dx]}, attrs={"pooltype": "MAX"})
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": (np.zeros((3, 2), "float32"), [[2, 1]]), "dout": np.ones((2, 2), "float32")}
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pool_grad: Out@GRAD 'dout' \[3, 2\] must be "
                                                       r"\[2, 2\]: one row per sequence of X 'x' \[3, 2\]"):
        exe.run(main, feed=dict(feed, dout=np.ones((3, 2), "float32"), idx=np.zeros((3, 2), "int32")),
                fetch_list=[dx])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"MaxIndex 'idx' holds row 2 at position 1, outside sequence "
                                                       r"0's rows \[0, 2\)"):
        exe.run(main, feed=dict(feed, idx=np.array([[0, 2], [2, 2]], "int32")), fetch_list=[dx])
    got, = exe.run(main, feed=dict(feed, idx=np.array([[1, 0], [2, 2]], "int32")), fetch_list=[dx], return_numpy=False)
    got = np.array(got)
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [1, 1]])


@pytest.fixture
def two_threads():
    saved = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    yield
    fluid.core.set_num_threads(saved)


def np_pool_grad(x, lens, pooltype, dout):
    """d(sum(Out * dout))/dX, sequence by sequence."""
    off, dx = offsets(lens), np.zeros_like(x)
    _, index = np_pool(x, lens, pooltype)
    for s, n in enumerate(lens):
        if n == 0:
            continue
        rows = slice(off[s], off[s + 1])
        if pooltype in ("SUM", "AVERAGE", "SQRT"):
            dx[rows] = dout[s] / {"SUM": 1.0, "AVERAGE": n, "SQRT": np.sqrt(n)}[pooltype]
        elif pooltype == "FIRST":
            dx[off[s]] = dout[s]
        elif pooltype == "LAST":
            dx[off[s + 1] - 1] = dout[s]
        else:
            for k in range(x.shape[1]):
                dx[index[s, k], k] = dout[s, k]
    return dx


@pytest.mark.parametrize("pooltype", TYPES)
def test_large_batch_split_over_threads(pooltype, two_threads):
    # 64 sequences of 0-120 rows x 64: enough elements for the kernels to split the sequences over two threads
    lens = list(np.random.RandomState(3).randint(0, 121, size=64))
    x = rng.uniform(-1, 1, (sum(lens), 64))
    dout = rng.uniform(-1, 1, (64, 64))
    pool_test(x, lens, pooltype).check_output()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.data("x", shape=[64], dtype="float64", lod_level=1)
        w = fluid.layers.data("w", shape=[64], dtype="float64")
        v.stop_gradient = False
        out = fluid.layers.sequence_pool(v, pooltype)
        gx, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, w))], [v])
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": (x, [lens]), "w": dout}, fetch_list=[gx],
                                                return_numpy=False)
    got = np.array(got)
    np.testing.assert_allclose(got, np_pool_grad(x, lens, pooltype, dout), rtol=1e-12, atol=1e-12)
