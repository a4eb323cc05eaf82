"""Ops on SelectedRows (kernels/selected_rows.cc): merge_selected_rows and get_tensor_from_selected_rows on the
sparse gradient of a lookup against numpy, and their errors on a dense input."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import record_checked

SR = core.VarDesc.VarType.SELECTED_ROWS


def _program(vocab=10, dim=3):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        c = fluid.layers.data(name="c", shape=[dim], dtype="float32")
        emb = fluid.layers.embedding(ids, size=[vocab, dim], is_sparse=True, param_attr=fluid.ParamAttr(name="w"))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(emb, c))
        fluid.backward.append_backward(loss)
    return main, startup


def test_merge_and_get_tensor_match_numpy():
    main, startup = _program()
    block = main.global_block()
    with fluid.program_guard(main, startup):
        merged = fluid.layers.merge_selected_rows(block.var("w@GRAD"), name="merged")
        values = fluid.layers.get_tensor_from_selected_rows(merged, name="values")
    assert merged.type == SR and values.type == core.VarDesc.VarType.LOD_TENSOR
    assert values.shape == (-1, 3) and merged.shape == (10, 3)
    merged.persistable = values.persistable = True
    ids = np.array([[4], [1], [4], [7], [1], [4]], "int64")
    c = np.random.RandomState(0).randn(6, 3).astype("float32")
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    exe.run(main, feed={"ids": ids, "c": c}, scope=scope)
    sr = scope.find_var(merged.name).get_selected_rows()
    assert list(sr.rows()) == [1, 4, 7] and sr.height() == 10
    want = np.stack([c[[1, 4]].sum(0), c[[0, 2, 5]].sum(0), c[3]])
    np.testing.assert_allclose(np.array(sr.get_tensor()), want, rtol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var(values.name).get_tensor()), want, rtol=1e-6)
    record_checked("output", "merge_selected_rows", "get_tensor_from_selected_rows")


@pytest.mark.parametrize("op_type", ["merge_selected_rows", "get_tensor_from_selected_rows"])
def test_dense_input_is_an_error(op_type):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        out = main.global_block().create_var(name="out", dtype="float32", shape=[-1, 3])
        main.global_block().append_op(type=op_type, inputs={"X": x}, outputs={"Out": out})
    with pytest.raises(Exception, match=op_type + r": input X 'x' must hold a SelectedRows, but holds LoDTensor"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((2, 3), "float32")}, scope=fluid.Scope())


@pytest.mark.parametrize("layer", ["merge_selected_rows", "get_tensor_from_selected_rows"])
def test_layers_reject_a_dense_variable_at_build_time(layer):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        with pytest.raises(TypeError, match=layer + r": x 'x' must be a SelectedRows variable .*got "
                                                    r"VarType.LOD_TENSOR"):
            getattr(fluid.layers, layer)(x)
