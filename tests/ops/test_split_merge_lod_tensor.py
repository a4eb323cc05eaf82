"""split_lod_tensor and merge_lod_tensor (kernels/split_merge_lod_tensor.cc), IfElse's routing of items (the
sequences of a LoD level, or rows) by a bool [N, 1] mask: values and LoD against a numpy reference written item by
item, over rows, one- and two-level LoD, empty and one-element sequences, a single sequence, all-true and all-false
masks; merge(split(x)) == x; gradients (each op the other's) against central differences; errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from op_test import OpTest

L = fluid.layers


def item(x, lens, level, i):
    """Item i of x at `level`: (its rows, its lengths at the levels from `level` down); a row when x has no such
    level."""
    if level >= len(lens):
        return x[i:i + 1], []
    start, end, sub = i, i + 1, []
    for lengths in lens[level:]:
        sub.append(list(lengths[start:end]))
        start, end = sum(lengths[:start]), sum(lengths[:end])
    return x[start:end], sub


def n_items(x, lens, level):
    return len(lens[level]) if level < len(lens) else x.shape[0]


def split_ref(x, lens, mask, level):
    """((true rows, true lengths), (false rows, false lengths)), item by item."""
    parts = {True: ([], None), False: ([], None)}
    for i, m in enumerate(mask.reshape(-1)):
        rows, sub = item(x, lens, level, i)
        chunks, lod = parts[bool(m)]
        chunks.append(rows)
        if lod is None:
            lod = [[] for _ in sub]
        for level_lens, s in zip(lod, sub):
            level_lens.extend(s)
        parts[bool(m)] = (chunks, lod)
    out = []
    for side in (True, False):
        chunks, lod = parts[side]
        data = np.concatenate(chunks) if chunks else np.zeros((0,) + x.shape[1:], x.dtype)
        out.append((data, lod if chunks else []))  # a side no item went to has no LoD
    return out


def merge_ref(in_true, true_lens, in_false, false_lens, mask, x_lens, level):
    """Out rows and LoD: item i from the next of in_true if mask[i] else in_false; x's first `level` levels above."""
    nxt = {True: 0, False: 0}
    chunks, sub = [], None
    for m in mask.reshape(-1):
        m = bool(m)
        data, lens = (in_true, true_lens) if m else (in_false, false_lens)
        rows, s = item(data, lens, 0, nxt[m])
        nxt[m] += 1
        chunks.append(rows)
        if sub is None:
            sub = [[] for _ in s]
        for level_lens, part in zip(sub, s):
            level_lens.extend(part)
    data = np.concatenate(chunks) if chunks else np.zeros((0,) + in_true.shape[1:], in_true.dtype)
    return data, [list(v) for v in x_lens[:level]] + (sub or [])


def _with_lod(data, lens):
    return (data, lens) if lens else data


CASES = [  # (x rows, recursive lengths, mask, level)
    ("rows", 5, [], [1, 0, 0, 1, 1], 0),
    ("one_level", 6, [[2, 0, 3, 1]], [1, 0, 1, 0], 0),
    ("empty_and_single_sequences", 3, [[0, 1, 0, 2]], [0, 1, 1, 0], 0),
    ("single_sequence", 4, [[4]], [1], 0),
    ("all_false", 5, [[3, 2]], [0, 0], 0),
    ("two_levels_at_0", 6, [[2, 1], [1, 2, 3]], [0, 1], 0),
    ("two_levels_at_1", 6, [[2, 1], [1, 2, 3]], [1, 0, 1], 1),
    ("level_past_the_lod", 4, [[1, 3]], [1, 1, 0, 1], 1),
]


def _case(rows, lens, mask, dtype="float32"):
    x = (np.arange(rows * 3).reshape(rows, 3) * 0.5 - 2).astype(dtype)
    return x, np.array(mask, bool).reshape(-1, 1)


@pytest.mark.parametrize("name,rows,lens,mask,level", CASES, ids=[c[0] for c in CASES])
def test_split_matches_the_item_by_item_reference(name, rows, lens, mask, level):
    x, m = _case(rows, lens, mask)
    (t, tl), (f, fl) = split_ref(x, lens, m, level)
    OpTest("split_lod_tensor", {"X": _with_lod(x, lens), "Mask": m},
           {"OutTrue": (t, tl), "OutFalse": (f, fl)}, {"level": level}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("name,rows,lens,mask,level", CASES, ids=[c[0] for c in CASES])
def test_merge_matches_the_item_by_item_reference(name, rows, lens, mask, level):
    x, m = _case(rows, lens, mask)
    (t, tl), (f, fl) = split_ref(x, lens, m, level)
    t, f = t * 10, f - 1  # what the branches made of them
    want, want_lens = merge_ref(t, tl, f, fl, m, lens, level)
    OpTest("merge_lod_tensor", {"X": _with_lod(x, lens), "Mask": m, "InTrue": _with_lod(t, tl),
                                "InFalse": _with_lod(f, fl)},
           {"Out": (want, want_lens) if want_lens else want}, {"level": level}).check_output(atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "bool"])
def test_other_dtypes(dtype):
    x, m = _case(4, [[1, 3]], [0, 1], dtype)
    (t, tl), (f, fl) = split_ref(x, [[1, 3]], m, 0)
    OpTest("split_lod_tensor", {"X": (x, [[1, 3]]), "Mask": m},
           {"OutTrue": (t, tl), "OutFalse": (f, fl)}).check_output()
    OpTest("merge_lod_tensor", {"X": m, "Mask": m, "InTrue": (t, tl), "InFalse": (f, fl)},
           {"Out": (x, [[1, 3]])}).check_output()


@pytest.mark.parametrize("lens,mask,level", [([], [1, 0, 1, 1, 0], 0), ([[2, 1, 2]], [0, 1, 1], 0),
                                             ([[2, 1], [2, 1, 2]], [1, 0, 1], 1)])
def test_merge_of_split_is_the_input(lens, mask, level):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 3], dtype="float32", append_batch_size=False, lod_level=len(lens))
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        t, f = fluid.layers.branches.split_lod_tensor(x, c, level=level)
        out = fluid.layers.branches.merge_lod_tensor(t, f, x, c, level=level)
    assert out.lod_level == len(lens) and t.lod_level == max(len(lens) - level, 0)
    xv, m = _case(5, lens, mask)
    feed = {"x": fluid.create_lod_tensor(xv, lens, fluid.CPUPlace()) if lens else xv, "c": m}
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out], return_numpy=False)
    np.testing.assert_array_equal(np.array(got), xv)
    assert got.recursive_sequence_lengths() == lens


def test_split_gradient():
    x = np.random.RandomState(0).randn(6, 2)
    m = np.array([1, 0, 1], bool).reshape(3, 1)
    OpTest("split_lod_tensor", {"X": (x, [[2, 1, 3]]), "Mask": m}, {"OutTrue": None, "OutFalse": None}).check_grad(
        ["X"], ["OutTrue", "OutFalse"])


def test_merge_gradient():
    rng = np.random.RandomState(1)
    t, f = rng.randn(3, 2), rng.randn(4, 2)
    m = np.array([0, 1, 1, 0], bool).reshape(4, 1)
    OpTest("merge_lod_tensor", {"X": m, "Mask": m, "InTrue": (t, [[2, 1]]), "InFalse": (f, [[3, 1]])},
           {"Out": None}).check_grad(["InTrue", "InFalse"], "Out")


def test_merge_reads_only_the_inputs_the_mask_sends_items_to():
    # An IfElse branch that no row went to did not run: its output is stale or was never computed.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        f = L.data(name="f", shape=[-1, 2], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        never = main.global_block().create_var(name="never", dtype="float32", shape=[-1, 2])
        out = fluid.layers.branches.merge_lod_tensor(never, f, c, c)
    exe = fluid.Executor(fluid.CPUPlace())
    fv = np.arange(6, dtype="float32").reshape(3, 2)
    got, = exe.run(main, feed={"f": fv, "c": np.zeros((3, 1), bool)}, fetch_list=[out])
    np.testing.assert_array_equal(got, fv)
    with pytest.raises(core.EnforceNotMet, match="merge_lod_tensor: Mask sends 1 items to InTrue 'never', which is "
                                                 "not initialized"):
        exe.run(main, feed={"f": fv[:2], "c": np.array([[0], [1], [0]], bool)}, fetch_list=[out])


# ------------------------------------------------------------------ errors

def _run_split(xv, lens, mask, level=0):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 3], dtype="float32", append_batch_size=False, lod_level=len(lens))
        c = L.data(name="c", shape=[-1, 1], dtype=mask.dtype, append_batch_size=False)
        t, f = fluid.layers.branches.split_lod_tensor(x, c, level=level)
    feed = {"x": fluid.create_lod_tensor(xv, lens, fluid.CPUPlace()) if lens else xv, "c": mask}
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[t, f], return_numpy=False)


def test_split_needs_one_mask_entry_per_item():
    xv = np.ones((5, 3), "float32")
    with pytest.raises(core.EnforceNotMet, match=r"split_lod_tensor: Mask 'c' has 3 entries but X 'x' \[5, 3\] "
                                                 r"\(LoD \{\{0, 2, 5\}\}\) has 2 sequences at level 0"):
        _run_split(xv, [[2, 3]], np.ones((3, 1), bool))
    with pytest.raises(core.EnforceNotMet, match=r"split_lod_tensor: Mask 'c' has 2 entries but X 'x' \[5, 3\] "
                                                 r"\(LoD \{\}\) has 5 rows at level 0"):
        _run_split(xv, [], np.ones((2, 1), bool))


def test_the_mask_must_be_bool_and_n_by_1():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data(name="x", shape=[-1, 3], dtype="float32", append_batch_size=False)
        flat = L.data(name="flat", shape=[-1], dtype="bool", append_batch_size=False)
        ints = L.data(name="ints", shape=[-1, 1], dtype="int32", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"split_lod_tensor: Mask 'flat' \[-1\] must be a 2-D \[N, 1\] "
                                                     r"tensor \(with fluid.layers.IfElse\(cond\): cond must be "
                                                     r"\[N, 1\]\)"):
            fluid.layers.branches.split_lod_tensor(x, flat)
        with pytest.raises(core.EnforceNotMet,
                           match=r"merge_lod_tensor: Mask 'ints' \[-1, 1\] must be bool, got int32"):
            fluid.layers.branches.merge_lod_tensor(x, x, x, ints)
        with pytest.raises(core.EnforceNotMet, match=r"split_lod_tensor: attribute 'level'"):
            fluid.layers.branches.split_lod_tensor(x, L.cast(ints, "bool"), level=-1)


def test_merge_checks_its_inputs():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        a = L.data(name="a", shape=[-1, 3], dtype="float32", append_batch_size=False)
        b = L.data(name="b", shape=[-1, 4], dtype="float32", append_batch_size=False)
        d = L.data(name="d", shape=[-1, 3], dtype="float64", append_batch_size=False)
        with pytest.raises(core.EnforceNotMet, match=r"merge_lod_tensor: InTrue 'a' \[-1, 3\] and InFalse 'b' "
                                                     r"\[-1, 4\] must agree in every dim but the first"):
            fluid.layers.branches.merge_lod_tensor(a, b, c, c)
        with pytest.raises(core.EnforceNotMet, match=r"merge_lod_tensor: InTrue 'a' \[-1, 3\] is float32 but "
                                                     r"InFalse 'd' \[-1, 3\] is float64"):
            fluid.layers.branches.merge_lod_tensor(a, d, c, c)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        t = L.data(name="t", shape=[-1, 2], dtype="float32", append_batch_size=False, lod_level=1)
        f = L.data(name="f", shape=[-1, 2], dtype="float32", append_batch_size=False)
        out = fluid.layers.branches.merge_lod_tensor(t, f, c, c)
    exe = fluid.Executor(fluid.CPUPlace())
    tv = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], fluid.CPUPlace())
    mask = np.array([[1], [0], [1]], bool)
    with pytest.raises(core.EnforceNotMet, match=r"merge_lod_tensor: Mask 'c' sends 1 items to InFalse 'f' \[2, 2\] "
                                                 r"\(LoD \{\}\), which has 2 rows"):
        exe.run(main, feed={"c": mask, "t": tv, "f": np.ones((2, 2), "float32")}, fetch_list=[out])
    with pytest.raises(core.EnforceNotMet, match=r"merge_lod_tensor: InTrue 't' float32 \[3, 2\] \(LoD "
                                                 r"\{\{0, 1, 3\}\}\) and InFalse 'f' float32 \[1, 2\] \(LoD \{\}\) "
                                                 r"must agree in dtype, LoD levels and every dim but the first"):
        exe.run(main, feed={"c": mask, "t": tv, "f": np.ones((1, 2), "float32")}, fetch_list=[out])
