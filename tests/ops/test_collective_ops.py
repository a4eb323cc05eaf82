"""The collective ops (kernels/collective_ops.cc) on a one-rank ring in this process: each is the identity of one
rank (allreduce of one value, broadcast from itself, gather of one part), checked with OpTest against numpy, with
central-difference gradients for the differentiable ones, LoD kept, and the sync ops. Their values on 2 and 3 ranks
against numpy: tests/test_distributed.py (tests/distributed/ops_worker.py under mpiexec)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, record_checked


@pytest.fixture(autouse=True)
def one_rank_ring():
    core.comm_init_ring(0, 0, 1, 30.0)
    yield
    core.comm_destroy_ring(0)


RNG = np.random.RandomState(0)


@pytest.mark.parametrize("op", ["c_allreduce_sum", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod"])
@pytest.mark.parametrize("calc_stream", [False, True])
def test_allreduce_of_one_rank_is_its_value(op, calc_stream):
    a, b = RNG.randn(3, 4).astype("float32"), RNG.randn(5).astype("float64")
    OpTest(op, {"X": [("a", a)]}, {"Out": [("a_out", a)]}, {"use_calc_stream": calc_stream}).check_output(0, 0)
    OpTest(op, {"X": [("b", b)]}, {"Out": [("b_out", b)]}, {"use_calc_stream": calc_stream}).check_output(0, 0)


def test_broadcast_gather_and_scatter_of_one_rank():
    x = RNG.randn(4, 3).astype("float32")
    OpTest("c_broadcast", {"X": [("p", x), ("q", x[:1])]}, {"Out": [("p2", x), ("q2", x[:1])]},
           {"root": 0}).check_output(0, 0)
    OpTest("c_allgather", {"X": x}, {"Out": x}, {"nranks": 1}).check_output(0, 0)
    OpTest("c_reducescatter", {"X": x}, {"Out": x}, {"nranks": 1, "use_calc_stream": True}).check_output(0, 0)


@pytest.mark.parametrize("op,attrs", [("c_allreduce_sum", {}), ("c_allgather", {"nranks": 1}),
                                      ("c_reducescatter", {"nranks": 1})])
def test_gradients_match_central_differences(op, attrs):
    x = RNG.rand(3, 4)
    x_in = {"X": [("x", x)]} if op == "c_allreduce_sum" else {"X": x}
    out = {"Out": [("out", x)]} if op == "c_allreduce_sum" else {"Out": x}
    OpTest(op, x_in, out, attrs).check_grad(["X"], "Out", max_relative_error=1e-6)


def run(program, feed, fetch):
    return fluid.Executor(fluid.CPUPlace()).run(program, feed=feed, fetch_list=fetch, return_numpy=False)


def test_allreduce_and_broadcast_keep_the_lod_and_the_sync_ops_pass_values_through():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32", lod_level=1)
        block = main.global_block()
        block.append_op(type="c_allreduce_sum", inputs={"X": [x]}, outputs={"Out": [x]})
        block.append_op(type="c_broadcast", inputs={"X": [x]}, outputs={"Out": [x]}, attrs={"root": 0})
        block.append_op(type="c_sync_calc_stream", inputs={"X": [x]}, outputs={"Out": [x]})
        block.append_op(type="c_sync_comm_stream", inputs={"X": [x]}, outputs={"Out": [x]})
        block.append_op(type="barrier", inputs={"X": [x]}, outputs={"Out": [x]})
        y = fluid.layers.scale(x, 2.0)
    value = np.arange(10, dtype="float32").reshape(5, 2)
    got_x, got_y = run(main, {"x": fluid.create_lod_tensor(value, [[2, 3]], fluid.CPUPlace())}, [x, y])
    assert got_x.recursive_sequence_lengths() == [[2, 3]] and got_y.recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_array_equal(np.array(got_y), 2 * value)
    assert [op.type for op in main.global_block().ops].count("c_sync_comm_stream") == 1  # none added to the user's
    record_checked("output", "c_sync_calc_stream", "c_sync_comm_stream", "barrier")


def test_attribute_and_slot_checks():
    x = np.ones((3, 2), "float32")
    with pytest.raises(core.EnforceNotMet, match=r"c_reducescatter: dim 0 of .* must divide evenly among nranks = 2"):
        OpTest("c_reducescatter", {"X": x}, {"Out": x}, {"nranks": 2}).check_output()
    with pytest.raises(core.EnforceNotMet, match=r"ring_id"):
        OpTest("c_allreduce_sum", {"X": [("x", x)]}, {"Out": [("o", x)]}, {"ring_id": -1}).check_output()
    with pytest.raises(core.EnforceNotMet, match=r"c_allreduce_sum: Out lists 1 variables, X 2; one output per input"):
        OpTest("c_allreduce_sum", {"X": [("x", x), ("y", x)]}, {"Out": [("o", x)]}).check_output()
    with pytest.raises(core.EnforceNotMet, match=r"c_allreduce_sum: X\[0\] 'in_X_x' has dtype bool; collectives carry "
                                                 r"float32, float64, int32 or int64"):
        OpTest("c_allreduce_sum", {"X": [("x", x > 0)]}, {"Out": [("o", x > 0)]}).check_output()
