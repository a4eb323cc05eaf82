"""gather_tree: the full beams of a batched beam search traced back from the last step (Fluid 1.8's gather_tree_op,
BeamSearchDecoder's finalize), against a Python loop over each beam; Fluid's doc example; the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def trace_back(ids, parents):
    """Each final beam followed back step by step: a loop per (batch entry, beam)."""
    steps, batch, beam = ids.shape
    out = np.zeros_like(ids)
    for b in range(batch):
        for k in range(beam):
            at = k
            for t in range(steps - 1, -1, -1):
                out[t, b, k] = ids[t, b, at]
                at = parents[t, b, at]
    return out


@pytest.mark.parametrize("shape", [(5, 3, 4), (1, 2, 3), (4, 1, 1), (6, 2, 1), (3, 4, 2), (0, 2, 3)])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_against_a_loop(shape, dtype):
    rng = np.random.RandomState(sum(shape))
    ids = rng.randint(0, 100, shape).astype(dtype)
    parents = rng.randint(0, shape[2], shape).astype(dtype)
    want = trace_back(ids, parents)
    if shape[0] > 1 and shape[2] > 1:
        assert not np.array_equal(want, ids)  # the trace really moves between beams
    OpTest("gather_tree", {"Ids": ids, "Parents": parents}, {"Out": want}).check_output()


def test_fluid_doc_example():
    ids = np.array([[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]], "int64")
    parents = np.array([[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]], "int64")
    want = np.array([[[2, 2], [1, 6]], [[3, 3], [6, 1]], [[0, 1], [9, 0]]], "int64")
    OpTest("gather_tree", {"Ids": ids, "Parents": parents}, {"Out": want}).check_output()


def test_parents_of_the_first_step_are_not_followed():
    ids = np.arange(12, dtype="int64").reshape(3, 2, 2)
    parents = np.zeros((3, 2, 2), "int64")
    parents[0] = 99  # never used as an index, as in Fluid
    OpTest("gather_tree", {"Ids": ids, "Parents": parents}, {"Out": trace_back(ids, np.where(parents > 1, 0, parents))}
           ).check_output()


def program(shape=(-1, 2, 3), parents_shape=None, dtype="int64", parents_dtype=None):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.data("ids", list(shape), dtype)
        parents = fluid.data("parents", list(parents_shape or shape), parents_dtype or dtype)
        out = fluid.layers.gather_tree(ids, parents)
    return main, out


def test_layer():
    main, out = program()
    assert main.global_block().ops[-1].type == "gather_tree"
    assert tuple(out.shape) == (-1, 2, 3) and out.dtype == fluid.core.VarDesc.VarType.INT64
    ids = np.array([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [1, 2, 3]]], "int64")
    parents = np.array([[[0, 0, 0], [0, 0, 0]], [[2, 0, 1], [1, 1, 0]]], "int64")
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": ids, "parents": parents}, fetch_list=[out])
    np.testing.assert_array_equal(got, [[[3, 1, 2], [5, 5, 4]], [[7, 8, 9], [1, 2, 3]]])


def test_build_time_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        f = fluid.data("f", [-1, 2, 3], "float32")
        i = fluid.data("i", [-1, 2, 3], "int64")
        with pytest.raises(TypeError, match=r"gather_tree: 'ids' \(f\) must be int32 or int64, got float32"):
            fluid.layers.gather_tree(f, i)
        with pytest.raises(TypeError, match=r"gather_tree: 'parents' \(f\) must be int32 or int64, got float32"):
            fluid.layers.gather_tree(i, f)
        with pytest.raises(TypeError, match=r"gather_tree: 'ids' must be a Variable, got ndarray"):
            fluid.layers.gather_tree(np.zeros((2, 2, 3), "int64"), i)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"gather_tree: Parents 'parents' \[-1, 2, 4\] must have the shape of Ids 'ids' "
                             r"\[-1, 2, 3\]"):
        program(parents_shape=(-1, 2, 4))
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"gather_tree: Ids 'ids' \[-1, 6\] must be \[max_time, batch_size, beam_size\]"):
        program(shape=(-1, 6), parents_shape=(-1, 6))
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"gather_tree: Ids 'ids' \[-1, 2, 3\] is int64 but Parents 'parents' \[-1, 2, 3\] is "
                             r"int32"):
        program(parents_dtype="int32")


@pytest.mark.parametrize("bad,where", [(3, r"\[2, 1, 1\] is 3, outside \[0, 3\) \(the beams of step 1\)"),
                                       (-1, r"\[2, 1, 1\] is -1, outside \[0, 3\) \(the beams of step 1\)")])
def test_out_of_range_parent(bad, where):
    main, out = program()
    ids = np.zeros((3, 2, 3), "int64")
    parents = np.zeros((3, 2, 3), "int64")
    parents[2, 1, 1] = bad
    with pytest.raises(fluid.core.EnforceNotMet, match=r"gather_tree: Parents 'parents' \[3, 2, 3\] at " + where):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": ids, "parents": parents}, fetch_list=[out])
    # A bad parent deeper in the trace is named at the step where it is followed.
    parents[2, 1, 1] = 2
    parents[1, 1, 2] = 7
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"gather_tree: Parents 'parents' \[3, 2, 3\] at \[1, 1, 2\] is 7, outside \[0, 3\) "
                             r"\(the beams of step 0\)"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": ids, "parents": parents}, fetch_list=[out])
