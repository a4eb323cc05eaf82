"""sequence_expand and sequence_expand_as: forward against numpy written per sequence, the output LoD (Fluid 1.8's
rules, empty reference sequences included), gradients, the layers and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import offsets, run_op, run_program, with_lod

RNG = np.random.RandomState(15)


def expand_ref(x, x_lens, ref_lens):
    """sequence_expand per source: x's sequence i (x_lens given) or row i (x_lens None) repeated ref_lens[i] times.
    Returns (Out, Out's lengths or None)."""
    off = offsets(x_lens if x_lens is not None else [1] * len(x))
    parts, out_lens = [], []
    for i, repeats in enumerate(ref_lens):
        seq = x[off[i]:off[i + 1]]
        for _ in range(repeats):
            parts.append(seq)
            out_lens.append(len(seq))
    out = np.concatenate(parts) if parts else np.zeros((0,) + x.shape[1:], x.dtype)
    return out, (out_lens if x_lens is not None else None)


def expand_case(x, x_lens, y_lens, ref_level=None, y_width=1):
    ref = y_lens[-1 if ref_level in (None, -1) else ref_level]
    out, out_lens = expand_ref(x, x_lens, ref)
    y = np.zeros((sum(y_lens[-1]), y_width), x.dtype)
    inputs = {"X": x if x_lens is None else (x, [x_lens]), "Y": (y, y_lens)}
    attrs = {} if ref_level is None else {"ref_level": ref_level}
    return OpTest("sequence_expand", inputs, {"Out": out if out_lens is None else (out, [out_lens])}, attrs), out


@pytest.mark.parametrize("x_lens, y_lens, ref_level", [
    ([2, 2], [[2, 2], [3, 3, 1, 1]], 0),            # Fluid's case 1: X's sequences repeated by Y's level 0
    ([1, 3], [[2, 2], [3, 3, 0, 2]], 0),            # Fluid's case 2
    ([1, 1, 0, 1, 1], [[0, 2, 4, 2, 0]], None),     # empty X sequence and empty reference sequences
    ([3], [[2]], -1),                               # a single sequence
    ([1, 1, 1, 1], [[2, 2, 2, 2]], None),           # one-element sequences
    ([2, 3], [[2], [2, 3]], 1),                     # two levels, the last referred to
])
def test_expand_x_with_lod(x_lens, y_lens, ref_level):
    x = RNG.uniform(-1, 1, (sum(x_lens), 3))
    t, _ = expand_case(x, x_lens, y_lens, ref_level)
    t.check_output()
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("rows, y_lens, ref_level", [
    (3, [[2, 0, 3]], None),                         # Fluid's layer example: [a][a] [] [c][c][c]
    (6, [[2, 4], [2, 2, 3, 0, 3, 3]], 1),           # an empty reference sequence drops row 3
    (2, [[2, 4], [2, 2, 3, 0, 3, 3]], 0),           # two levels, the upper one referred to
    (1, [[1]], -1),                                 # one row, one element
])
def test_expand_x_without_lod_has_no_output_lod(rows, y_lens, ref_level):
    x = RNG.uniform(-1, 1, (rows, 2, 2))            # rank 3: each row a [2, 2] block
    t, out = expand_case(x, None, y_lens, ref_level)
    t.check_output()
    t.check_grad(["X"], "Out")
    got = run_op("sequence_expand", t.inputs, ["Out"], t.attrs)["Out"]
    np.testing.assert_array_equal(np.array(got), out)
    assert got.recursive_sequence_lengths() == []


def test_expand_integer_dtypes_and_stale_lod():
    for dtype in ("int32", "int64"):
        x = np.arange(8, dtype=dtype).reshape(4, 2)
        t, _ = expand_case(x, [1, 3], [[3, 1]])
        t.check_output()
    # The same op run first with a LoD X then without: the second Out has no LoD left over from the first.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[2], dtype="float32", lod_level=1)
        y = fluid.layers.data("y", shape=[1], dtype="float32", lod_level=1)
        out = fluid.layers.sequence_expand(x, y)
    xv = np.arange(6, dtype="float32").reshape(3, 2)
    yv = fluid.create_lod_tensor(np.zeros((4, 1), "float32"), [[1, 3]], fluid.CPUPlace())
    first, = run_program(main, {"x": (xv[:2], [[1, 1]]), "y": yv}, [out])
    assert first.recursive_sequence_lengths() == [[1, 1, 1, 1]]
    second, = run_program(main, {"x": xv[:2], "y": yv}, [out])
    np.testing.assert_array_equal(np.array(second), xv[[0, 1, 1, 1]])
    assert second.recursive_sequence_lengths() == []


def test_expand_errors():
    x = np.zeros((4, 2), "float32")
    y = (np.zeros((5, 1), "float32"), [[2, 3], [1, 1, 1, 1, 1]])
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"sequence_expand: ref_level 2 is out of range for Y 'in_Y_y_var' \[5, 1\] LoD "
                             r"\{\{0, 2, 5\}\{0, 1, 2, 3, 4, 5\}\}: it must be -1 \(the last level\) or in \[0, 2\)"):
        run_op("sequence_expand", {"X": x, "Y": y}, ["Out"], {"ref_level": 2})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_expand: attribute 'ref_level' = -2 is invalid: "
                                                       r"must be >= -1"):
        run_op("sequence_expand", {"X": x, "Y": y}, ["Out"], {"ref_level": -2})
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"X 'in_X_x_var' \[4, 2\] LoD \{\} has no LoD, so it needs one row per sequence of level "
                             r"1 of Y 'in_Y_y_var' \[5, 1\] LoD .*: 5 rows, got 4"):
        run_op("sequence_expand", {"X": x, "Y": y}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"X 'in_X_x_var' \[4, 2\] LoD \{\{0, 1, 2, 4\}\} has 3 sequences but level 0 of Y "
                             r"'in_Y_y_var' \[5, 1\] LoD \{\{0, 2, 5\}\{.*\} has 2; they must be equal"):
        run_op("sequence_expand", {"X": (x, [[1, 1, 2]]), "Y": y}, ["Out"], {"ref_level": 0})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"X 'in_X_x_var' \[4, 2\] LoD \{\{0, 2, 4\}\{0, 1, 2, 3, 4\}"
                                                       r"\} has 2 LoD levels; X may have at most one"):
        run_op("sequence_expand", {"X": (x, [[2, 2], [1, 1, 1, 1]]), "Y": y}, ["Out"], {"ref_level": 0})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_expand: Y 'in_Y_y_var' \[5, 1\] must be a LoDTensor "
                                                       r"with at least 1 LoD level\(s\), got 0"):
        run_op("sequence_expand", {"X": x, "Y": np.zeros((5, 1), "float32")}, ["Out"])
    with pytest.raises(ValueError, match=r"feed: variable 'in_Y_y_var' \[5, 1\] is fed the invalid LoD "
                                         r"\{\{0, 2, 4\}\}: the last level ends at 4 but the tensor has 5 rows"):
        run_op("sequence_expand", {"X": x[:2], "Y": with_lod(np.zeros((5, 1), "float32"), [[0, 2, 4]])}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_expand: X 'x' \[-1\] must have rank >= 2"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            xv = fluid.layers.data("x", shape=[], dtype="float32")
            fluid.layers.sequence_expand(xv, fluid.layers.data("y", shape=[1], dtype="float32", lod_level=1))


def expand_as_ref(x, y_lens):
    """sequence_expand_as per sequence: row i of x repeated y_lens[i] times."""
    parts = [np.repeat(x[i:i + 1], n, axis=0) for i, n in enumerate(y_lens)]
    return np.concatenate(parts) if parts else np.zeros((0,) + x.shape[1:], x.dtype)


@pytest.mark.parametrize("y_lens", [
    [[3, 3, 1, 1]],                 # Fluid's case 1
    [[2, 0, 3]],                    # an empty sequence: its row is dropped, its gradient 0
    [[4]],                          # a single sequence
    [[1, 1, 1]],                    # one-element sequences
    [[2, 1], [1, 2, 3]],            # two levels: the last level's lengths; Out keeps both (fluidlite extends this)
])
def test_expand_as(y_lens):
    x = RNG.uniform(-1, 1, (len(y_lens[-1]), 2, 3))
    y = np.zeros((sum(y_lens[-1]), 1))
    t = OpTest("sequence_expand_as", {"X": x, "Y": (y, y_lens)}, {"Out": (expand_as_ref(x, y_lens[-1]), y_lens)})
    t.check_output()
    t.check_grad(["X"], "Out")


def test_expand_as_ignores_x_lod_and_takes_integers():
    x = np.array([[1, 2], [3, 4]], "int64")
    t = OpTest("sequence_expand_as", {"X": (x, [[2]]), "Y": (np.zeros((3, 1), "float32"), [[1, 2]])},
               {"Out": (expand_as_ref(x, [1, 2]), [[1, 2]])})
    t.check_output()


def test_expand_as_errors():
    y = (np.zeros((5, 1), "float32"), [[2, 3]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_expand_as: X 'in_X_x_var' \[3, 2\] needs one row "
                                                       r"per sequence of Y 'in_Y_y_var' \[5, 1\] LoD \{\{0, 2, 5\}\}: "
                                                       r"2 rows, got 3"):
        run_op("sequence_expand_as", {"X": np.zeros((3, 2), "float32"), "Y": y}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_expand_as: Y 'in_Y_y_var' \[5, 1\] must be a "
                                                       r"LoDTensor with at least 1 LoD level"):
        run_op("sequence_expand_as", {"X": np.zeros((2, 2), "float32"), "Y": y[0]}, ["Out"])


def test_layers_build_and_train():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="float32")
        y = fluid.layers.data("y", shape=[1], dtype="float32", lod_level=1)
        h = fluid.layers.fc(x, size=4)
        a = fluid.layers.sequence_expand(h, y)
        b = fluid.layers.sequence_expand_as(h, y)
        assert a.shape == (-1, 4) and b.shape == (-1, 4) and a.lod_level == 0
        loss = fluid.layers.mean(fluid.layers.elementwise_add(a, b))
        fluid.optimizer.SGD(0.1).minimize(loss)
        with pytest.raises(TypeError, match=r"sequence_expand: 'x' \(ids\) must be float32 or float64 or int32 or "
                                            r"int64, got bool"):
            fluid.layers.sequence_expand(fluid.layers.data("ids", shape=[1], dtype="bool"), y)
        with pytest.raises(TypeError, match=r"sequence_expand_as: 'y' must be a Variable, got list"):
            fluid.layers.sequence_expand_as(x, [1, 2])
        with pytest.raises(TypeError, match=r"sequence_expand: 'y' must be a Variable, got ndarray"):
            fluid.layers.sequence_expand(x, np.zeros((2, 1)))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = RNG.uniform(-1, 1, (3, 3)).astype("float32")
    yv = (np.zeros((6, 1), "float32"), [[1, 0, 5]])
    got = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[a, b, loss], return_numpy=False)
    assert np.array(got[0]).shape == (6, 4) and got[0].recursive_sequence_lengths() == []
    assert got[1].recursive_sequence_lengths() == [[1, 0, 5]]
    np.testing.assert_array_equal(np.array(got[0]), np.array(got[1]))


def test_large_batch_splits_over_threads():
    """Enough rows (2 x 128 KiB) that the copies and the gradient's sums are split over the thread pool."""
    lens = RNG.randint(0, 60, size=64).tolist()
    repeats = RNG.randint(0, 4, size=64).tolist()
    x = RNG.uniform(-1, 1, (sum(lens), 64)).astype("float32")
    out, out_lens = expand_ref(x, lens, repeats)
    w = RNG.uniform(-1, 1, out.shape).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[64], dtype="float32", lod_level=1)
        xv.stop_gradient = False
        y = fluid.layers.data("y", shape=[1], dtype="float32", lod_level=1)
        wv = fluid.layers.data("w", shape=[64], dtype="float32")
        o = fluid.layers.sequence_expand(xv, y)
        dx, = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(o, wv))], [xv])
    feed = {"x": (x, [lens]), "y": (np.zeros((sum(repeats), 1), "float32"), [repeats]), "w": w}
    got_out, got_dx = run_program(main, feed, [o, dx])
    np.testing.assert_array_equal(np.array(got_out), out)
    assert got_out.recursive_sequence_lengths() == [out_lens]
    off, want, row = offsets(lens), np.zeros_like(x), 0
    for i, r in enumerate(repeats):  # each sequence's gradient: the sum of w over its copies
        for _ in range(r):
            want[off[i]:off[i + 1]] += w[row:row + lens[i]]
            row += lens[i]
    np.testing.assert_allclose(np.array(got_dx), want, rtol=1e-5, atol=1e-6)
