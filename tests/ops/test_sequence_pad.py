"""sequence_pad and sequence_unpad: forward against numpy written per sequence, Length's shape and dtype, the
output LoD, gradients, the layers (pad then unpad is the identity) and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest
from sequence_op_cases import offsets, run_op

RNG = np.random.RandomState(11)


def pad_ref(x, lens, pad_value, padded):
    """Out[i] = x's sequence i followed by pad_value steps up to `padded` rows; Length = lens (int64 [N])."""
    o = offsets(lens)
    step = x.shape[1:]
    out = np.empty((len(lens), padded) + step, x.dtype)
    for i, n in enumerate(lens):
        out[i, :n] = x[o[i]:o[i + 1]]
        out[i, n:] = np.broadcast_to(pad_value.reshape(step) if pad_value.size > 1 else pad_value[0], step)
    return out, np.array(lens, "int64")


@pytest.mark.parametrize("lens, step, pad_shape, maxlen", [
    ([2, 3], (1,), (1,), 4),             # Fluid's case 1: padded_length 4
    ([2, 3], (2,), (1,), -1),            # case 2: one pad value, the longest sequence's length
    ([2, 3], (2,), (2,), -1),            # case 3: a pad step
    ([0, 3, 1], (2, 3), (2, 3), 5),      # an empty sequence, rank-3 steps
    ([4], (3,), (1,), -1),               # a single sequence, no padding at all
    ([1, 1, 1], (2,), (1,), 2),          # one-element sequences
])
def test_pad(lens, step, pad_shape, maxlen):
    x = RNG.uniform(-1, 1, (sum(lens),) + step)
    pad = RNG.uniform(-1, 1, pad_shape)
    out, length = pad_ref(x, lens, pad, maxlen if maxlen > 0 else max(lens))
    t = OpTest("sequence_pad", {"X": (x, [lens]), "PadValue": pad}, {"Out": out, "Length": length},
               {"padded_length": maxlen})
    t.check_output()
    t.check_grad(["X"], "Out")
    got = run_op("sequence_pad", t.inputs, ["Out", "Length"], t.attrs)
    assert got["Out"].recursive_sequence_lengths() == [] and got["Length"].recursive_sequence_lengths() == []


def test_pad_two_levels_keeps_the_upper_level_and_integers():
    lens = [2, 1, 3]
    x = np.arange(12, dtype="int32").reshape(6, 2)
    out, length = pad_ref(x, lens, np.array([-1], "int32"), 3)
    OpTest("sequence_pad", {"X": (x, [[1, 2], lens]), "PadValue": np.array([-1], "int32")},
           {"Out": (out, [[1, 2]]), "Length": length}).check_output()
    OpTest("sequence_pad", {"X": (x.astype("int64"), [lens]), "PadValue": np.array([7, 8], "int64")},
           {"Out": pad_ref(x.astype("int64"), lens, np.array([7, 8]), 3)[0], "Length": length}).check_output()


def unpad_ref(x, length):
    """The first length[i] rows of each x[i], as rows of a LoDTensor; a rank-2 x gives [rows, 1]."""
    parts = [x[i, :n] for i, n in enumerate(length)]
    out = np.concatenate(parts)
    return out.reshape(-1, 1) if x.ndim == 2 else out


@pytest.mark.parametrize("shape, length", [
    ((3, 5), [2, 3, 4]),                 # Fluid's example: rank 2 gives [9, 1]
    ((3, 4, 2), [0, 4, 1]),              # an empty sequence, a full one
    ((1, 3, 2, 2), [3]),                 # a single sequence, rank 4
    ((2, 1, 3), [1, 1]),                 # one-element sequences
])
def test_unpad(shape, length):
    x = RNG.uniform(-1, 1, shape)
    t = OpTest("sequence_unpad", {"X": x, "Length": np.array(length, "int64")},
               {"Out": (unpad_ref(x, length), [length])})
    t.check_output()
    t.check_grad(["X"], "Out")
    OpTest("sequence_unpad", {"X": x.astype("int32"), "Length": np.array(length, "int64")},
           {"Out": (unpad_ref(x.astype("int32"), length), [length])}).check_output()


def test_pad_errors():
    x = (np.zeros((5, 2), "float32"), [[2, 3]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pad: padded_length = 2 is shorter than sequence 1 of "
                                                       r"X 'in_X_x_var' LoD \{\{0, 2, 5\}\} \(3 rows\); it must be -1 "
                                                       r"\(the longest sequence\) or at least 3"):
        run_op("sequence_pad", {"X": x, "PadValue": np.zeros(1, "float32")}, ["Out", "Length"], {"padded_length": 2})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pad: PadValue 'in_PadValue_padvalue_var' \[3\] must "
                                                       r"be \[1\] \(one value\) or one step's shape \[2\] \(X "
                                                       r"'in_X_x_var' \[5, 2\]\)"):
        run_op("sequence_pad", {"X": x, "PadValue": np.zeros(3, "float32")}, ["Out", "Length"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pad: PadValue 'in_PadValue_padvalue_var' is float64 "
                                                       r"but X 'in_X_x_var' is float32"):
        run_op("sequence_pad", {"X": x, "PadValue": np.zeros(1, "float64")}, ["Out", "Length"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pad: X 'in_X_x_var' \[5, 2\] must be a LoDTensor"):
        run_op("sequence_pad", {"X": x[0], "PadValue": np.zeros(1, "float32")}, ["Out", "Length"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_pad: attribute 'padded_length' = -2 is invalid"):
        run_op("sequence_pad", {"X": x, "PadValue": np.zeros(1, "float32")}, ["Out", "Length"], {"padded_length": -2})


def test_unpad_errors():
    x = np.zeros((2, 3, 2), "float32")
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_unpad: Length\[1\] = 4 of Length "
                                                       r"'in_Length_length_var' is outside \[0, 3\] \(X 'in_X_x_var' "
                                                       r"\[2, 3, 2\] holds sequences of up to 3 rows\)"):
        run_op("sequence_unpad", {"X": x, "Length": np.array([1, 4], "int64")}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_unpad: Length 'in_Length_length_var' \[3\] must be "
                                                       r"\[N\] for X 'in_X_x_var' \[2, 3, 2\]"):
        run_op("sequence_unpad", {"X": x, "Length": np.array([1, 1, 1], "int64")}, ["Out"])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_unpad: Length 'in_Length_length_var' \[2\] must be "
                                                       r"int64, got int32"):
        run_op("sequence_unpad", {"X": x, "Length": np.array([1, 1], "int32")}, ["Out"])


def test_layers_round_trip_and_training():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3], dtype="float32", lod_level=1)
        h = fluid.layers.fc(x, size=2)
        pad_value = fluid.layers.assign(np.array([0.0], "float32"))
        padded, length = fluid.layers.sequence_pad(h, pad_value)
        fixed, _ = fluid.layers.sequence_pad(h, pad_value, maxlen=6)
        assert padded.shape == (-1, -1, 2) and fixed.shape == (-1, 6, 2) and length.shape == (-1,)
        assert length.dtype == fluid.core.VarDesc.VarType.INT64 and pad_value.stop_gradient and length.stop_gradient
        back = fluid.layers.sequence_unpad(padded, length)
        assert back.shape == (-1, 2) and back.lod_level == 1
        loss = fluid.layers.mean(fluid.layers.square(back)) + fluid.layers.mean(fixed)
        fluid.optimizer.SGD(0.1).minimize(loss)
        with pytest.raises(TypeError, match=r"fluid.layers.sequence_unpad: 'length' \S+ must be int64, got int32"):
            fluid.layers.sequence_unpad(padded, fluid.layers.cast(length, "int32"))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = RNG.uniform(-1, 1, (6, 3)).astype("float32")
    feed = {"x": (xv, [[1, 5, 0]])}
    got = exe.run(main, feed=feed, fetch_list=[h, padded, length, back], return_numpy=False)
    assert np.array(got[1]).shape == (3, 5, 2)
    np.testing.assert_array_equal(np.array(got[2]), [1, 5, 0])
    np.testing.assert_array_equal(np.array(got[3]), np.array(got[0]))
    assert got[3].recursive_sequence_lengths() == [[1, 5, 0]]
    first, = exe.run(main, feed=feed, fetch_list=[loss])
    second, = exe.run(main, feed=feed, fetch_list=[loss])
    assert second < first


def test_large_batch_splits_over_threads():
    """Enough rows (2 x 128 KiB) that the data and pad runs are split over the thread pool, runs cut mid-way."""
    lens = RNG.randint(0, 100, size=64).tolist()
    x = RNG.uniform(-1, 1, (sum(lens), 32)).astype("float32")
    step = RNG.uniform(-1, 1, 32).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.layers.data("x", shape=[32], dtype="float32", lod_level=1)
        pad = fluid.layers.data("pad", shape=[32], dtype="float32", append_batch_size=False)
        out, length = fluid.layers.sequence_pad(xv, pad, maxlen=120)
        back = fluid.layers.sequence_unpad(out, length)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": (x, [lens]), "pad": step}, fetch_list=[out, back],
                                               return_numpy=False)
    np.testing.assert_array_equal(np.array(got[0]), pad_ref(x, lens, step, 120)[0])
    np.testing.assert_array_equal(np.array(got[1]), x)
    assert got[1].recursive_sequence_lengths() == [lens]
