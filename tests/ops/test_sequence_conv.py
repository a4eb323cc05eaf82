"""sequence_conv (and the sequence_conv layer): forward against a numpy context projection written per sequence and
per row, zero and trainable padding for every kind of window (centred, all before, all after, skipping rows),
sequences shorter than the window, empty and one-element sequences, a single sequence, two LoD levels, numeric
gradients for X, Filter and PaddingData, the layer's parameters, and errors at build and run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare

rng = np.random.RandomState(13)


def offsets(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(int)


def pads(start, length):
    """(up_pad, down_pad) of a window."""
    return max(0, -start), max(0, start + length - 1)


def np_context(x, lens, start, length, pad=None):
    """[T, length * D]: row t of each sequence holds its context rows t + start + j side by side; rows outside the
    sequence are zeros, or PaddingData rows (r < 0: r + up_pad; r >= L: up_pad + r - L)."""
    d = x.shape[1]
    up, _ = pads(start, length)
    col = np.zeros((x.shape[0], length * d), x.dtype)
    for b, n in zip(offsets(lens), lens):
        seq = x[b:b + n]
        for t in range(n):
            for j in range(length):
                r = t + start + j
                if 0 <= r < n:
                    row = seq[r]
                elif pad is None:
                    continue
                else:
                    row = pad[r + up] if r < 0 else pad[up + r - n]
                col[b + t, j * d:(j + 1) * d] = row
    return col


def fluid_padding_placement(n, start, length):
    """{(t, j): PaddingData row} as Fluid 1.8's ContextProjectFunctor writes it (math/context_project.h, its
    "add up pad" and "add down pad" loops transliterated), for one sequence of length n."""
    up, down = pads(start, length)
    placed = {}
    if up > 0:
        for k in range(min(up, n)):
            size = length if k + length < up else up - k
            for j in range(size):
                placed[(k, j)] = k + j
    if down > 0:
        begin_row = max(0, (n - start - length) + 1) + 1
        padding_begin = max(0, start - n)
        size = 1 if n - start >= length else length - (n - start)
        if start >= n:
            size = length
        idx = padding_begin
        t = 0
        while t + begin_row <= n:
            if start >= n:
                size = length
            if size > length:
                size, idx = length, idx + 1
            if padding_begin > 0 or n == start:
                idx = padding_begin + t
            first = (begin_row + t) * length - size
            for q in range(size):
                placed[divmod(first + q, length)] = up + idx + q
            t, size = t + 1, size + 1
    return placed


def test_padding_rows_are_where_fluids_context_project_puts_them():
    # np_context's rule for the PaddingData rows is Fluid's placement, for every window and sequence length here
    for length in range(1, 7):
        for start in range(-8, 8):
            for n in range(1, 12):
                up, _ = pads(start, length)
                rule = {(t, j): (t + start + j + up if t + start + j < 0 else up + t + start + j - n)
                        for t in range(n) for j in range(length) if not 0 <= t + start + j < n}
                assert fluid_padding_placement(n, start, length) == rule, (n, start, length)


# (contextStart, contextLength): centred, Fluid's default for 4, a single row, all rows after, skipping rows, all
# rows before, a window longer than most sequences
WINDOWS = [(-1, 3), (-2, 4), (0, 1), (0, 3), (2, 2), (-3, 2), (-4, 7)]
LENGTHS = {
    "ragged": [3, 1, 5, 2],
    "empty_sequences": [0, 4, 0, 1],
    "single_sequence": [6],
    "one_element_each": [1, 1, 1],
    "all_empty": [0, 0],
}


def conv_test(lens, start, length, trainable, dtype="float64", d=3, m=4, upper=None):
    x = rng.uniform(-1, 1, (sum(lens), d)).astype(dtype)
    w = rng.uniform(-1, 1, (length * d, m)).astype(dtype)
    inputs = {"X": (x, (upper or []) + [lens]), "Filter": w}
    pad = None
    if trainable:
        pad = rng.uniform(-1, 1, (sum(pads(start, length)), d)).astype(dtype)
        inputs["PaddingData"] = pad
    out = np_context(x, lens, start, length, pad) @ w
    attrs = {"contextStart": start, "contextLength": length, "paddingTrainable": trainable}
    return OpTest("sequence_conv", inputs, {"Out": (out, (upper or []) + [lens])}, attrs)


@pytest.mark.parametrize("case", sorted(LENGTHS))
@pytest.mark.parametrize("window", WINDOWS, ids=str)
@pytest.mark.parametrize("trainable", [False, True])
def test_forward(case, window, trainable):
    if trainable and window == (0, 1):
        pytest.skip("no padding to train (an error: test_op_errors)")
    conv_test(LENGTHS[case], *window, trainable).check_output()


@pytest.mark.parametrize("trainable", [False, True])
def test_forward_float32(trainable):
    conv_test([4, 0, 2, 7], -2, 4, trainable, dtype="float32", d=8, m=5).check_output(atol=1e-5, rtol=1e-4)


def test_two_levels_use_the_last_and_keep_both():
    conv_test([2, 3, 0, 4], -1, 3, True, upper=[[3, 1]]).check_output()


def test_zero_padding_numbers():
    # X rows 1, 2 | 3 (two sequences), D = 1, window [-1, 0, 1], filter weights 1, 10, 100
    x = np.array([[1.0], [2.0], [3.0]])
    w = np.array([[1.0], [10.0], [100.0]])
    want = [[0 + 10 + 200], [1 + 20 + 0], [0 + 30 + 0]]
    OpTest("sequence_conv", {"X": (x, [[2, 1]]), "Filter": w}, {"Out": np.array(want)},
           {"contextStart": -1, "contextLength": 3}).check_output()
    # trainable padding: the row before each sequence is PaddingData[0], the row after it PaddingData[1]
    pad = np.array([[5.0], [7.0]])
    want = [[5 + 10 + 200], [1 + 20 + 700], [5 + 30 + 700]]
    OpTest("sequence_conv", {"X": (x, [[2, 1]]), "Filter": w, "PaddingData": pad}, {"Out": np.array(want)},
           {"contextStart": -1, "contextLength": 3, "paddingTrainable": True}).check_output()


@pytest.mark.parametrize("case", sorted(LENGTHS))
@pytest.mark.parametrize("window", [(-1, 3), (-2, 4), (2, 2), (-3, 2)], ids=str)
@pytest.mark.parametrize("trainable", [False, True])
def test_grad(case, window, trainable):
    slots = ["X", "Filter"] + (["PaddingData"] if trainable else [])
    conv_test(LENGTHS[case], *window, trainable, d=2, m=3).check_grad(slots, "Out")


def test_grad_window_longer_than_the_sequences_two_levels():
    conv_test([2, 1, 3], -4, 7, True, d=2, m=2, upper=[[1, 2]]).check_grad(["X", "Filter", "PaddingData"], "Out")


def test_grad_of_one_input_only():
    conv_test([3, 2], -1, 3, True, d=2, m=2).check_grad(["Filter"], "Out")
    conv_test([3, 2], -1, 3, True, d=2, m=2).check_grad(["PaddingData"], "Out")


def test_untrainable_padding_data_is_ignored_and_gets_zero_gradient():
    x = rng.uniform(-1, 1, (5, 2))
    w = rng.uniform(-1, 1, (6, 3))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[2], dtype="float64", lod_level=1)
        pv = fluid.layers.data("p", shape=[2, 2], dtype="float64", append_batch_size=False)
        wv = fluid.layers.data("w", shape=[6, 3], dtype="float64", append_batch_size=False)
        for v in (xv, pv, wv):
            v.stop_gradient = False
        out = main.global_block().create_var(name="out", dtype="float64")
        main.global_block().append_op(type="sequence_conv", inputs={"X": [xv], "Filter": [wv], "PaddingData": [pv]},
                                      outputs={"Out": [out]}, attrs={"contextStart": -1, "contextLength": 3})
        grads = fluid.gradients([fluid.layers.reduce_sum(out)], [xv, pv, wv])
    got = [np.array(t) for t in fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": (x, [[3, 2]]), "p": np.ones((2, 2)), "w": w}, fetch_list=[out] + grads, return_numpy=False)]
    np.testing.assert_allclose(got[0], np_context(x, [3, 2], -1, 3) @ w)
    np.testing.assert_array_equal(got[2], np.zeros((2, 2)))
    np.testing.assert_allclose(got[3], np_context(x, [3, 2], -1, 3).T @ np.ones((5, 3)))


# ------------------------------------------------------------------ the layer

def test_layer_parameters_bias_and_act():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="float32", lod_level=1)
        y = fluid.layers.sequence_conv(x, num_filters=5, filter_size=4, act="tanh")
        z = fluid.layers.sequence_conv(x, num_filters=2, padding_start=0, bias_attr=False, name="plain")
    assert y.shape == (-1, 5) and y.lod_level == 1
    params = {p.name: p.shape for p in main.global_block().all_parameters()}
    assert params == {"sequence_conv_0.w_0": (12, 5), "sequence_conv_0.b_0": (5,), "plain.w_0": (9, 2)}
    ops = main.global_block().ops
    assert [op.type for op in ops] == ["sequence_conv", "elementwise_add", "tanh", "sequence_conv"]
    assert (ops[0].attr("contextStart"), ops[0].attr("contextLength"), ops[0].attr("contextStride"),
            ops[0].attr("paddingTrainable")) == (-2, 4, 1, False)  # padding_start: -(filter_size // 2)
    assert (ops[3].attr("contextStart"), ops[3].attr("contextLength")) == (0, 3)
    assert ops[1].attr("axis") == 1
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = rng.uniform(-1, 1, (6, 3)).astype("float32")
    gy, gz = exe.run(main, feed={"x": (xv, [[4, 2]])}, fetch_list=[y, z], scope=scope, return_numpy=False)
    w0, b0, w1 = (np.array(scope.find_var(n).get_tensor()) for n in ("sequence_conv_0.w_0", "sequence_conv_0.b_0",
                                                                      "plain.w_0"))
    np.testing.assert_allclose(np.array(gy), np.tanh(np_context(xv, [4, 2], -2, 4) @ w0 + b0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(gz), np_context(xv, [4, 2], 0, 3) @ w1, rtol=1e-5, atol=1e-6)
    assert gy.recursive_sequence_lengths() == [[4, 2]]


def test_layer_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", shape=[3], dtype="float32", lod_level=1)
        ids = fluid.layers.data("ids", shape=[1], dtype="int64", lod_level=1)
        x3 = fluid.layers.data("x3", shape=[2, 3], dtype="float32", lod_level=1)
        with pytest.raises(TypeError, match=r"sequence_conv: 'input' \(ids\) must be float32 or float64, got int64"):
            fluid.layers.sequence_conv(ids, 4)
        with pytest.raises(ValueError, match=r"sequence_conv: input 'x3' must be 2-D \[T, D\], got shape "
                                             r"\[-1, 2, 3\]"):
            fluid.layers.sequence_conv(x3, 4)
        with pytest.raises(ValueError, match="sequence_conv: filter_stride must be 1 .*got 2"):
            fluid.layers.sequence_conv(x, 4, filter_stride=2)
        with pytest.raises(ValueError, match="sequence_conv: filter_size must be an int >= 1, got 0"):
            fluid.layers.sequence_conv(x, 4, filter_size=0)


# ------------------------------------------------------------------ op errors

def _append(attrs, x_shape=(-1, 3), w_shape=(9, 4), pad_shape=None):
    main = fluid.Program()
    block = main.global_block()
    inputs = {"X": [declare(block, "x", list(x_shape))], "Filter": [declare(block, "w", list(w_shape))]}
    if pad_shape is not None:
        inputs["PaddingData"] = [declare(block, "pad", list(pad_shape))]
    out = declare(block, "out", None)
    block.append_op(type="sequence_conv", inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    return main, out


def test_op_errors():
    E = fluid.core.EnforceNotMet
    with pytest.raises(E, match="sequence_conv: attribute 'contextLength' is required"):
        _append({})
    with pytest.raises(E, match=r"attribute 'contextStride' = 2 is invalid: sequence_conv supports only "
                                r"contextStride = 1"):
        _append({"contextLength": 3, "contextStride": 2})
    with pytest.raises(E, match=r"attribute 'contextLength' = 0 is invalid"):
        _append({"contextLength": 0})
    with pytest.raises(E, match=r"sequence_conv: Filter 'w' \[8, 4\] must have contextLength \* D = 3 \* 3 = 9 rows "
                                r"for X 'x' \[-1, 3\]"):
        _append({"contextLength": 3}, w_shape=(8, 4))
    with pytest.raises(E, match=r"sequence_conv: X 'x' \[-1, 3, 1\] must be 2-D"):
        _append({"contextLength": 3}, x_shape=(-1, 3, 1))
    with pytest.raises(E, match=r"sequence_conv: paddingTrainable needs the PaddingData input \[2, D\]"):
        _append({"contextLength": 3, "contextStart": -1, "paddingTrainable": True})
    with pytest.raises(E, match=r"sequence_conv: PaddingData 'pad' \[3, 3\] must be \[up_pad \+ down_pad, D\] = "
                                r"\[2, 3\] for contextStart -1 and contextLength 3"):
        _append({"contextLength": 3, "contextStart": -1, "paddingTrainable": True}, pad_shape=(3, 3))
    with pytest.raises(E, match="sequence_conv: paddingTrainable must be false when contextStart is 0 and "
                                "contextLength is 1"):
        _append({"contextLength": 1, "paddingTrainable": True}, w_shape=(3, 4), pad_shape=(0, 3))


def test_run_time_errors():
    main, out = _append({"contextLength": 3, "contextStart": -1})
    exe = fluid.Executor(fluid.CPUPlace())
    w = np.zeros((9, 4), "float32")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_conv: X 'x' \[5, 3\] must be a LoDTensor with at "
                                                       r"least 1 LoD level"):
        exe.run(main, feed={"x": np.zeros((5, 3), "float32"), "w": w}, fetch_list=[out])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_conv: Filter 'w' \[6, 4\] must have contextLength"):
        exe.run(main, feed={"x": (np.zeros((5, 3), "float32"), [[2, 3]]), "w": np.zeros((6, 4), "float32")},
                fetch_list=[out])
    got, = exe.run(main, feed={"x": (np.ones((5, 3), "float32"), [[2, 3]]), "w": np.ones((9, 4), "float32")},
                   fetch_list=[out], return_numpy=False)
    got = np.array(got)
    np.testing.assert_array_equal(got[:, 0], [6, 6, 6, 9, 6])


@pytest.fixture
def two_threads():
    saved = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    yield
    fluid.core.set_num_threads(saved)


@pytest.mark.parametrize("trainable", [False, True])
def test_large_batch_split_over_threads(trainable, two_threads):
    # 64 sequences of 0-100 rows x 32 channels, window of 4: the context matrix and X@GRAD split over two threads.
    # The gradients against their closed forms per sequence: X@GRAD[r] = sum of dCol blocks that read row r,
    # Filter@GRAD = Col^T dOut, PaddingData@GRAD = sum of dCol blocks that read each padding row.
    lens = list(np.random.RandomState(4).randint(0, 101, size=64))
    start, length, d, m = -2, 4, 32, 8
    x = rng.uniform(-1, 1, (sum(lens), d))
    w = rng.uniform(-1, 1, (length * d, m))
    pad = rng.uniform(-1, 1, (sum(pads(start, length)), d)) if trainable else None
    dout = rng.uniform(-1, 1, (sum(lens), m))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[d], dtype="float64", lod_level=1)
        wv = fluid.layers.data("w", shape=[length * d, m], dtype="float64", append_batch_size=False)
        gv = fluid.layers.data("g", shape=[m], dtype="float64")
        ins = {"X": [xv], "Filter": [wv]}
        wrt = [xv, wv]
        if trainable:
            pv = fluid.layers.data("p", shape=list(pad.shape), dtype="float64", append_batch_size=False)
            ins["PaddingData"] = [pv]
            wrt.append(pv)
        for v in wrt:
            v.stop_gradient = False
        out = main.global_block().create_var(name="out", dtype="float64")
        main.global_block().append_op(type="sequence_conv", inputs=ins, outputs={"Out": [out]},
                                      attrs={"contextStart": start, "contextLength": length,
                                             "paddingTrainable": trainable})
        grads = fluid.gradients([fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, gv))], wrt)
    feed = {"x": (x, [lens]), "w": w, "g": dout}
    if trainable:
        feed["p"] = pad
    got = [np.array(t) for t in fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out] + grads,
                                                                     return_numpy=False)]
    col = np_context(x, lens, start, length, pad)
    np.testing.assert_allclose(got[0], col @ w, rtol=1e-12, atol=1e-12)
    dcol = dout @ w.T
    dx, dpad = np.zeros_like(x), None if pad is None else np.zeros_like(pad)
    up, _ = pads(start, length)
    for b, n in zip(offsets(lens), lens):
        for t in range(n):
            for j in range(length):
                r, block = t + start + j, dcol[b + t, j * d:(j + 1) * d]
                if 0 <= r < n:
                    dx[b + r] += block
                elif dpad is not None:
                    dpad[r + up if r < 0 else up + r - n] += block
    np.testing.assert_allclose(got[1], dx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[2], col.T @ dout, rtol=1e-10, atol=1e-10)
    if trainable:
        np.testing.assert_allclose(got[3], dpad, rtol=1e-10, atol=1e-10)
