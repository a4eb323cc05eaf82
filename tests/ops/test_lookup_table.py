"""lookup_table (embedding): forward against numpy, gradients, the layer, errors at build and run time."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare, run

rng = np.random.RandomState(5)


def rand(*shape, dtype="float64"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def lookup_ref(w, ids, padding_idx=-1):
    out = w[ids[..., 0]]
    if padding_idx != -1:
        out[ids[..., 0] == padding_idx] = 0
    return out


@pytest.mark.parametrize("ids_shape", [(6, 1), (4, 3, 1), (1, 1), (2, 2, 2, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding_idx", [-1, 0, 3])
def test_lookup_table_forward(ids_shape, dtype, padding_idx):
    w = rand(7, 5, dtype=dtype)
    ids = rng.randint(0, 7, ids_shape).astype("int64")
    ids.reshape(-1)[0] = 3  # make sure a padding row occurs
    t = OpTest("lookup_table", {"W": w, "Ids": ids}, {"Out": lookup_ref(w, ids, padding_idx)},
               {"padding_idx": padding_idx})
    t.check_output()


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_lookup_table_grad(padding_idx):
    w = rand(5, 3)
    ids = np.array([[0], [2], [2], [4], [1], [2]], dtype="int64")
    OpTest("lookup_table", {"W": w, "Ids": ids}, {"Out": lookup_ref(w, ids, padding_idx)},
           {"padding_idx": padding_idx}).check_grad(["W"], "Out")


def test_embedding_layer_padding_rows_zero_and_no_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[3, 1], dtype="int64", append_batch_size=False)
        emb = fluid.layers.embedding(ids, size=[6, 4], padding_idx=-1, dtype="float64")  # -1 -> row 5
        assert emb.shape == (3, 4)
        op = [o for o in main.global_block().ops if o.type == "lookup_table"][0]
        assert op.attr("padding_idx") == 5
        w = main.global_block().var("embedding_0.w_0")
        assert tuple(w.shape) == (6, 4)
        loss = fluid.layers.reduce_sum(emb)
        gw, = fluid.gradients([loss], [w])
    out, g, wv = run(main, {"ids": np.array([[1], [5], [1]], "int64")}, [emb, gw, w], startup)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_allclose(out[0], wv[1])
    want = np.zeros((6, 4))
    want[1] = 2  # row 1 used twice, row 5 is padding
    np.testing.assert_array_equal(g, want)


def test_embedding_layer_defaults():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", shape=[20, 32, 1], dtype="int64", append_batch_size=False)
        emb = fluid.layers.embedding(input=words, size=[100, 8])
        assert emb.shape == (20, 32, 8) and emb.dtype == fluid.core.VarDesc.VarType.FP32
        op = main.global_block().ops[-1]
        assert op.attr("padding_idx") == -1 and op.attr("is_sparse") is False
        data = fluid.layers.data("d", shape=[1], dtype="int64")
        assert fluid.layers.embedding(data, size=[10, 3]).shape == (-1, 3)
    # The Xavier-initialised table is not all zeros.
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    w = np.array(fluid.global_scope().find_var("embedding_0.w_0").get_tensor())
    assert w.shape == (100, 8) and np.abs(w).max() > 0 and np.abs(w).max() <= np.sqrt(6.0 / 108) + 1e-6


def test_lookup_table_ids_out_of_range_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[10, 4])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for bad, pos in ((10, 2), (-1, 0)):
        feed = np.array([[1], [2], [3]], "int64")
        feed[pos] = bad
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"lookup_table: Ids 'ids' has value %d at position %d, out of range \[0, 10\) of "
                                 r"W 'embedding_0.w_0' \[10, 4\]" % (bad, pos)):
            exe.run(main, feed={"ids": feed}, fetch_list=[emb])
    out, = exe.run(main, feed={"ids": np.array([[9], [0]], "int64")}, fetch_list=[emb])  # still works
    assert out.shape == (2, 4)


def test_lookup_table_build_errors():
    block = fluid.Program().global_block()
    w = declare(block, "w", [10, 4])
    out = declare(block, "out", None)
    cases = [
        (declare(block, "ids2", [3, 2], "int64"), {}, r"lookup_table: Ids 'ids2' \[3, 2\] must have last dim 1"),
        (declare(block, "ids32", [3, 1], "int32"), {}, r"lookup_table: Ids 'ids32' \[3, 1\] must be int64, got int32"),
        (declare(block, "ids", [3, 1], "int64"), {"padding_idx": 10},
         r"lookup_table: padding_idx 10 is out of range \[0, 10\) of W 'w' \[10, 4\]"),
    ]
    for ids, attrs, msg in cases:
        with pytest.raises(fluid.core.EnforceNotMet, match=msg):
            block.append_op(type="lookup_table", inputs={"W": [w], "Ids": [ids]}, outputs={"Out": [out]}, attrs=attrs)
    w3 = declare(block, "w3", [10, 4, 1])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lookup_table: W 'w3' \[10, 4, 1\] must have rank 2"):
        block.append_op(type="lookup_table", inputs={"W": [w3], "Ids": [cases[2][0]]}, outputs={"Out": [out]})


@pytest.mark.parametrize("ids_shape", [(6,), (4, 3), (2, 2, 2), (3, 1)])
@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_lookup_table_v2_forward_and_grad(ids_shape, padding_idx):
    # ids of any shape, no trailing 1: Out = ids.shape + [width] (a trailing 1 stays a dim of its own)
    w = rand(7, 5)
    ids = rng.randint(0, 7, ids_shape).astype("int64")
    ids.reshape(-1)[0] = 3
    want = lookup_ref(w, ids[..., None], padding_idx)
    assert want.shape == ids_shape + (5,)
    t = OpTest("lookup_table_v2", {"W": w, "Ids": ids}, {"Out": want}, {"padding_idx": padding_idx})
    t.check_output()
    t.check_grad(["W"], "Out")


def test_fluid_embedding_uses_lookup_table_v2():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[2, 3], dtype="int64", append_batch_size=False)
        emb = fluid.embedding(ids, size=[6, 4], padding_idx=-1, dtype="float64")
        assert emb.shape == (2, 3, 4)
        op = main.global_block().ops[-1]
        assert op.type == "lookup_table_v2" and op.attr("padding_idx") == 5
        w = main.global_block().var("embedding_0.w_0")
        gw, = fluid.gradients([fluid.layers.reduce_sum(emb)], [w])
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"lookup_table_v2: Ids 'f' \[2\] must be int64, got float32"):
            fluid.embedding(fluid.layers.data("f", shape=[2], dtype="float32", append_batch_size=False), size=[6, 4])
        with pytest.raises(TypeError, match="fluid.embedding: 'input' must be a Variable, got list"):
            fluid.embedding([1, 2], size=[6, 4])
    idv = np.array([[1, 5, 1], [0, 0, 2]], "int64")
    out, g, wv = run(main, {"ids": idv}, [emb, gw, w], startup)
    want = wv[idv]
    want[idv == 5] = 0
    np.testing.assert_array_equal(out, want)
    counts = np.bincount(idv.reshape(-1), minlength=6).astype("float64")
    counts[5] = 0
    np.testing.assert_array_equal(g, np.repeat(counts[:, None], 4, axis=1))
    with pytest.raises(fluid.core.EnforceNotMet, match=r"lookup_table_v2: Ids 'ids' has value 6 at position 2, out of "
                                                       r"range \[0, 6\)"):
        run(main, {"ids": np.array([[1, 2, 6], [0, 0, 0]], "int64")}, [emb])
