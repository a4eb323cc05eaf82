"""lod_rank_table and max_sequence_len (kernels/lod_rank_table.cc): the rank table of a LoD level (items compared
with a stable sort of the sequence lengths, per case), its coarse levels, max_sequence_len through OpTest, the
LodRankTable binding, and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, RankTable, record_checked
from rank_table_cases import rank_order

L = fluid.layers

CASES = [  # (recursive_seq_lens, level)
    ([[2, 3, 0, 3]], 0),     # a tie, an empty sequence
    ([[4]], 0),              # a single sequence
    ([[2, 2, 2]], 0),        # equal lengths keep their order
    ([[1, 1, 5, 1]], 0),     # one-element sequences
    ([[0, 0]], 0),           # only empty sequences
    ([[2, 1], [1, 3, 6]], 0),  # two levels, ranked at the top
    ([[2, 1], [1, 3, 6]], 1),  # two levels, ranked below
    ([[1, 2], [2, 0, 1], [3, 1, 2]], 1),
]


def _rank_table(lens, level, exe=None, scope=None):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[1], dtype="float32", lod_level=len(lens))
        table = L.lod_rank_table(x, level=level)
        table.persistable = True  # kept in the scope, where the test reads it
    scope = scope or fluid.Scope()
    feed = {"x": fluid.create_lod_tensor(np.zeros((sum(lens[-1]), 1), "float32"), lens, fluid.CPUPlace())}
    (exe or fluid.Executor(fluid.CPUPlace())).run(main, feed=feed, scope=scope)
    return scope.find_var(table.name).get_lod_rank_table(), table


@pytest.mark.parametrize("lens,level", CASES)
def test_items_are_a_stable_sort_by_length(lens, level):
    table, var = _rank_table(lens, level)
    lengths = lens[level]
    want = [(i, lengths[i]) for i in rank_order(lengths)]
    assert table.items() == want
    assert table.level() == level
    coarse = [[int(o) for o in np.concatenate([[0], np.cumsum(lv)])] for lv in lens[:level]]
    assert table.coarse_lod() == coarse
    # the table is lod_rank_table_1: the layer helper took _0, as in Fluid
    assert var.type == core.VarDesc.VarType.LOD_RANK_TABLE and var.name == "lod_rank_table_1"
    assert repr(table) == "LodRankTable(level %d, %d sequences)" % (level, len(lengths))
    record_checked("output", "lod_rank_table")


@pytest.mark.parametrize("lens,level", CASES)
def test_max_sequence_len(lens, level):
    longest = max(lens[level]) if lens[level] else 0
    OpTest("max_sequence_len", {"RankTable": RankTable(lens, level)}, {"Out": np.array([longest], "int64")}
           ).check_output()


def test_a_rerun_replaces_the_table():
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    _rank_table([[1, 4, 2]], 0, exe, scope)
    table, _ = _rank_table([[3]], 0, exe, scope)
    assert table.items() == [(0, 3)]


def test_layers():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[2], dtype="float32", lod_level=1)
        table = L.lod_rank_table(x)
        n = L.max_sequence_len(table)
        assert n.dtype == core.VarDesc.VarType.INT64 and n.shape == (1,) and n.name == "max_seqence_len_0.tmp_0"
        assert [op.type for op in main.global_block().ops] == ["lod_rank_table", "max_sequence_len"]
        assert main.global_block().ops[0].attr("level") == 0
        with pytest.raises(TypeError, match=r"lod_rank_table: 'x' must be a Variable, got list"):
            L.lod_rank_table([x])
        with pytest.raises(ValueError, match=r"lod_rank_table: level must be an int >= 0, got -1"):
            L.lod_rank_table(x, level=-1)
        with pytest.raises(TypeError, match=r"max_sequence_len: 'rank_table' \(x\) must be a LOD_RANK_TABLE "
                                            r"variable \(layers.lod_rank_table\), got a LOD_TENSOR variable"):
            L.max_sequence_len(x)
        arr = L.create_array("float32")
        with pytest.raises(TypeError, match=r"lod_rank_table: 'x' \(array_0.out\) must be a LoDTensor variable, "
                                            r"got a LOD_TENSOR_ARRAY variable"):
            L.lod_rank_table(arr)


def _run(main, feed, fetch=()):
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=list(fetch))


def test_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[1], dtype="float32", lod_level=1)
        L.lod_rank_table(x, level=1)
    lod_x = fluid.create_lod_tensor(np.zeros((3, 1), "float32"), [[1, 2]], fluid.CPUPlace())
    with pytest.raises(core.EnforceNotMet, match=r"lod_rank_table: X 'x' \[3, 1\] must be a LoDTensor with at least "
                                                 r"2 LoD level\(s\), got 1 \(\{\{0, 1, 3\}\}\)"):
        _run(main, {"x": lod_x})
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[1], dtype="float32")
        table = L.lod_rank_table(x)
    with pytest.raises(core.EnforceNotMet, match=r"lod_rank_table: X 'x' \[3, 1\] must be a LoDTensor with at least "
                                                 r"1 LoD level\(s\), got 0"):
        _run(main, {"x": np.zeros((3, 1), "float32")})
    with pytest.raises(core.EnforceNotMet, match=r"fetch: variable 'lod_rank_table_1' holds a LoDRankTable, which "
                                                 r"fetch cannot return"):
        _run(main, {"x": lod_x}, [table])
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()):
        with pytest.raises(core.EnforceNotMet, match=r"max_sequence_len: RankTable 'x' is a LOD_TENSOR variable, not "
                                                     r"a LOD_RANK_TABLE \(layers.lod_rank_table\)"):
            block.append_op(type="max_sequence_len", inputs={"RankTable": [x]},
                            outputs={"Out": [block.create_var(name="n", dtype="int64")]})
        with pytest.raises(core.EnforceNotMet, match=r"op lod_rank_table: attribute 'level' = -1 is invalid: must be "
                                                     r">= 0"):
            block.append_op(type="lod_rank_table", inputs={"X": [x]}, outputs={"Out": [table]}, attrs={"level": -1})
