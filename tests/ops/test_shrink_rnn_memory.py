"""shrink_rnn_memory (kernels/shrink_rnn_memory.cc, layers.shrink_memory): the rows of the sequences longer than the
step, counted per sequence from the lengths; a memory holding sequences keeps its first ones; the gradient (zeros in
the dropped rows); the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, RankTable

L = fluid.layers


def longer_than(lengths, step):
    return sum(1 for n in lengths if n > step)


def rows(n, width=3, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, (n, width))


@pytest.mark.parametrize("lens", [[[2, 3, 0, 3]], [[4]], [[2, 2, 2]], [[1, 5, 1]]])
@pytest.mark.parametrize("step", [0, 1, 2, 3])
def test_keeps_the_rows_of_the_running_sequences(lens, step):
    n = len(lens[0])
    x = rows(n)
    keep = longer_than(lens[0], step)
    t = OpTest("shrink_rnn_memory", {"X": x, "I": np.array([step], "int64"), "RankTable": RankTable(lens)},
               {"Out": x[:keep]})
    t.check_output(atol=0, rtol=0)
    if keep:
        t.check_grad(["X"], "Out")  # rows past `keep` get zeros


def test_a_memory_holding_sequences_keeps_the_first_ones():
    # 3 sequences ranked; the memory holds one sub-sequence of rows per sequence (LoD [[2, 1, 3]])
    x = rows(6)
    t = OpTest("shrink_rnn_memory", {"X": (x, [[2, 1, 3]]), "I": np.array([1], "int64"),
                                     "RankTable": RankTable([[4, 3, 1]])}, {"Out": (x[:3], [[2, 1]])})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


def test_int32_step_and_the_layer():
    x = rows(3)
    OpTest("shrink_rnn_memory", {"X": x, "I": np.array([2], "int32"), "RankTable": RankTable([[3, 2, 3]])},
           {"Out": x[:2]}).check_output()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        m = L.data("m", shape=[4], dtype="float32")
        src = L.data("src", shape=[1], dtype="float32", lod_level=1)
        out = L.shrink_memory(m, L.fill_constant([1], "int64", 0), L.lod_rank_table(src))
        assert out.shape == (-1, 4) and out.dtype == m.dtype
        assert main.global_block().ops[-1].type == "shrink_rnn_memory"
        with pytest.raises(TypeError, match=r"shrink_memory: 'i' \(m\) must be int64 or int32, got float32"):
            L.shrink_memory(m, m, L.lod_rank_table(src))
        with pytest.raises(TypeError, match=r"shrink_memory: 'table' \(src\) must be a LOD_RANK_TABLE variable"):
            L.shrink_memory(m, L.fill_constant([1], "int64", 0), src)


def test_too_few_rows_for_the_running_sequences():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        m = L.data("m", shape=[2], dtype="float32")
        src = L.data("src", shape=[1], dtype="float32", lod_level=1)
        out = L.shrink_memory(m, L.fill_constant([1], "int64", 0), L.lod_rank_table(src))
    feed = {"m": np.zeros((1, 2), "float32"),
            "src": fluid.create_lod_tensor(np.zeros((3, 1), "float32"), [[1, 2]], fluid.CPUPlace())}
    with pytest.raises(core.EnforceNotMet, match=r"shrink_rnn_memory: X 'm' \[1, 2\] has 1 rows, but the rank table "
                                                 r"RankTable 'lod_rank_table_1' has 2 sequences longer than step 0"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out])
    feed["m"] = fluid.create_lod_tensor(np.zeros((2, 2), "float32"), [[2]], fluid.CPUPlace())
    with pytest.raises(core.EnforceNotMet, match=r"shrink_rnn_memory: X 'm' \(LoD \{\{0, 2\}\}\) has 1 sequences, but "
                                                 r"the rank table RankTable 'lod_rank_table_1' has 2 longer than "
                                                 r"step 0"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out])
