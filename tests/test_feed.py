"""Feeding as Fluid 1.x scripts do: fluid.data (checked) vs layers.data (not checked), Python values as
feeds, LoDTensors with LoD through Executor.run, the LoDTensor methods, places, and fetched losses that
float() accepts on numpy >= 2.4."""
import os
import pickle

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name
from fluidlite.numpy_compat import ScalarArray


@pytest.fixture(scope="module")
def exe():
    return fluid.Executor(fluid.CPUPlace())


# ---------------------------------------------------------------- fluid.data

def test_fluid_data_declares_its_shape_literally():
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        a = fluid.data(name="a", shape=[None, 3, 4])
        b = fluid.data(name="b", shape=(2, -1), dtype="int64", lod_level=1)
        c = fluid.layers.data(name="c", shape=[None, 3])  # None: no batch dim appended (Fluid 1.6+)
        d = fluid.layers.data(name="d", shape=[3])
    assert a.shape == (-1, 3, 4) and a.dtype == fluid.core.VarDesc.VarType.FP32 and a.lod_level == 0
    assert b.shape == (2, -1) and b.dtype == fluid.core.VarDesc.VarType.INT64 and b.lod_level == 1
    assert c.shape == (-1, 3) and d.shape == (-1, 3)
    for v in (a, b):
        assert v.is_data and v.need_check_feed and v.stop_gradient and not v.persistable
        assert main.global_block().var(v.name) is v
    assert c.is_data and not c.need_check_feed and not d.need_check_feed
    with pytest.raises(TypeError, match=r"fluid.data: shape of 'e' must hold ints or None, got \[2, 'x'\]"):
        fluid.data(name="e", shape=[2, "x"])
    with pytest.raises(TypeError, match="fluid.data: shape of 'e' must be a list or tuple, got int"):
        fluid.data(name="e", shape=3)


def test_fluid_data_feed_is_checked_dims_of_minus_one_accept_any(exe):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 2, 3], dtype="float64")
        y = fluid.layers.scale(x, scale=3.0)
    for rows in (1, 5):
        v = np.random.RandomState(rows).rand(rows, 2, 3)
        r, = exe.run(main, feed={"x": v}, fetch_list=[y])
        np.testing.assert_allclose(r, v * 3)
    with pytest.raises(ValueError, match=r"The fed Variable 'x' should have dimensions = 3, shape = \[-1, 2, 3\], "
                                         r"but received fed shape \[4, 3, 2\] on each device"):
        exe.run(main, feed={"x": np.ones((4, 3, 2))}, fetch_list=[y])
    with pytest.raises(core.EnforceNotMet, match="The data type of fed Variable 'x' must be float64, but received "
                                                 "float32"):
        exe.run(main, feed={"x": np.ones((4, 2, 3), "float32")}, fetch_list=[y])


def test_lstm_lm_float_label_fed_int64_trains(exe):
    """Fluid's LSTM language model declares its label float32 (layers.data) and feeds int64 into
    softmax_with_cross_entropy: the fed dtype wins and the model trains."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1  # a fixed initialisation: unseeded, 30 steps ended at 0.59-0.60 of the first loss
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[-1, 8], dtype="float32", append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[-1, 1], dtype="float32", append_batch_size=False)
        logits = fluid.layers.fc(x, size=5)
        loss = fluid.layers.softmax_with_cross_entropy(logits=logits, label=y, soft_label=False)
        avg = fluid.layers.reduce_mean(loss)
        fluid.optimizer.SGD(0.5).minimize(avg)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(0)
    xv = rng.randn(32, 8).astype("float32")
    yv = rng.randint(0, 5, (32, 1)).astype("int64")
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    b = np.array(scope.find_var("fc_0.b_0").get_tensor())
    z = xv @ w + b
    ref = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(32), yv[:, 0]])
    losses = [float(exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[avg], scope=scope)[0]) for _ in range(30)]
    np.testing.assert_allclose(losses[0], ref, rtol=1e-5)
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.6 * losses[0], losses
    with pytest.raises(core.EnforceNotMet, match="softmax_with_cross_entropy: hard Label 'y' must be int64, got "
                                                 "float32"):
        exe.run(main, feed={"x": xv, "y": yv.astype("float32")}, fetch_list=[avg], scope=scope)


# ---------------------------------------------------------------- fed values

def _scale_prog(dtype="float32", shape=(3,)):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=list(shape), dtype=dtype)
        y = fluid.layers.scale(x, scale=2.0)
    return main, y


def test_scalars_and_lists_are_fed_with_the_declared_dtype(exe):
    main, y = _scale_prog("float32", [1])
    r, = exe.run(main, feed={"x": 3}, fetch_list=[y])
    assert r.dtype == np.float32 and r.shape == (1,) and r[0] == 6
    r, = exe.run(main, feed={"x": np.float64(1.5)}, fetch_list=[y])
    assert r.dtype == np.float32 and r.tolist() == [3.0]
    r, = exe.run(main, feed={"x": [[1], [2]]}, fetch_list=[y])
    assert r.dtype == np.float32 and r.tolist() == [[2.0], [4.0]]
    main, y = _scale_prog("int64", [2])
    r, = exe.run(main, feed={"x": ((1, 2), (3, 4))}, fetch_list=[y])
    assert r.dtype == np.int64 and r.tolist() == [[2, 4], [6, 8]]


def test_ragged_lists_and_object_arrays_raise_with_fluids_hint(exe):
    main, y = _scale_prog()
    with pytest.raises(TypeError, match=r"feed: variable 'x': failed to convert the fed list to a regular ndarray: "
                                        r".*nested lists of different lengths.*'fluid.create_lod_tensor'"):
        exe.run(main, feed={"x": [[1, 2, 3], [4]]}, fetch_list=[y])
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = [1, 2, 3], [4]
    with pytest.raises(TypeError, match=r"feed 'x' is an array of Python objects \(dtype object\).*"
                                        r"'fluid.create_lod_tensor'"):
        exe.run(main, feed={"x": ragged}, fetch_list=[y])
    with pytest.raises(TypeError, match="feed: variable 'x': convert data of type dict to a tensor is not supported"):
        exe.run(main, feed={"x": {"a": 1}}, fetch_list=[y])


def test_lodtensor_feed_keeps_its_lod_and_return_numpy_false_returns_lodtensors(exe):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="int64", lod_level=1)
        y = fluid.layers.scale(x, scale=2.0)
    t = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], fluid.CPUPlace())
    fx, fy = exe.run(main, feed={"x": t}, fetch_list=[x, y], return_numpy=False)
    assert isinstance(fx, fluid.LoDTensor) and isinstance(fy, core.LoDTensor)
    assert fx.lod() == [[0, 2, 5]] and fx.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_array_equal(np.array(fx), [[1], [2], [3], [4], [5]])
    np.testing.assert_array_equal(np.array(fy), [[2], [4], [6], [8], [10]])
    assert fy.lod() == [[0, 2, 5]]  # scale shares its input's LoD
    # the same program fed a plain array: no LoD
    fx, = exe.run(main, feed={"x": np.arange(3, dtype="int64").reshape(3, 1)}, fetch_list=[x], return_numpy=False)
    assert fx.lod() == [] and fx.shape() == [3, 1]
    with pytest.raises(ValueError, match="feed 'x' is a LoDTensor that holds no data"):
        exe.run(main, feed={"x": fluid.LoDTensor()}, fetch_list=[y])


def test_array_and_sequence_lengths_pair_feeds_a_lodtensor(exe):
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32", lod_level=1)
        y = fluid.layers.scale(x, scale=3.0)
    data = np.arange(10, dtype="float32").reshape(5, 2)
    fy, = exe.run(main, feed={"x": (data, [[2, 3]])}, fetch_list=[y], return_numpy=False)
    assert fy.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_array_equal(np.array(fy), data * 3)
    # nested lists as the data, converted to the declared dtype; two levels
    fy, = exe.run(main, feed={"x": ([[1, 2], [3, 4], [5, 6]], [[1, 1], [1, 2]])}, fetch_list=[y], return_numpy=False)
    assert fy.lod() == [[0, 1, 2], [0, 1, 3]] and np.array(fy).dtype == np.float32
    with pytest.raises(ValueError, match=r"feed: variable 'x': create_lod_tensor: the provided lod info is invalid "
                                         r"for data of shape \[5, 2\]: the last level ends at 4 but the tensor has 5 "
                                         r"rows"):
        exe.run(main, feed={"x": (data, [[2, 2]])}, fetch_list=[y])


# ---------------------------------------------------------------- LoDTensor

def test_lodtensor_methods():
    t = fluid.core.LoDTensor()
    t.set(np.arange(16, dtype="float32").reshape(8, 2), fluid.core.CPUPlace())
    assert t.shape() == [8, 2] and t._dtype() == fluid.core.VarDesc.VarType.FP32
    np.testing.assert_array_equal(np.array(t), np.arange(16).reshape(8, 2))
    assert t.lod() == [] and t.recursive_sequence_lengths() == [] and t.has_valid_recursive_sequence_lengths()
    t.set_recursive_sequence_lengths([[3, 1], [2, 2, 1, 3]])
    assert t.lod() == [[0, 3, 4], [0, 2, 4, 5, 8]]
    assert t.recursive_sequence_lengths() == [[3, 1], [2, 2, 1, 3]]
    assert t.has_valid_recursive_sequence_lengths()
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, 2, 6\]\]: the last level ends at 6 "
                                         r"but the tensor has 8 rows"):
        t.set_lod([[0, 2, 6]])  # structurally fine, but 6 != 8 rows: Fluid 1.8's CheckLoD(lod, dims[0]) refuses it
    t.set(np.zeros((6, 2), "float32"))  # new rows, the old LoD kept: has_valid_... says it no longer fits
    assert t.recursive_sequence_lengths() == [[3, 1], [2, 2, 1, 3]] and not t.has_valid_recursive_sequence_lengths()
    assert t._lod_problem() == "the last level ends at 8 but the tensor has 6 rows"
    assert fluid.Tensor is fluid.LoDTensor is core.LoDTensor


@pytest.mark.parametrize("lod, problem", [
    ([[1, 2, 8]], "level 0 starts at 1, not 0"),
    ([[0, 5, 3, 8]], r"level 0 decreases at position 2 \(5 then 3\)"),
    ([[0]], r"level 0 has 1 offsets \(at least 2 are needed\)"),
    ([[0, 2, 3], [0, 4, 6, 7, 8]], "level 0 ends at 3 but level 1 has 4 entries"),
])
def test_invalid_lod_raises_naming_the_offsets(lod, problem):
    t = core.LoDTensor()
    t.set(np.zeros((8, 1), "float32"))
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD %s: %s" % (
            str(lod).replace("[", r"\[").replace("]", r"\]"), problem)):
        t.set_lod(lod)
    assert t.lod() == []  # unchanged


def test_invalid_sequence_lengths_raise_naming_lengths_and_offsets():
    t = core.LoDTensor()
    with pytest.raises(ValueError, match=r"set_recursive_sequence_lengths: invalid recursive_sequence_lengths "
                                         r"\[\[2, 3\], \[1, 1\]\] \(offsets \[\[0, 2, 5\], \[0, 1, 2\]\]\): level 0 "
                                         r"ends at 5 but level 1 has 2 entries"):
        t.set_recursive_sequence_lengths([[2, 3], [1, 1]])
    with pytest.raises(ValueError, match=r"level 0 has 1 offsets"):
        t.set_recursive_sequence_lengths([[]])
    with pytest.raises(ValueError, match=r"LoDTensor.set_recursive_sequence_lengths: invalid "
                                         r"recursive_sequence_lengths \[\[2, -1\]\]: level 0 has the negative value -1 "
                                         r"at position 1"):
        t.set_recursive_sequence_lengths([[2, -1]])
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, -2\]\]: level 0 has the negative "
                                         r"value -2 at position 1"):
        t.set_lod([[0, -2]])
    assert t.lod() == []  # unchanged


def test_create_lod_tensor_and_random_int_lodtensor():
    place = fluid.CPUPlace()
    t = fluid.create_lod_tensor(np.arange(10, dtype="float32").reshape(5, 2), [[2, 3]], place)
    assert t.lod() == [[0, 2, 5]] and t.shape() == [5, 2]
    t2 = fluid.create_lod_tensor(t, [[1, 4]], place)  # a LoDTensor's values, new LoD
    assert t2.lod() == [[0, 1, 5]]
    np.testing.assert_array_equal(np.array(t2), np.arange(10).reshape(5, 2))
    t3 = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], place)
    assert t3._dtype() == core.VarDesc.VarType.INT64 and t3.shape() == [5, 1]
    np.testing.assert_array_equal(np.array(t3).ravel(), [1, 2, 3, 4, 5])
    t4 = fluid.create_lod_tensor([[[1, 2], [3]], [[4, 5, 6]]], [[2, 1], [2, 1, 3]], place)
    assert t4.lod() == [[0, 2, 3], [0, 2, 3, 6]] and t4.shape() == [6, 1]
    with pytest.raises(ValueError, match=r"create_lod_tensor: data and recursive_seq_lens do not match: the sequence "
                                         r"lengths of data are \[\[2, 3\]\], recursive_seq_lens is \[\[2, 2\]\]"):
        fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 2]], place)
    with pytest.raises(ValueError, match=r"create_lod_tensor: the provided lod info is invalid for data of shape "
                                         r"\[5, 2\]: the last level ends at 4 but the tensor has 5 rows"):
        fluid.create_lod_tensor(np.zeros((5, 2)), [[2, 2]], place)
    with pytest.raises(TypeError, match="create_lod_tensor: data should be either a LoDTensor, a Numpy array or a "
                                        "list, got str"):
        fluid.create_lod_tensor("abc", [[3]], place)
    np.random.seed(3)
    r = fluid.create_random_int_lodtensor([[2, 3]], [4], place, low=1, high=3)
    a = np.array(r)
    assert r.lod() == [[0, 2, 5]] and a.shape == (5, 4) and a.dtype == np.int64
    assert a.min() >= 1 and a.max() <= 3 and set(np.unique(a)) == {1, 2, 3}  # high is inclusive


def test_global_scope_find_var_get_tensor(exe):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3])
        fluid.layers.fc(x, size=2, param_attr=fluid.ParamAttr(name="w_feed", initializer=fluid.initializer.Constant(
            0.5)))
    exe.run(startup)
    t = fluid.global_scope().find_var("w_feed").get_tensor()
    assert isinstance(t, fluid.LoDTensor) and t.shape() == [3, 2]
    np.testing.assert_array_equal(np.array(t), np.full((3, 2), 0.5, "float32"))
    t.set(np.ones((3, 2), "float32"), fluid.CPUPlace())  # writes through to the scope
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("w_feed").get_tensor()), np.ones((3, 2)))
    assert fluid.global_scope().find_var("no_such_var") is None
    assert fluid.in_dygraph_mode() is False and fluid.framework.in_dygraph_mode() is False


# ---------------------------------------------------------------- places

def test_places(monkeypatch):
    p = fluid.core.CPUPlace()
    assert isinstance(p, fluid.core.CPUPlace) and not isinstance(p, fluid.core.CUDAPlace)
    assert isinstance(fluid.CPUPlace(), core.CPUPlace) and not isinstance(p, core.CUDAPinnedPlace)
    assert p == fluid.CPUPlace()
    monkeypatch.delenv("CPU_NUM", raising=False)
    assert fluid.cpu_places() == [p]
    assert fluid.cpu_places(3) == [p] * 3
    monkeypatch.setenv("CPU_NUM", "4")
    assert len(fluid.cpu_places()) == 4
    monkeypatch.setenv("CPU_NUM", "zero")
    with pytest.raises(ValueError, match="the CPU_NUM environment variable must be a positive integer, got 'zero'"):
        fluid.cpu_places()
    if core.get_cuda_device_count() == 0:  # pinned memory needs a CUDA build and the driver (tests/gpu covers it)
        with pytest.raises(RuntimeError, match="CUDAPinnedPlace: (fluidlite was built without CUDA|no CUDA device)"):
            core.CUDAPinnedPlace()


@pytest.mark.skipif(core.is_compiled_with_cuda(), reason="checks the CPU-only build's errors")
def test_cuda_places_without_cuda_name_the_missing_build():
    with pytest.raises(RuntimeError, match=r"cuda_places: fluidlite was built without CUDA \(nvcc was not found"):
        fluid.cuda_places()
    with pytest.raises(RuntimeError, match="cuda_pinned_places: fluidlite was built without CUDA"):
        fluid.cuda_pinned_places()
    with pytest.raises(RuntimeError, match=r"CUDAPlace\(0\): fluidlite was built without CUDA"):
        fluid.core.CUDAPlace(0)


# ---------------------------------------------------------------- fetched losses and numpy >= 2.4

def test_fetched_one_element_arrays_convert_like_fluid_scripts_expect(exe):
    main, y = _scale_prog("float32", [1])
    loss, = exe.run(main, feed={"x": np.array([[1.25]], "float32")}, fetch_list=[y])
    assert type(loss) is ScalarArray and isinstance(loss, np.ndarray) and loss.shape == (1, 1)
    assert float(loss) == 2.5 and int(loss) == 2 and complex(loss) == 2.5
    assert loss[0] == 2.5 and loss[0, 0] == 2.5
    assert "%.2f" % loss == "2.50" and "%d" % loss == "2"
    assert np.mean(loss) == 2.5 and type(np.mean(loss)) is np.float32 and type(loss.sum()) is np.float32
    assert type(loss * 2) is ScalarArray and float(loss * 2) == 5.0 and np.sqrt(loss).shape == (1, 1)
    assert type(np.broadcast_to(loss, (2, 2)) + 1) is np.ndarray
    assert repr(loss) == "array([[2.5]], dtype=float32)" and str(loss) == "[[2.5]]"
    main, y = _scale_prog("int64", [1])
    acc, = exe.run(main, feed={"x": np.array([[3]], "int64")}, fetch_list=[y])
    assert int(acc) == 6 and float(acc) == 6.0
    # ordinary numpy on it behaves as on the ndarray it is
    np.testing.assert_array_equal(acc + 1, [[7]])
    assert (acc * 2).tolist() == [[12]] and acc.dtype == np.int64 and acc.item() == 6
    unpickled = pickle.loads(pickle.dumps(loss))  # a plain ndarray: unpickling needs no fluidlite
    assert type(unpickled) is np.ndarray and unpickled.tolist() == [[2.5]] and unpickled.dtype == np.float32
    # arrays of other sizes keep numpy's refusal
    both = np.concatenate([loss, loss])
    with pytest.raises(TypeError):
        float(both)
    # a larger fetch is a ScalarArray too: its one-element rows convert, ufunc results over it are ndarrays
    main, y = _scale_prog("float32", [2])
    r, = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[y])
    assert type(r) is ScalarArray and float(r[0, 1]) == 2.0 and "%.1f" % r[:, :1] == "2.0"
    assert type(r + 1) is np.ndarray
    with pytest.raises(TypeError):
        float(r)


if __name__ == "__main__":
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-q"]))
