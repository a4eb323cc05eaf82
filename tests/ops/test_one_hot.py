"""one_hot (layers.one_hot, ids [.., 1]) and one_hot_v2 (fluid.one_hot, ids of any shape): numpy references,
depth as an attribute or a tensor, out-of-range ids, dtypes, build-time errors, no gradient."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, run


def one_hot_ref(ids, depth, dtype="float32"):
    out = np.zeros(ids.shape + (depth,), dtype)
    for idx in np.ndindex(*ids.shape):
        if 0 <= ids[idx] < depth:
            out[idx + (ids[idx],)] = 1
    return out


@pytest.mark.parametrize("ids_dtype", ["int32", "int64"])
@pytest.mark.parametrize("shape", [(5, 1), (2, 3, 1)])
def test_one_hot_replaces_the_trailing_1(ids_dtype, shape):
    ids = np.random.RandomState(0).randint(0, 6, shape).astype(ids_dtype)
    OpTest("one_hot", {"X": ids}, {"Out": one_hot_ref(ids[..., 0], 6)}, {"depth": 6}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1), (2, 2, 2)])
@pytest.mark.parametrize("out_dtype", ["float32", "float64", "int64"])
def test_one_hot_v2_appends_depth(shape, out_dtype):
    ids = np.random.RandomState(1).randint(0, 4, shape).astype("int64")
    dtype = int(fluid.framework.convert_np_dtype_to_dtype_(out_dtype))
    OpTest("one_hot_v2", {"X": ids}, {"Out": one_hot_ref(ids, 4, out_dtype)},
           {"depth": 4, "dtype": dtype}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("layer,op_type,ids_shape", [(fluid.layers.one_hot, "one_hot", [3, 1]),
                                                     (fluid.one_hot, "one_hot_v2", [3])])
def test_out_of_range_ids_raise_or_give_zero_rows(layer, op_type, ids_shape):
    def build(allow):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            ids = fluid.layers.data("ids", shape=ids_shape, dtype="int64", append_batch_size=False)
            out = layer(ids, depth=4, allow_out_of_range=allow)
        assert out.shape == (3, 4) and out.dtype == fluid.core.VarDesc.VarType.FP32 and out.stop_gradient
        assert [op.type for op in main.global_block().ops] == [op_type]
        return main, out
    idv = np.array([2, 4, -1], "int64").reshape(ids_shape)
    lenient_v, = run(*_feed_fetch(build(True), idv))
    np.testing.assert_array_equal(lenient_v, [[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"%s: X 'ids' holds 4 at flat index 1, outside \[0, depth=4\) "
                                                       r"\(allow_out_of_range=True gives an all-zero row" % op_type):
        run(*_feed_fetch(build(False), idv))


def _feed_fetch(built, idv):
    main, out = built
    return main, {"ids": idv}, [out]


@pytest.mark.parametrize("depth_dtype", ["int32", "int64"])
def test_depth_tensor_overrides_depth_at_run_time(depth_dtype):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", shape=[3], dtype="int32", append_batch_size=False)
        depth = fluid.layers.data("depth", shape=[-1], dtype=depth_dtype, append_batch_size=False)
        out = fluid.one_hot(ids, depth)
        assert out.shape == (3, -1)
        assert main.global_block().ops[-1].input("depth_tensor") == ["depth"]
    idv = np.array([0, 2, 1], "int32")
    for d in (3, 5):
        got, = run(main, {"ids": idv, "depth": np.array([d], depth_dtype)}, [out])
        np.testing.assert_array_equal(got, one_hot_ref(idv, d))
    with pytest.raises(fluid.core.EnforceNotMet, match=r"one_hot_v2: depth must be a positive integer, got 0 \(the "
                                                       r"value of depth_tensor 'depth'\)"):
        run(main, {"ids": idv, "depth": np.array([0], depth_dtype)}, [out])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"one_hot_v2: depth_tensor 'depth' must be a 1-element int32 "
                                                       r"or int64 tensor, got %s \[2\]" % depth_dtype):
        run(main, {"ids": idv, "depth": np.array([3, 4], depth_dtype)}, [out])


def test_build_time_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", shape=[3], dtype="int64", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"one_hot: X 'ids' \[3\] must have last dim 1 \(e.g. "
                                                           r"\[N, 1\]\); fluid.one_hot \(one_hot_v2\) takes ids of any "
                                                           r"shape"):
            fluid.layers.one_hot(ids, depth=4)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"one_hot_v2: depth must be a positive integer, got 0 "
                                                           r"\(for X 'ids' \[3\]\)"):
            fluid.one_hot(ids, depth=0)
        f = fluid.layers.data("f", shape=[3], dtype="float32", append_batch_size=False)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"one_hot_v2: X 'f' \[3\] must be int32 or int64, got "
                                                           r"float32"):
            fluid.one_hot(f, depth=4)
        with pytest.raises(TypeError, match="fluid.one_hot: 'input' must be a Variable, got list"):
            fluid.one_hot([1, 2], depth=4)


def test_one_hot_has_no_gradient_flowing_to_the_ids():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", shape=[3], dtype="int64", append_batch_size=False)
        x = fluid.layers.data("x", shape=[3, 4], dtype="float32", append_batch_size=False)
        x.stop_gradient = False
        oh = fluid.one_hot(ids, depth=4)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(oh, x))
        gx, = fluid.gradients([loss], [x])
    idv = np.array([1, 0, 3], "int64")
    g, = run(main, {"ids": idv, "x": np.ones((3, 4), "float32")}, [gx])
    np.testing.assert_array_equal(g, one_hot_ref(idv, 4))
    assert fluid.core.op_proto("one_hot")["grad"] == fluid.core.op_proto("one_hot_v2")["grad"] == "no_gradient"
