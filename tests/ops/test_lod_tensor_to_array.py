"""lod_tensor_to_array and array_to_lod_tensor (kernels/lod_tensor_to_array.cc): the steps of each sequence in rank
order and back, against a per-sequence Python reference (tests/rank_table_cases.py), for one- to three-level LoDs
ranked at each level, with their gradients (each is the other's), round trips across runs, and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest, RankTable, TensorArray
from rank_table_cases import to_array

L = fluid.layers

CASES = [  # (recursive_seq_lens, level)
    ([[2, 3, 0, 3]], 0),         # ties and an empty sequence
    ([[5]], 0),                  # a single sequence
    ([[2, 2, 2]], 0),            # equal lengths
    ([[1, 1, 1]], 0),            # one-element sequences: one step
    ([[3, 1, 4, 1, 2]], 0),
    ([[2, 1], [1, 3, 6]], 0),    # two levels: a step is a sub-sequence
    ([[2, 1], [1, 3, 6]], 1),    # two levels ranked at the second: the first is the table's coarse level
    ([[1, 2], [2, 0, 1], [3, 1, 2]], 0),  # three levels, an empty sub-sequence
    ([[1, 2], [2, 0, 1], [3, 1, 2]], 1),
    ([[1, 2], [2, 0, 1], [3, 1, 2]], 2),
]


def data(lens, width=3, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, (sum(lens[-1]), width))


@pytest.mark.parametrize("lens,level", CASES)
def test_lod_tensor_to_array(lens, level):
    x = data(lens)
    t = OpTest("lod_tensor_to_array", {"X": (x, lens), "RankTable": RankTable(lens, level)},
               {"Out": TensorArray(to_array(x, lens, level))})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("lens,level", CASES)
def test_array_to_lod_tensor(lens, level):
    x = data(lens, seed=1)
    t = OpTest("array_to_lod_tensor", {"X": TensorArray(to_array(x, lens, level)), "RankTable": RankTable(lens, level)},
               {"Out": (x, lens)})
    t.check_output(atol=0, rtol=0)
    t.check_grad(["X"], "Out")


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_any_dtype(dtype):
    lens = [[2, 3]]
    x = (data(lens) * 10).astype(dtype)
    OpTest("lod_tensor_to_array", {"X": (x, lens), "RankTable": RankTable(lens)},
           {"Out": TensorArray(to_array(x, lens, 0))}).check_output()
    OpTest("array_to_lod_tensor", {"X": TensorArray(to_array(x, lens, 0)), "RankTable": RankTable(lens)},
           {"Out": (x, lens)}).check_output()


def test_only_empty_sequences_give_an_empty_array():
    lens = [[0, 0]]
    OpTest("lod_tensor_to_array", {"X": (np.zeros((0, 2)), lens), "RankTable": RankTable(lens)},
           {"Out": TensorArray([])}).check_output()


def _round_trip_program(lod_level=1, level=0, width=2):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[width], dtype="float64", lod_level=lod_level)
        table = L.lod_rank_table(x, level=level)
        arr = L.lod_tensor_to_array(x, table)
        back = L.array_to_lod_tensor(arr, table)
        n = L.array_length(arr)
    return main, x, arr, back, n


def test_round_trip_across_runs_with_different_lods():
    main, _, arr, back, n = _round_trip_program()
    exe = fluid.Executor(fluid.CPUPlace())
    for lens in ([[3, 1, 4]], [[1]], [[2, 0, 5, 5]], [[3, 1, 4]]):
        x = data(lens, width=2)
        feed = {"x": fluid.create_lod_tensor(x, lens, fluid.CPUPlace())}
        got_arr, got_back, got_n = exe.run(main, feed=feed, fetch_list=[arr, back, n], return_numpy=False)
        assert np.array(got_n).tolist() == [max(lens[0])] and len(got_arr) == max(lens[0])
        for e, want in zip(got_arr, to_array(x, lens, 0)):
            np.testing.assert_array_equal(np.array(e), want)
        np.testing.assert_array_equal(np.array(got_back), x)
        assert got_back.recursive_sequence_lengths() == lens


def test_layer_names_and_shapes():
    main, x, arr, back, _ = _round_trip_program(lod_level=2)
    assert arr.type == core.VarDesc.VarType.LOD_TENSOR_ARRAY and arr.name == "lod_tensor_to_array_1"
    assert arr.shape == (-1, 2) and arr.lod_level == 1 and arr.dtype == x.dtype
    assert back.shape == (-1, 2) and back.lod_level == 2 and back.name.startswith("array_to_lod_tensor_0.tmp")
    with fluid.program_guard(main, fluid.Program()):
        table = main.global_block().var("lod_rank_table_1")
        with pytest.raises(TypeError, match=r"lod_tensor_to_array: 'table' \(x\) must be a LOD_RANK_TABLE variable"):
            L.lod_tensor_to_array(x, x)
        with pytest.raises(TypeError, match=r"lod_tensor_to_array: 'x' \(lod_tensor_to_array_1\) must be a LoDTensor "
                                            r"variable, got a LOD_TENSOR_ARRAY variable"):
            L.lod_tensor_to_array(arr, table)
        with pytest.raises(TypeError, match=r"array_to_lod_tensor: 'x' \(x\) must be a LoDTensorArray variable"):
            L.array_to_lod_tensor(x, table)


def test_gradient_of_a_dynamic_rnn_like_program():
    # y = array_to_lod_tensor([3 * step_t for each step]) : dy/dx = 3, with the LoD of x
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", shape=[2], dtype="float64", lod_level=1, stop_gradient=False)
        table = L.lod_rank_table(x)
        arr = L.lod_tensor_to_array(x, table)
        out = L.create_array("float64")
        for t in range(3):
            i = L.fill_constant([1], "int64", t)
            L.array_write(L.scale(L.array_read(arr, i), scale=3.0), i, array=out)
        y = L.array_to_lod_tensor(out, table)
        loss = L.reduce_sum(y * y)
        gx, = fluid.gradients([loss], [x])
    lens = [[3, 1, 2]]
    xv = data(lens, width=2)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": fluid.create_lod_tensor(xv, lens, fluid.CPUPlace())},
                                                fetch_list=[gx], return_numpy=False)
    assert got.recursive_sequence_lengths() == lens
    np.testing.assert_allclose(np.array(got), 18 * xv, rtol=1e-12)


def _split_program(role):
    """lod_tensor_to_array of a tensor g without LoD, built with op_role `role` (1: Backward, as backward.py builds
    a gradient)."""
    main = fluid.Program()
    block = main.global_block()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        src = L.data("src", shape=[1], dtype="float32", lod_level=1)
        g = L.data("g", shape=[3], dtype="float64")
        out = block.create_var(name="out", type=core.VarDesc.VarType.LOD_TENSOR_ARRAY, dtype="float64")
        block.append_op(type="lod_tensor_to_array", inputs={"X": [g], "RankTable": [L.lod_rank_table(src)]},
                        outputs={"Out": [out]}, attrs={"op_role": role})
    return main


def test_a_gradient_without_lod_is_split_by_the_rank_table():
    lens = [[2, 3]]
    gv = data(lens)
    feed = {"src": fluid.create_lod_tensor(np.zeros((5, 1), "float32"), lens, fluid.CPUPlace()), "g": gv}
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(_split_program(1), feed=feed, fetch_list=["out"])
    want = to_array(gv, lens, 0)
    assert len(got) == len(want)
    for e, w in zip(got, want):
        np.testing.assert_array_equal(e, w)
    # in the forward pass X must carry the LoD
    with pytest.raises(core.EnforceNotMet, match=r"lod_tensor_to_array: X 'g' \[5, 3\] must be a LoDTensor with at "
                                                 r"least 1 LoD level\(s\), got 0"):
        exe.run(_split_program(0), feed=feed, fetch_list=["out"])
    with pytest.raises(core.EnforceNotMet, match=r"lod_tensor_to_array: X 'g' \[4, 3\] has no LoD and does not fit "
                                                 r"the rank table's \{\{0, 2, 5\}\}: "):
        exe.run(_split_program(1), feed=dict(feed, g=gv[:4]), fetch_list=["out"])


def _entries_program(entries_rows, lens, role):
    """array_to_lod_tensor over an array whose entry k has entries_rows[k] rows (None: never written)."""
    main = fluid.Program()
    block = main.global_block()
    feed = {}
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        src = L.data("src", shape=[1], dtype="float32", lod_level=len(lens))
        table = L.lod_rank_table(src)
        arr = L.create_array("float64")
        for k, rows in enumerate(entries_rows):
            if rows is None:
                continue
            e = L.data("e%d" % k, shape=[2], dtype="float64")
            feed["e%d" % k] = np.full((rows, 2), k + 1.0)
            L.array_write(e, L.fill_constant([1], "int64", k), array=arr)
        out = block.create_var(name="out", dtype="float64")
        block.append_op(type="array_to_lod_tensor", inputs={"X": [arr], "RankTable": [table]},
                        outputs={"Out": [out]}, attrs={"op_role": role})
    feed["src"] = fluid.create_lod_tensor(np.zeros((sum(lens[-1]), 1), "float32"), lens, fluid.CPUPlace())
    return main, feed


def test_a_gradient_step_never_written_is_zeros():
    lens = [[3, 1, 3]]
    main, feed = _entries_program([3, None, 2], lens, role=1)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["out"], return_numpy=False)
    assert got.recursive_sequence_lengths() == lens
    # sequence 0 (rank 0): steps 1, 0, 3; sequence 1 (rank 2): step 1; sequence 2 (rank 1): 1, 0, 3
    want = np.array([1, 0, 3, 1, 1, 0, 3], "float64")[:, None] * np.ones((1, 2))
    np.testing.assert_array_equal(np.array(got), want)
    main, feed = _entries_program([3, None, 2], lens, role=0)
    with pytest.raises(core.EnforceNotMet, match=r"array_to_lod_tensor: entry 1 of X 'array_0.out' was never "
                                                 r"written, but the rank table has 2 sequences longer than 1"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=["out"])


def test_array_to_lod_tensor_errors():
    lens = [[3, 1, 3]]
    exe = fluid.Executor(fluid.CPUPlace())
    main, feed = _entries_program([3, 2], lens, role=0)
    with pytest.raises(core.EnforceNotMet, match=r"array_to_lod_tensor: X 'array_0.out' has 2 entries, but the rank "
                                                 r"table RankTable 'lod_rank_table_1' has sequences of 3 steps"):
        exe.run(main, feed=feed, fetch_list=["out"])
    main, feed = _entries_program([3, 3, 2], lens, role=0)
    with pytest.raises(core.EnforceNotMet, match=r"array_to_lod_tensor: entry 1 of X 'array_0.out' \[3, 2\] LoD \{\} "
                                                 r"holds 3 rows, but the rank table RankTable 'lod_rank_table_1' has "
                                                 r"2 sequences longer than 1"):
        exe.run(main, feed=feed, fetch_list=["out"])
    main, feed = _entries_program([], lens, role=0)
    with pytest.raises(core.EnforceNotMet, match=r"array_to_lod_tensor: X 'array_0.out' has 0 entries"):
        exe.run(main, feed=feed, fetch_list=["out"])
    main, feed = _entries_program([3, 2, 2], lens, role=0)
    feed["e2"] = np.zeros((2, 3))
    with pytest.raises(core.EnforceNotMet, match=r"array_to_lod_tensor: entry 2 of X 'array_0.out' is float64 "
                                                 r"\[2, 3\] with LoD \{\}, unlike entry 0: float64 \[3, 2\] with LoD "
                                                 r"\{\} \(entries differ in dim 0 only\)"):
        exe.run(main, feed=feed, fetch_list=["out"])


def test_lod_tensor_to_array_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        src = L.data("src", shape=[1], dtype="float32", lod_level=2)
        x = L.data("x", shape=[2], dtype="float64", lod_level=1)
        arr = L.lod_tensor_to_array(x, L.lod_rank_table(src, level=0))
        arr1 = L.lod_tensor_to_array(x, L.lod_rank_table(src, level=1))
    exe = fluid.Executor(fluid.CPUPlace())

    def feed(x_lens):
        return {"src": fluid.create_lod_tensor(np.zeros((5, 1), "float32"), [[2, 1], [2, 2, 1]], fluid.CPUPlace()),
                "x": fluid.create_lod_tensor(data(x_lens, width=2), x_lens, fluid.CPUPlace())}

    with pytest.raises(core.EnforceNotMet, match=r"lod_tensor_to_array: the rank table RankTable 'lod_rank_table_1' "
                                                 r"ranks 2 sequences, but X 'x' has 3 at LoD level 0 "
                                                 r"\(\{\{0, 2, 4, 5\}\}\)"):
        exe.run(main, feed=feed([[2, 2, 1]]), fetch_list=[arr])
    with pytest.raises(core.EnforceNotMet, match=r"lod_tensor_to_array: the rank table RankTable 'lod_rank_table_1' "
                                                 r"gives sequence 0 length 2, but in X 'x' \(LoD \{\{0, 1, 3\}\}\) it "
                                                 r"has 1"):
        exe.run(main, feed=feed([[1, 2]]), fetch_list=[arr])
    with pytest.raises(core.EnforceNotMet, match=r"lod_tensor_to_array: X 'x' \[3, 2\] must be a LoDTensor with at "
                                                 r"least 2 LoD level\(s\), got 1"):
        exe.run(main, feed=feed([[2, 1]]), fetch_list=[arr1])


def test_the_ops_are_profiled_as_ordinary_op_events():
    main, _, arr, back, _ = _round_trip_program()
    lens = [[3, 1]]
    feed = {"x": fluid.create_lod_tensor(data(lens, width=2), lens, fluid.CPUPlace())}
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        exe.run(main, feed=feed, fetch_list=[back], return_numpy=False)
    ops = {e["name"]: e for e in fluid.profiler.events() if e["category"] == "Operator"}
    assert {"lod_rank_table", "lod_tensor_to_array", "array_to_lod_tensor", "lod_array_length"} <= set(ops)
    assert ops["lod_tensor_to_array"]["args"].startswith('"inputs":"X[4, 2]({{0, 3, 4}})","outputs":"",')
    assert ops["array_to_lod_tensor"]["args"].startswith('"inputs":"","outputs":"Out[4, 2]({{0, 3, 4}})",')
