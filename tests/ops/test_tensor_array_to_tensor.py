"""tensor_array_to_tensor (kernels/tensor_array_to_tensor.cc): an array's entries concatenated or stacked along an
axis (numpy.concatenate / numpy.stack as the reference), OutIndex, the gradient back into an array, the layer (its
axis=1 default) and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, TensorArray

L = fluid.layers


def rand(*shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat(axis):
    # entries differing at `axis` only
    shapes = {0: [(2, 3), (1, 3), (4, 3)], 1: [(2, 3), (2, 1), (2, 2)]}[axis % 2]
    entries = [rand(*s, seed=k) for k, s in enumerate(shapes)]
    t = OpTest("tensor_array_to_tensor", {"X": TensorArray(entries)},
               {"Out": np.concatenate(entries, axis=axis),
                "OutIndex": np.array([e.shape[axis] for e in entries], "int32")}, {"axis": axis})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis):
    entries = [rand(2, 3, seed=k) for k in range(4)]
    index = [e.shape[axis] if axis % 3 < 2 else 1 for e in entries]  # the entry's dim at axis; 1 past the last
    t = OpTest("tensor_array_to_tensor", {"X": TensorArray(entries)},
               {"Out": np.stack(entries, axis=axis), "OutIndex": np.array(index, "int32")},
               {"axis": axis, "use_stack": True})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


def test_a_single_entry_and_an_empty_one():
    e = rand(3, 2)
    OpTest("tensor_array_to_tensor", {"X": TensorArray([e])}, {"Out": e, "OutIndex": np.array([3], "int32")}
           ).check_output()
    parts = [rand(2, 2), np.zeros((0, 2)), rand(1, 2, seed=1)]
    OpTest("tensor_array_to_tensor", {"X": TensorArray(parts)},
           {"Out": np.concatenate(parts), "OutIndex": np.array([2, 0, 1], "int32")}).check_output()


def _program(**kw):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        a = L.data("a", shape=[2, 3], dtype="float32", append_batch_size=False)
        b = L.data("b", shape=[2, 3], dtype="float32", append_batch_size=False)
        arr = L.create_array("float32")
        L.array_write(a, L.fill_constant([1], "int64", 0), array=arr)
        L.array_write(b, L.fill_constant([1], "int64", 1), array=arr)
        out, index = L.tensor_array_to_tensor(arr, **kw)
    return main, out, index


def test_layer_defaults_and_build_time_shapes():
    main, out, index = _program()
    op = main.global_block().ops[-1]
    assert op.type == "tensor_array_to_tensor" and op.attr("axis") == 1 and op.attr("use_stack") is False
    assert out.shape == (2, -1) and index.dtype == core.VarDesc.VarType.INT32 and index.stop_gradient
    _, out, _ = _program(axis=0, use_stack=True)
    assert out.shape == (-1, 2, 3)
    av, bv = rand(2, 3).astype("float32"), rand(2, 3, seed=1).astype("float32")
    main, out, index = _program()
    got, got_index = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": av, "b": bv}, fetch_list=[out, index])
    np.testing.assert_array_equal(got, np.concatenate([av, bv], axis=1))
    assert got_index.tolist() == [3, 3]
    with fluid.program_guard(main, fluid.Program()):
        with pytest.raises(TypeError, match=r"tensor_array_to_tensor: 'input' \(a\) must be a LoDTensorArray "
                                            r"variable"):
            L.tensor_array_to_tensor(main.global_block().var("a"))
        with pytest.raises(core.EnforceNotMet, match=r"tensor_array_to_tensor: axis 2 is out of range \[-2, 2\) for "
                                                     r"the entries of X 'array_0.out' \[2, 3\]"):
            L.tensor_array_to_tensor(main.global_block().var("array_0.out"), axis=2)


def test_errors():
    exe = fluid.Executor(fluid.CPUPlace())
    main, out, _ = _program(axis=0)
    with pytest.raises(core.EnforceNotMet, match=r"tensor_array_to_tensor: entry 1 of X 'array_0.out' is float32 "
                                                 r"\[2, 4\] but entry 0 is float32 \[2, 3\] \(concatenated along axis "
                                                 r"0: the other dims must match\)"):
        exe.run(main, feed={"a": np.zeros((2, 3), "float32"), "b": np.zeros((2, 4), "float32")}, fetch_list=[out])
    main, out, _ = _program(axis=0, use_stack=True)
    with pytest.raises(core.EnforceNotMet, match=r"\(use_stack: all entries must have the same dims\)"):
        exe.run(main, feed={"a": np.zeros((2, 3), "float32"), "b": np.zeros((1, 3), "float32")}, fetch_list=[out])
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        arr = L.create_array("float32")
        empty, _ = L.tensor_array_to_tensor(arr)
    with pytest.raises(core.EnforceNotMet, match=r"tensor_array_to_tensor: X 'array_0.out' is an empty array: there "
                                                 r"is nothing to join"):
        exe.run(main, fetch_list=[empty])
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        arr = L.create_array("float32")
        L.array_write(L.fill_constant([1], "float32", 1.0), L.fill_constant([1], "int64", 1), array=arr)
        gap, _ = L.tensor_array_to_tensor(arr, axis=0)
    with pytest.raises(core.EnforceNotMet, match=r"tensor_array_to_tensor: entry 0 of X 'array_0.out' \(length 2\) "
                                                 r"was never written"):
        exe.run(main, fetch_list=[gap])
