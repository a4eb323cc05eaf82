"""Tensor arrays (kernels/tensor_array_read_write.cc): write_to_array, read_from_array, lod_array_length and the
write_to_array_grad they generate, the layers create_array / array_write / array_read / array_length, fetching an
array (a list of numpy arrays, or a fluid.LoDTensorArray), sum over gradient arrays, and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, TensorArray

L = fluid.layers
ARRAY = core.VarDesc.VarType.LOD_TENSOR_ARRAY


def rand(*shape, seed=0, dtype="float64"):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(dtype)


def index(i):
    return np.array([i], "int64")


def run(main, feed=None, fetch_list=(), return_numpy=True, exe=None):
    exe = exe or fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed=feed or {}, fetch_list=list(fetch_list), return_numpy=return_numpy)


def const(i):
    return L.fill_constant(shape=[1], dtype="int64", value=i)


def guard(main, startup=None):
    """program_guard with fresh unique names (the messages below name the variables)."""
    return _Both(fluid.program_guard(main, startup or fluid.Program()), fluid.unique_name.guard())


class _Both:
    def __init__(self, *guards):
        self.guards = guards

    def __enter__(self):
        for g in self.guards:
            g.__enter__()

    def __exit__(self, *exc):
        for g in reversed(self.guards):
            g.__exit__(*exc)


# ------------------------------------------------------------------ write_to_array

@pytest.mark.parametrize("i", [0, 1, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_write_to_array_grows_a_fresh_array_to_i_plus_one(i, dtype):
    x = rand(4, 3, seed=i, dtype=dtype)
    t = OpTest("write_to_array", {"X": x, "I": index(i)}, {"Out": TensorArray([None] * i + [x])})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("lod", [[[2, 0, 3]], [[1], [5]], [[2, 1], [1, 3, 1]]])
def test_write_to_array_keeps_the_lod(lod):
    x = rand(5, 2)
    t = OpTest("write_to_array", {"X": (x, lod), "I": index(1)}, {"Out": TensorArray([None, (x, lod)])})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_write_to_array_moves_any_dtype(dtype):
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    OpTest("write_to_array", {"X": x, "I": index(0)}, {"Out": TensorArray([x])}).check_output()


def test_write_to_array_of_an_empty_tensor():
    x = np.zeros((0, 3), "float32")
    OpTest("write_to_array", {"X": x, "I": index(0)}, {"Out": TensorArray([x])}).check_output()


def test_write_into_an_array_keeps_its_other_entries_and_overwrites_one():
    main = fluid.Program()
    with guard(main):
        a = L.data("a", shape=[2], dtype="float32")
        b = L.data("b", shape=[3], dtype="float32", lod_level=1)
        c = L.data("c", shape=[4], dtype="float32")
        arr = L.create_array("float32")
        out = L.array_write(a, const(0), array=arr)
        L.array_write(b, const(4), array=arr)
        L.array_write(c, const(1), array=arr)
        L.array_write(c, const(0), array=arr)  # overwrites entry 0
    assert out is arr
    av, cv = rand(1, 2, dtype="float32"), rand(3, 4, dtype="float32")
    bv = fluid.create_lod_tensor(rand(5, 3, dtype="float32"), [[2, 3]], fluid.CPUPlace())
    got, = run(main, {"a": av, "b": bv, "c": cv}, [arr], return_numpy=False)
    assert len(got) == 5
    np.testing.assert_array_equal(np.array(got[0]), cv)
    np.testing.assert_array_equal(np.array(got[1]), cv)
    assert not got[2]._is_initialized() and not got[3]._is_initialized()
    np.testing.assert_array_equal(np.array(got[4]), np.array(bv))
    assert got[4].recursive_sequence_lengths() == [[2, 3]] and got[0].lod() == []


def test_written_entry_is_a_copy():
    # x changes after the write (in place): the entry keeps the value written
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[3], dtype="float32")
        y = L.scale(x, scale=1.0)
        arr = L.array_write(y, const(0))
        main.global_block().append_op(type="scale", inputs={"X": [y]}, outputs={"Out": [y]}, attrs={"scale": 5.0})
    xv = rand(2, 3, dtype="float32")
    got, yv = run(main, {"x": xv}, [arr, y])
    np.testing.assert_array_equal(got[0], xv)
    np.testing.assert_allclose(yv, 5 * xv, rtol=1e-6)


# ------------------------------------------------------------------ read_from_array

ENTRIES = [(rand(2, 3, seed=1), [[1, 1]]), (rand(4, 3, seed=2), [[3, 0, 1]]), (rand(1, 5, seed=3), None)]


@pytest.mark.parametrize("i", [0, 1, 2])
def test_read_from_array_reads_entry_i_with_its_lod(i):
    arr, lod = ENTRIES[i]
    want = arr if lod is None else (arr, lod)
    entries = [(a, lo) if lo is not None else a for a, lo in ENTRIES]
    t = OpTest("read_from_array", {"X": TensorArray(entries), "I": index(i)}, {"Out": want})
    t.check_output(atol=0, rtol=0)
    # Out@GRAD lands at entry i of the gradient array; the entries not read get zeros (write_to_array_grad)
    t.check_grad(["X"], "Out")


def test_read_from_array_two_level_lod_and_a_single_sequence():
    x2 = rand(6, 2)
    t = OpTest("read_from_array", {"X": TensorArray([(x2, [[2, 1], [1, 4, 1]]), (x2[:1], [[1]])]), "I": index(1)},
               {"Out": (x2[:1], [[1]])})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")
    OpTest("read_from_array", {"X": TensorArray([(x2, [[2, 1], [1, 4, 1]])]), "I": index(0)},
           {"Out": (x2, [[2, 1], [1, 4, 1]])}).check_output(atol=0, rtol=0)


def test_read_value_is_a_copy():
    # an op writing the read value in place does not change the array
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[3], dtype="float32")
        arr = L.array_write(x, const(0))
        r = L.array_read(arr, const(0))
        main.global_block().append_op(type="scale", inputs={"X": [r]}, outputs={"Out": [r]}, attrs={"scale": 3.0})
    xv = rand(2, 3, dtype="float32")
    got, rv = run(main, {"x": xv}, [arr, r])
    np.testing.assert_array_equal(got[0], xv)
    np.testing.assert_allclose(rv, 3 * xv, rtol=1e-6)


# ------------------------------------------------------------------ lod_array_length

@pytest.mark.parametrize("entries", [[], [rand(2, 2)], [rand(1, 2), None, rand(3, 1)], [rand(2)] * 5])
def test_lod_array_length(entries):
    OpTest("lod_array_length", {"X": TensorArray(entries)}, {"Out": index(len(entries))}).check_output()


def test_array_length_of_a_new_array_is_zero_and_it_fetches_as_an_empty_list():
    main = fluid.Program()
    with guard(main):
        arr = L.create_array("float64")
        n = L.array_length(arr)
    got, length = run(main, fetch_list=[arr, n])
    assert got == [] and length.tolist() == [0] and length.dtype == np.int64
    got, = run(main, fetch_list=[arr], return_numpy=False)
    assert isinstance(got, fluid.LoDTensorArray) and len(got) == 0


# ------------------------------------------------------------------ gradients through programs

def _write_read_program():
    """arr = [x, z, 2x] (entry 1 never read), loss = mean(3 * arr[2] + arr[0] + arr[0])."""
    main, startup = fluid.Program(), fluid.Program()
    with guard(main, startup):
        x = L.data("x", shape=[3], dtype="float64", stop_gradient=False)
        z = L.data("z", shape=[3], dtype="float64", stop_gradient=False)
        arr = L.array_write(x, const(0))
        L.array_write(z, const(1), array=arr)
        L.array_write(L.scale(x, scale=2.0), const(2), array=arr)
        a = L.array_read(arr, const(2))
        b = L.array_read(arr, const(0))
        c = L.array_read(arr, const(0))
        loss = L.mean(a * 3.0 + b + c)
        grads = fluid.gradients([loss], [x, z])
    return main, arr, grads


def test_gradients_of_reads_at_several_indices_add_up_and_unread_entries_get_zeros():
    main, arr, (gx, gz) = _write_read_program()
    types = [op.type for op in main.global_block().ops]
    assert types.count("write_to_array_grad") == 3 and "sum" in types
    grad_array = main.global_block().var(arr.name + "@GRAD")
    assert grad_array.type == ARRAY
    xv, zv = rand(2, 3), rand(2, 3, seed=1)
    got_x, got_z, got_arr = run(main, {"x": xv, "z": zv}, [gx, gz, grad_array])
    # d loss / d x = (3 * 2 + 1 + 1) / numel, per element; z's entry is never read
    np.testing.assert_allclose(got_x, np.full((2, 3), 8.0 / 6), rtol=1e-12)
    np.testing.assert_array_equal(got_z, np.zeros((2, 3)))
    assert len(got_arr) == 3 and got_arr[1] is None
    np.testing.assert_allclose(got_arr[0], np.full((2, 3), 2.0 / 6), rtol=1e-12)
    np.testing.assert_allclose(got_arr[2], np.full((2, 3), 3.0 / 6), rtol=1e-12)


def test_gradient_arrays_do_not_add_up_across_runs():
    main, arr, (gx, _) = _write_read_program()
    exe = fluid.Executor(fluid.CPUPlace())
    xv, zv = rand(2, 3), rand(2, 3, seed=1)
    for _ in range(3):
        np.testing.assert_allclose(run(main, {"x": xv, "z": zv}, [gx], exe=exe)[0], np.full((2, 3), 8.0 / 6),
                                   rtol=1e-12)


def test_gradient_keeps_the_lod_of_x():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float64", lod_level=1, stop_gradient=False)
        arr = L.array_write(x, const(1))
        loss = L.mean(L.array_read(arr, const(1)))
        gx, = fluid.gradients([loss], [x])
    xv = fluid.create_lod_tensor(rand(3, 2), [[1, 2]], fluid.CPUPlace())
    got, = run(main, {"x": xv}, [gx], return_numpy=False)
    assert got.recursive_sequence_lengths() == [[1, 2]]
    np.testing.assert_allclose(np.array(got), np.full((3, 2), 1.0 / 6), rtol=1e-12)


def test_sum_of_gradient_arrays_entry_by_entry():
    a0, a1, b1, b2 = rand(2, 2), rand(2, 2, seed=1), rand(2, 2, seed=2), rand(1, 3, seed=3)
    t = OpTest("sum", {"X": [("a", TensorArray([a0, a1])), ("b", TensorArray([None, b1, b2]))]},
               {"Out": TensorArray([a0, a1 + b1, b2])})
    t.check_output(atol=1e-12, rtol=1e-12)
    OpTest("sum", {"X": [("a", TensorArray([])), ("b", TensorArray([]))]}, {"Out": TensorArray([])}).check_output()


def test_sum_of_arrays_rejects_mismatched_entries_and_tensors():
    main = fluid.Program()
    block = main.global_block()
    with guard(main):
        a = L.array_write(L.data("a", shape=[2], dtype="float32"), const(0))
        b = L.array_write(L.data("b", shape=[3], dtype="float32"), const(0))
        out = L.create_array("float32")
        block.append_op(type="sum", inputs={"X": [a, b]}, outputs={"Out": [out]})
    feed = {"a": rand(1, 2, dtype="float32"), "b": rand(1, 3, dtype="float32")}
    with pytest.raises(core.EnforceNotMet, match=r"sum: entry 0 of array X\[1\] 'array_write_1.out' is float32 "
                                                 r"\[1, 3\], but the sum's entry 0 is float32 \[1, 2\]"):
        run(main, feed, [out])
    main = fluid.Program()
    block = main.global_block()
    with guard(main):
        a = L.array_write(L.data("a", shape=[2], dtype="float32"), const(0))
        t = L.data("t", shape=[2], dtype="float32")
        out = L.create_array("float32")
        block.append_op(type="sum", inputs={"X": [a, t]}, outputs={"Out": [out]})
    with pytest.raises(core.EnforceNotMet, match=r"sum: X\[1\] 't' holds a LoDTensor, but the other inputs or Out "
                                                 r"are LoDTensorArrays"):
        run(main, {"a": feed["a"], "t": feed["a"]}, [out])


# ------------------------------------------------------------------ runs

def test_each_run_starts_with_empty_arrays():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        i = L.data("i", shape=[1], dtype="int64", append_batch_size=False)
        arr = L.array_write(x, i)
        n = L.array_length(arr)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = rand(1, 2, dtype="float32")
    got, length = run(main, {"x": xv, "i": index(3)}, [arr, n], exe=exe)
    assert length.tolist() == [4] and len(got) == 4
    got, length = run(main, {"x": xv, "i": index(1)}, [arr, n], exe=exe)
    assert length.tolist() == [2] and got[0] is None
    np.testing.assert_array_equal(got[1], xv)


# ------------------------------------------------------------------ fetching and fluid.LoDTensorArray

def _lod_array_program():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32", lod_level=1)
        arr = L.array_write(x, const(1))
    return main, arr


def test_fetching_an_array_with_a_lod_entry():
    main, arr = _lod_array_program()
    xv = fluid.create_lod_tensor(rand(3, 2, dtype="float32"), [[2, 1]], fluid.CPUPlace())
    got, = run(main, {"x": xv}, [arr], return_numpy=False)
    assert isinstance(got, fluid.LoDTensorArray) and len(got) == 2
    assert got[1].recursive_sequence_lengths() == [[2, 1]] and not got[0]._is_initialized()
    # Fluid's as_numpy: an entry with a LoD cannot become a plain array
    with pytest.raises(RuntimeError, match="Some of your fetched tensors hold LoD information"):
        run(main, {"x": xv}, [arr])


def test_lod_tensor_array_is_list_like():
    assert fluid.LoDTensorArray is core.LoDTensorArray
    arr = fluid.LoDTensorArray()
    assert len(arr) == 0 and list(arr) == []
    tensors = []
    for k in range(3):
        t = fluid.LoDTensor()
        t.set(np.full((2, k + 1), k, "float32"), fluid.CPUPlace())
        arr.append(t)
        tensors.append(t)
    tensors[2].set_recursive_sequence_lengths([[1, 1]])
    arr.append(tensors[2])
    assert len(arr) == 4 and repr(arr) == "LoDTensorArray(4 entries)"
    assert [np.array(t).shape for t in arr] == [(2, 1), (2, 2), (2, 3), (2, 3)]
    assert arr[-1].recursive_sequence_lengths() == [[1, 1]] and arr[-4].shape() == [2, 1]
    arr[0] = tensors[1]
    np.testing.assert_array_equal(np.array(arr[0]), np.ones((2, 2), "float32"))
    with pytest.raises(IndexError, match=r"LoDTensorArray index 4 out of range \(length 4\)"):
        arr[4]  # noqa: B018
    with pytest.raises(IndexError, match=r"LoDTensorArray index -5 out of range \(length 4\)"):
        arr[-5] = tensors[0]
    moved = arr._move_to_list()
    assert len(moved) == 4 and len(arr) == 0


def test_an_array_in_the_scope():
    main, arr = _lod_array_program()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        xv = fluid.create_lod_tensor(rand(3, 2, dtype="float32"), [[2, 1]], fluid.CPUPlace())
        arr.persistable = True
        exe.run(main, feed={"x": xv})
    held = scope.find_var(arr.name).get_lod_tensor_array()
    assert len(held) == 2 and held[1].recursive_sequence_lengths() == [[2, 1]]


# ------------------------------------------------------------------ layers

def test_layers_names_types_and_shapes():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[3], dtype="float64", lod_level=1)
        arr = L.create_array("float32")
        assert arr.type == ARRAY and arr.dtype == core.VarDesc.VarType.FP32 and arr.name.startswith("array_")
        assert arr.name.endswith(".out")
        new = L.array_write(x, const(0))
        assert new.type == ARRAY and new.name.startswith("array_write_") and new.dtype == x.dtype
        assert new.shape == (-1, 3) and new.lod_level == 1
        r = L.array_read(new, const(0))
        assert r.type == core.VarDesc.VarType.LOD_TENSOR and r.shape == (-1, 3) and r.lod_level == 1
        n = L.array_length(new)
        assert n.dtype == core.VarDesc.VarType.INT64 and n.shape == (1,) and n.stop_gradient
    assert [op.type for op in main.global_block().ops if op.type != "fill_constant"] == [
        "write_to_array", "read_from_array", "lod_array_length"]
    assert "LOD_TENSOR_ARRAY.shape(-1, 3).dtype(float64).lod_level(1)" in str(new)


def test_layer_argument_errors():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[3], dtype="float32")
        i32 = L.fill_constant(shape=[1], dtype="int32", value=0)
        arr = L.create_array("float32")
        with pytest.raises(TypeError, match=r"array_write: 'i' \(fill_constant_0.tmp_0\) must be int64, got int32"):
            L.array_write(x, i32, array=arr)
        with pytest.raises(TypeError, match="array_write: 'i' must be a Variable, got int"):
            L.array_write(x, 0, array=arr)
        with pytest.raises(TypeError, match="array_write: 'x' must be a Variable, got ndarray"):
            L.array_write(np.ones(3), const(0), array=arr)
        with pytest.raises(TypeError, match=r"array_write: 'array' \(x\) must be a LoDTensorArray variable "
                                            r"\(layers.create_array\), got a LOD_TENSOR variable"):
            L.array_write(x, const(0), array=x)
        with pytest.raises(TypeError, match=r"array_read: 'array' \(x\) must be a LoDTensorArray variable"):
            L.array_read(x, const(0))
        with pytest.raises(TypeError, match=r"array_read: 'i' \(fill_constant_0.tmp_0\) must be int64, got int32"):
            L.array_read(arr, i32)
        with pytest.raises(TypeError, match="array_length: 'array' must be a Variable, got list"):
            L.array_length([])


# ------------------------------------------------------------------ errors at run time

def _read_program(length, at, dtype="int64"):
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        arr = L.create_array("float32")
        for k in range(length):
            L.array_write(x, const(k), array=arr)
        i = L.data("i", shape=[1], dtype=dtype, append_batch_size=False)
        main.global_block().append_op(type="read_from_array", inputs={"X": [arr], "I": [i]},
                                      outputs={"Out": [main.global_block().create_var(name="r", dtype="float32")]})
    return main, {"x": rand(1, 2, dtype="float32"), "i": np.array([at], dtype)}


def test_read_out_of_range_names_the_op_array_index_and_length():
    main, feed = _read_program(2, 2)
    with pytest.raises(core.EnforceNotMet, match=r"read_from_array: index I 'i' is 2, out of range for array X "
                                                 r"'array_0.out' of length 2"):
        run(main, feed, ["r"])
    main, feed = _read_program(0, 0)
    with pytest.raises(core.EnforceNotMet, match="out of range for array X 'array_0.out' of length 0"):
        run(main, feed, ["r"])


def test_negative_and_malformed_indices():
    main, feed = _read_program(2, -1)
    with pytest.raises(core.EnforceNotMet, match=r"read_from_array: index I 'i' is -1; an array index must be >= 0"):
        run(main, feed, ["r"])
    main, feed = _read_program(2, 0)
    with pytest.raises(core.EnforceNotMet, match=r"read_from_array: I 'i' must be a 1-element int32 or int64 tensor, "
                                                 r"got int64 \[2\]"):
        run(main, dict(feed, i=np.array([0, 1], "int64")), ["r"])
    with pytest.raises(core.EnforceNotMet, match=r"read_from_array: I 'i' \[1\] must be int32 or int64, got "
                                                 r"float32"):
        _read_program(2, 0, dtype="float32")


def test_write_index_beyond_the_limit():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        i = L.data("i", shape=[1], dtype="int64", append_batch_size=False)
        arr = L.array_write(x, i)
    with pytest.raises(core.EnforceNotMet, match=r"write_to_array: index I 'i' is 1099511627776, beyond the longest "
                                                 r"array fluidlite makes \(1048576 entries\); array Out "
                                                 r"'array_write_0.out'"):
        run(main, {"x": rand(1, 2, dtype="float32"), "i": index(1 << 40)}, [arr])
    with pytest.raises(core.EnforceNotMet, match=r"write_to_array: index I 'i' is -3; an array index must be >= 0"):
        run(main, {"x": rand(1, 2, dtype="float32"), "i": index(-3)}, [arr])


def test_reading_an_entry_never_written():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        arr = L.array_write(x, const(2))
        r = L.array_read(arr, const(1))
    with pytest.raises(core.EnforceNotMet, match=r"read_from_array: entry 1 of array X 'array_write_0.out' "
                                                 r"\(length 3\) was never written"):
        run(main, {"x": rand(1, 2, dtype="float32")}, [r])


def test_an_array_where_a_tensor_is_read_and_the_reverse():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        arr = L.array_write(x, const(0))
        m = L.mean(arr)
    with pytest.raises(core.EnforceNotMet, match=r"op mean: input X variable 'array_write_0.out' holds a "
                                                 r"LoDTensorArray, but mean reads a LoDTensor there"):
        run(main, {"x": rand(1, 2, dtype="float32")}, [m])
    # a LOD_TENSOR_ARRAY desc whose variable holds a LoDTensor (a program edited behind the layers' back)
    main = fluid.Program()
    with guard(main):
        arr = L.create_array("float32")
        arr.persistable = True
        n = L.array_length(arr)
    scope = fluid.Scope()
    scope.var(arr.name).get_tensor()
    with pytest.raises(core.EnforceNotMet, match="lod_array_length: input X variable 'array_0.out' holds a "
                                                 "LoDTensor, not a LoDTensorArray"):
        fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[n], scope=scope)


def test_build_time_index_checks():
    main = fluid.Program()
    block = main.global_block()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        arr = L.create_array("float32")
        two = L.fill_constant(shape=[2], dtype="int64", value=0)
        with pytest.raises(core.EnforceNotMet, match=r"write_to_array: index I 'fill_constant_0.tmp_0' \[2\] must "
                                                     r"hold exactly one element"):
            block.append_op(type="write_to_array", inputs={"X": [x], "I": [two]}, outputs={"Out": [arr]})
        with pytest.raises(core.EnforceNotMet, match=r"read_from_array: I 'x' \[-1, 2\] must be int32 or int64, "
                                                     r"got float32"):
            block.append_op(type="read_from_array", inputs={"X": [arr], "I": [x]}, outputs={"Out": [x]})
        with pytest.raises(core.EnforceNotMet, match=r"read_from_array: X 'x' is a LOD_TENSOR variable, not a "
                                                     r"LOD_TENSOR_ARRAY \(layers.create_array\)"):
            block.append_op(type="read_from_array", inputs={"X": [x], "I": [const(0)]}, outputs={"Out": [x]})
        with pytest.raises(core.EnforceNotMet, match=r"write_to_array: X 'array_0.out' is a LOD_TENSOR_ARRAY; an "
                                                     r"array entry is a LoDTensor"):
            block.append_op(type="write_to_array", inputs={"X": [arr], "I": [const(0)]}, outputs={"Out": [arr]})


def test_ops_appear_in_the_profile():
    main = fluid.Program()
    with guard(main):
        x = L.data("x", shape=[2], dtype="float32")
        arr = L.array_write(x, const(0))
        r = L.array_read(arr, const(0))
        n = L.array_length(arr)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed={"x": rand(3, 2, dtype="float32")}, fetch_list=[r, n])
    ops = {e["name"]: e for e in fluid.profiler.events() if e["category"] == "Operator"}
    assert {"write_to_array", "read_from_array", "lod_array_length"} <= set(ops)
    assert ops["write_to_array"]["args"].startswith('"inputs":"X[3, 2], I[1]","outputs":"",')
    assert ops["read_from_array"]["args"].startswith('"inputs":"I[1]","outputs":"Out[3, 2]",')

