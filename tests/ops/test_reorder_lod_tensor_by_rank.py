"""reorder_lod_tensor_by_rank (kernels/reorder_lod_tensor_by_rank.cc): X's rows, or its level-0 sequences with their
finer levels, in the order of a rank table, against a per-sequence reference; the gradient (back in X's order); the
layer; the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, RankTable
from rank_table_cases import join_lengths, rank_order, sequences_at

L = fluid.layers


def data(n, width=3, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, (n, width))


def reordered(x, x_lens, table_lengths):
    """x's level-0 sequences (rows when x_lens is None) in rank order, with the LoD lengths they bring."""
    order = rank_order(table_lengths)
    if x_lens is None:
        return x[order], None
    seqs = sequences_at(x, [[1] * len(x_lens[0])] + x_lens, 0)  # each level-0 sequence as one element
    parts = [seqs[i][0] for i in order]
    return np.concatenate([p[0] for p in parts]), join_lengths([p[1] for p in parts])


@pytest.mark.parametrize("table", [[[2, 3, 0, 3]], [[1, 1, 1, 1]], [[4, 3, 2, 1]], [[1, 2, 3, 4]]])
def test_rows_in_rank_order(table):
    x = data(4)
    want, _ = reordered(x, None, table[0])
    t = OpTest("reorder_lod_tensor_by_rank", {"X": x, "RankTable": RankTable(table)}, {"Out": want})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("x_lens", [[[2, 0, 1]], [[1, 1, 1]], [[2, 1, 1], [1, 2, 0, 3]]])
def test_sequences_in_rank_order(x_lens):
    x = data(sum(x_lens[-1]))
    want, lens = reordered(x, x_lens, [1, 5, 3])
    t = OpTest("reorder_lod_tensor_by_rank", {"X": (x, x_lens), "RankTable": RankTable([[1, 5, 3]])},
               {"Out": (want, lens)})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


def test_a_single_sequence_and_the_layer():
    x = data(1)
    OpTest("reorder_lod_tensor_by_rank", {"X": x, "RankTable": RankTable([[7]])}, {"Out": x}).check_output()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        v = L.data("v", shape=[3], dtype="float32", lod_level=1)
        src = L.data("src", shape=[1], dtype="float32", lod_level=1)
        out = L.reorder_lod_tensor_by_rank(v, L.lod_rank_table(src))
        assert out.shape == (-1, 3) and out.lod_level == 1 and out.dtype == v.dtype
        with pytest.raises(TypeError, match=r"reorder_lod_tensor_by_rank: 'rank_table' \(src\) must be a "
                                            r"LOD_RANK_TABLE variable \(layers.lod_rank_table\), got a LOD_TENSOR "
                                            r"variable"):
            L.reorder_lod_tensor_by_rank(v, src)


def test_the_table_must_rank_every_sequence():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        v = L.data("v", shape=[2], dtype="float32")
        src = L.data("src", shape=[1], dtype="float32", lod_level=1)
        out = L.reorder_lod_tensor_by_rank(v, L.lod_rank_table(src))
    src_v = fluid.create_lod_tensor(np.zeros((3, 1), "float32"), [[1, 2]], fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(core.EnforceNotMet, match=r"reorder_lod_tensor_by_rank: the rank table RankTable "
                                                 r"'lod_rank_table_1' ranks 2 sequences, but X 'v' \[3, 2\] has 3 rows "
                                                 r"\(no LoD: one sequence per row\)"):
        exe.run(main, feed={"v": np.zeros((3, 2), "float32"), "src": src_v}, fetch_list=[out])
    v_lod = fluid.create_lod_tensor(np.zeros((3, 2), "float32"), [[3]], fluid.CPUPlace())
    with pytest.raises(core.EnforceNotMet, match=r"ranks 2 sequences, but X 'v' \[3, 2\] has 1 sequences at LoD "
                                                 r"level 0 \{\{0, 3\}\}"):
        exe.run(main, feed={"v": v_lod, "src": src_v}, fetch_list=[out])
