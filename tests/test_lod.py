"""LoD end to end, as a Fluid 1.8 user meets it: the LoDTensor API and create_lod_tensor, feeding (exe.run,
DataFeeder, DataLoader/PyReader/py_reader sample generators), fetching, LoD in GLOG op lines, profiler args, the
Chrome trace and print(program), invalid LoD (feed time and a fuzz), and save/load of a LoD.
(Propagation through the ops: test_lod_propagation.py; lod_reset/lod_append: ops/test_lod_reset.py.)"""
import json
import os
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, profiler, unique_name
from fluidlite.lod_tensor import InvalidLoDError

L = fluid.layers
CPU = fluid.CPUPlace()


def _lens(offsets):
    """Recursive sequence lengths of offset-based LoD, level by level."""
    return [[level[i + 1] - level[i] for i in range(len(level) - 1)] for level in offsets]


@pytest.fixture
def exe():
    return fluid.Executor(CPU)


def _scale_program(lod_level=1, width=2, data=fluid.data):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        if data is fluid.data:
            x = fluid.data("x", [None, width], lod_level=lod_level)
        else:
            x = L.data("x", [width], lod_level=lod_level)
        y = L.scale(x, scale=2.0)
    return main, x, y


# ---------------------------------------------------------------- LoDTensor

def test_lodtensor_api_multi_level():
    t = core.LoDTensor()
    arr = np.arange(14, dtype="float64").reshape(7, 2)
    t.set(arr, CPU)
    assert t.shape() == [7, 2] and t._dtype() == core.VarDesc.VarType.FP64 and t.lod() == []
    t.set_recursive_sequence_lengths([[2, 1], [2, 2, 3]])  # Fluid's doc example
    assert t.lod() == [[0, 2, 3], [0, 2, 4, 7]] and t.recursive_sequence_lengths() == [[2, 1], [2, 2, 3]]
    assert t.has_valid_recursive_sequence_lengths()
    t.set_lod([[0, 1, 3], [0, 3, 4, 7]])
    assert t.recursive_sequence_lengths() == [[1, 2], [3, 1, 3]] == _lens(t.lod())
    np.testing.assert_array_equal(np.array(t), arr)
    # each level has one more offset than the next level's entries: levels 3 deep
    t.set_lod([[0, 1], [0, 2], [0, 3, 7]])
    assert t.recursive_sequence_lengths() == [[1], [2], [3, 4]]


def test_lodtensor_from_lengths_then_set_keeps_the_lod():
    """Fluid's pattern: LoDTensor(recursive_sequence_lengths) (or set_lod first), then set(data)."""
    t = fluid.LoDTensor([[2, 3]])
    assert t.lod() == [[0, 2, 5]] and not t._is_initialized()
    t.set(np.ones((5, 1), "int64"), CPU)
    assert t.lod() == [[0, 2, 5]] and t.has_valid_recursive_sequence_lengths()
    t.set(np.ones((4, 1), "int64"), CPU)  # other rows: the LoD stays, and no longer fits
    assert t.lod() == [[0, 2, 5]] and not t.has_valid_recursive_sequence_lengths()
    assert t._lod_problem() == "the last level ends at 5 but the tensor has 4 rows"
    with pytest.raises(ValueError, match=r"LoDTensor.__init__: invalid recursive_sequence_lengths \[\[2\], \[1\]\]: "
                                         r"level 0 ends at 2 but level 1 has 1 entries"):
        fluid.LoDTensor([[2], [1]])


def test_set_lod_checks_the_rows_the_tensor_holds():
    """Fluid 1.8's set_lod/set_recursive_sequence_lengths: CheckLoD(lod, dims[0])."""
    t = core.LoDTensor()
    t.set(np.zeros((5, 3), "float32"), CPU)
    with pytest.raises(ValueError, match=r"LoDTensor.set_lod: invalid LoD \[\[0, 2, 4\]\]: the last level ends at 4 "
                                         r"but the tensor has 5 rows"):
        t.set_lod([[0, 2, 4]])
    with pytest.raises(ValueError, match=r"LoDTensor.set_recursive_sequence_lengths: invalid "
                                         r"recursive_sequence_lengths \[\[2, 4\]\] \(offsets \[\[0, 2, 6\]\]\): the "
                                         r"last level ends at 6 but the tensor has 5 rows"):
        t.set_recursive_sequence_lengths([[2, 4]])
    assert t.lod() == []
    t.set_lod([[0, 0, 5]])  # an empty sequence is fine
    assert t.recursive_sequence_lengths() == [[0, 5]]


def test_lod_problem_and_lengths_problem():
    # the one check behind create_lod_tensor, DataFeeder and the tensor file reader (LoDProblem in csrc/tensor.cc)
    assert core.lod_problem([[0, 2, 5]], 5) == "" and core.lengths_problem([[2, 3]], 5) == ""
    assert core.lengths_problem([[2, 3]], -1) == ""  # structure only
    assert core.lod_problem([[0, 2, 5]], 4) == "the last level ends at 5 but the tensor has 4 rows"
    assert core.lengths_problem([[2, -1]], 1) == "level 0 has the negative value -1 at position 1"
    assert core.lod_problem([[0, 3, 2]], 2) == "level 0 decreases at position 2 (3 then 2)"
    assert core.lengths_problem([[1, 1], [2, 2, 1]], 5) == "level 0 ends at 2 but level 1 has 3 entries"


def test_print_and_repr_of_a_lodtensor():
    t = fluid.create_lod_tensor(np.arange(6, dtype="int64").reshape(3, 2), [[1, 1], [1, 2]], CPU)
    assert str(t) == ("  - lod: {{0, 1, 2}{0, 1, 3}}\n  - place: CPUPlace\n  - shape: [3, 2]\n  - layout: NCHW\n"
                      "  - dtype: int64_t\n  - data: [0 1 2 3 4 5]")
    assert repr(t) == "LoDTensor(int64, [3, 2], CPUPlace, lod {{0, 1, 2}{0, 1, 3}})"
    plain = core.LoDTensor()
    plain.set(np.array([1.5, 2.0], "float32"), CPU)
    assert str(plain) == "  - place: CPUPlace\n  - shape: [2]\n  - layout: NCHW\n  - dtype: float\n  - data: [1.5 2]"


# ---------------------------------------------------------------- create_lod_tensor

def test_create_lod_tensor_from_lists_as_fluid():
    """Fluid 1.8: the innermost items become rows and a trailing dim of 1 is added, whatever their shape."""
    t = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], CPU)
    assert t.shape() == [5, 1] and np.array(t).dtype == np.int64 and t.lod() == [[0, 2, 5]]
    t = fluid.create_lod_tensor([[[0.5, 1.0], [1.5, 2.0]], [[2.5, 3.0]]], [[2, 1]], CPU)
    assert t.shape() == [3, 2, 1] and np.array(t).dtype == np.float64
    np.testing.assert_array_equal(np.array(t)[:, :, 0], [[0.5, 1.0], [1.5, 2.0], [2.5, 3.0]])
    t = fluid.create_lod_tensor([[[1], [2, 3]], [[4]]], [[2, 1], [1, 2, 1]], CPU)  # two levels (a superset)
    assert t.lod() == [[0, 2, 3], [0, 1, 3, 4]] and t.shape() == [4, 1]
    t = fluid.create_lod_tensor(np.zeros((3, 1)), np.array([[1, 2]]), CPU)  # lengths as any sequence (Fluid's book)
    assert t.lod() == [[0, 1, 3]]
    src = fluid.create_lod_tensor(np.arange(4, dtype="float32").reshape(4, 1), [[4]], CPU)
    t = fluid.create_lod_tensor(src, [[1, 3]], CPU)  # a LoDTensor: its values, the new LoD
    assert t.lod() == [[0, 1, 4]] and np.array(t).ravel().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("data, lens, error, match", [
    ([[1, 2], [3]], [[2, 2]], InvalidLoDError,
     r"create_lod_tensor: data and recursive_seq_lens do not match: the sequence lengths of data are \[\[2, 1\]\], "
     r"recursive_seq_lens is \[\[2, 2\]\]"),
    (np.zeros((4, 2)), [[3, 2]], InvalidLoDError,
     r"create_lod_tensor: the provided lod info is invalid for data of shape \[4, 2\]: the last level ends at 5 but "
     r"the tensor has 4 rows"),
    (np.zeros((4, 2)), [[1, 2], [2, 2]], InvalidLoDError,
     r"create_lod_tensor: the provided lod info is invalid for data of shape \[4, 2\]: level 0 ends at 3 but level "
     r"1 has 2 entries"),
    ([[1, 2], [3]], [], InvalidLoDError, r"create_lod_tensor: a list needs at least one level"),
    ("abc", [[3]], TypeError, r"create_lod_tensor: data should be either a LoDTensor, a Numpy array or a list, got "
                              r"str"),
    (np.zeros((4, 2)), [2, 2], TypeError, r"create_lod_tensor: recursive_seq_lens must be a list of lists"),
    ([[[1, 2], [3]]], [[2]], TypeError, r"create_lod_tensor: the rows of data have different shapes"),
])
def test_create_lod_tensor_errors(data, lens, error, match):
    with pytest.raises(error, match=match) as info:
        fluid.create_lod_tensor(data, lens, CPU)
    if error is InvalidLoDError:  # what Fluid's asserts raise, and a ValueError
        assert isinstance(info.value, AssertionError) and isinstance(info.value, ValueError)


def test_create_random_int_lodtensor():
    np.random.seed(0)
    t = fluid.create_random_int_lodtensor([[1, 2], [2, 1, 3]], [3], CPU, low=-2, high=2)
    a = np.array(t)
    assert t.lod() == [[0, 1, 3], [0, 2, 3, 6]] and a.shape == (6, 3) and a.dtype == np.int64
    assert a.min() >= -2 and a.max() <= 2 and len(np.unique(a)) == 5  # both bounds inclusive
    with pytest.raises(TypeError, match="create_random_int_lodtensor: base_shape should be a list, got tuple"):
        fluid.create_random_int_lodtensor([[2]], (3,), CPU, 0, 1)
    with pytest.raises(ValueError, match=r"low \(3\) must not exceed high \(1\)"):
        fluid.create_random_int_lodtensor([[2]], [1], CPU, 3, 1)


# ---------------------------------------------------------------- feeding

@pytest.mark.parametrize("data", [fluid.data, L.data])
def test_exe_run_feeds_lodtensors_and_pairs(exe, data):
    main, x, y = _scale_program(lod_level=2, data=data)
    arr = np.arange(10, dtype="float32").reshape(5, 2)
    for fed in (fluid.create_lod_tensor(arr, [[2, 1], [1, 1, 3]], CPU), (arr, [[2, 1], [1, 1, 3]]),
                (arr.tolist(), [[2, 1], [1, 1, 3]])):
        got, = exe.run(main, feed={"x": fed}, fetch_list=[y], return_numpy=False)
        assert got.recursive_sequence_lengths() == [[2, 1], [1, 1, 3]]
        np.testing.assert_array_equal(np.array(got), arr * 2)


def test_feeding_an_invalid_lod_is_an_error_naming_the_variable_and_offsets(exe):
    main, x, y = _scale_program()
    with pytest.raises(ValueError, match=r"feed: variable 'x': create_lod_tensor: the provided lod info is invalid "
                                         r"for data of shape \[4, 2\]: the last level ends at 5 but the tensor has 4 "
                                         r"rows"):
        exe.run(main, feed={"x": (np.zeros((4, 2), "float32"), [[2, 3]])}, fetch_list=[y])
    t = fluid.LoDTensor([[2, 3]])
    t.set(np.zeros((4, 2), "float32"), CPU)  # the LoD no longer fits the rows
    with pytest.raises(core.FeedError, match=r"feed: variable 'x' \[4, 2\] is fed the invalid LoD \{\{0, 2, 5\}\}: the "
                                             r"last level ends at 5 but the tensor has 4 rows") as info:
        exe.run(main, feed={"x": t}, fetch_list=[y])
    assert isinstance(info.value, ValueError)
    t2 = fluid.LoDTensor([[1, 1], [2, 2]])  # level 0 says 2 entries, level 1 has 2: fine; rows 4
    t2.set(np.zeros((4, 2), "float32"), CPU)
    got, = exe.run(main, feed={"x": t2}, fetch_list=[y], return_numpy=False)
    assert got.lod() == [[0, 1, 2], [0, 2, 4]]


def test_fluid_data_checks_the_shape_of_a_lod_feed(exe):
    main, x, y = _scale_program(width=2)
    with pytest.raises(core.FeedError, match=r"The fed Variable 'x' should have dimensions = 2, shape = \[-1, 2\], but "
                                             r"received fed shape \[5, 3\] on each device"):
        exe.run(main, feed={"x": fluid.create_lod_tensor(np.zeros((5, 3), "float32"), [[5]], CPU)}, fetch_list=[y])
    with pytest.raises(core.FeedError, match=r"The data type of fed Variable 'x' must be float32, but received "
                                             r"float64"):
        exe.run(main, feed={"x": fluid.create_lod_tensor(np.zeros((5, 2)), [[5]], CPU)}, fetch_list=[y])


def test_a_lod_feed_skips_dim_0_and_may_carry_create_lod_tensors_trailing_1(exe):
    # Fluid's feed check skips dim 0 of a tensor that holds a LoD (DiffTensorShapeWithVarDesc), and its
    # create_lod_tensor gives list data a trailing dim of 1 that the book then feeds to fluid.data(shape=[None],
    # lod_level=1): that [T, 1] feed is viewed as the declared [T] (the data is not copied).
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        words = fluid.data("words", [None], "int64", lod_level=1)
        fixed = fluid.data("fixed", [4, 2], lod_level=1)
        emb = fluid.embedding(words, size=[10, 3])
        y = L.scale(fixed, scale=2.0)
    exe.run(startup)
    ids = fluid.create_lod_tensor([[1, 2, 3], [4, 5]], [[3, 2]], CPU)
    assert ids.shape() == [5, 1]
    x = fluid.create_lod_tensor(np.ones((6, 2), "float32"), [[2, 4]], CPU)  # 6 rows for the declared 4
    got_emb, got_y = exe.run(main, feed={"words": ids, "fixed": x}, fetch_list=[emb, y], return_numpy=False)
    assert np.array(got_emb).shape == (5, 3) and got_emb.recursive_sequence_lengths() == [[3, 2]]
    np.testing.assert_array_equal(np.array(got_y), np.full((6, 2), 2.0, "float32"))
    assert ids.shape() == [5, 1]  # the fed tensor itself keeps its shape
    # without a LoD both are the plain check's errors, and only a trailing 1 is dropped
    with pytest.raises(core.FeedError, match=r"The fed Variable 'words' should have dimensions = 1, shape = \[-1\], "
                                             r"but received fed shape \[5, 1\] on each device"):
        exe.run(main, feed={"words": np.array(ids), "fixed": x}, fetch_list=[emb])
    with pytest.raises(core.FeedError, match=r"The fed Variable 'fixed' should have dimensions = 2, shape = \[4, 2\], "
                                             r"but received fed shape \[6, 2\] on each device"):
        exe.run(main, feed={"words": ids, "fixed": np.ones((6, 2), "float32")}, fetch_list=[y])
    with pytest.raises(core.FeedError, match=r"The fed Variable 'words' should have dimensions = 1, shape = \[-1\], "
                                             r"but received fed shape \[5, 2\] on each device"):
        exe.run(main, feed={"words": fluid.create_lod_tensor(np.zeros((5, 2), "int64"), [[3, 2]], CPU), "fixed": x},
                fetch_list=[emb])


def test_data_feeder_two_levels_and_errors():
    with unique_name.guard(), fluid.program_guard(fluid.Program(), fluid.Program()):
        para = L.data("para", [1], "int64", lod_level=2)  # paragraphs of sentences of word ids
        label = L.data("label", [1], "int64")
        feeder = fluid.DataFeeder([para, label], CPU)
        batch = [([[1, 2], [3]], 0), ([[4, 5, 6]], 1)]
        got = feeder.feed(batch)
        assert got["para"].recursive_sequence_lengths() == [[2, 1], [2, 1, 3]]
        np.testing.assert_array_equal(np.array(got["para"]).ravel(), [1, 2, 3, 4, 5, 6])
        assert got["para"].shape() == [6, 1] and got["label"].lod() == []
        with pytest.raises(TypeError, match=r"DataFeeder: variable 'para' has lod_level 2, but sample 1's field \[4, "
                                            r"5\] is not a sequence nested that deep"):
            feeder.feed([([[1]], 0), ([4, 5], 1)])


def _lod_net():
    """Word ids (lod_level 1) and paragraphs (lod_level 2) -> embedding -> fc, and a label."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        words = fluid.data("words", [None, 1], "int64", lod_level=1)
        para = fluid.data("para", [None, 1], "int64", lod_level=2)
        label = fluid.data("label", [None, 1], "int64")
        emb = L.embedding(words, size=[10, 4])
        out = L.fc(emb, size=3)
        pemb = L.embedding(para, size=[10, 4])
    return main, startup, [words, para, label], out, pemb


def _samples(n):
    rng = np.random.RandomState(n)
    for i in range(n):
        words = rng.randint(0, 10, i % 3 + 1).tolist()
        para = [rng.randint(0, 10, k + 1).tolist() for k in range(i % 2 + 1)]
        yield [words, para, [i]]


def _check_batch(feed, samples):
    words = feed["words"]
    assert words.recursive_sequence_lengths() == [[len(s[0]) for s in samples]]
    np.testing.assert_array_equal(np.array(words).ravel(), [w for s in samples for w in s[0]])
    para = feed["para"]
    assert para.recursive_sequence_lengths() == [[len(s[1]) for s in samples],
                                                 [len(sent) for s in samples for sent in s[1]]]
    np.testing.assert_array_equal(np.array(feed["label"]).ravel(), [s[2][0] for s in samples])


@pytest.mark.parametrize("setter", ["sample", "sample_list"])
def test_dataloader_sample_generators_with_lod(exe, setter):
    main, startup, feed_list, out, pemb = _lod_net()
    loader = fluid.io.DataLoader.from_generator(feed_list=feed_list, capacity=3)
    if setter == "sample":
        loader.set_sample_generator(lambda: _samples(7), batch_size=3, drop_last=False, places=CPU)
    else:
        loader.set_sample_list_generator(fluid.io.batch(lambda: _samples(7), 3), places=CPU)
    exe.run(startup)
    all_samples = list(_samples(7))
    seen = 0
    for step, data in enumerate(loader()):
        samples = all_samples[3 * step:3 * step + 3]
        _check_batch(data[0], samples)
        r_out, r_pemb = exe.run(main, feed=data, fetch_list=[out, pemb], return_numpy=False)
        assert r_out.recursive_sequence_lengths() == [[len(s[0]) for s in samples]]
        assert r_pemb.lod() == data[0]["para"].lod()
        seen += len(samples)
    assert seen == 7


def test_non_iterable_loader_pyreader_and_py_reader_with_lod(exe):
    main, startup, feed_list, out, pemb = _lod_net()
    with fluid.program_guard(main, startup):
        loader = fluid.io.DataLoader.from_generator(feed_list=feed_list, capacity=2, iterable=False)
    loader.set_sample_generator(lambda: _samples(4), batch_size=2)
    exe.run(startup)
    loader.start()
    got = []
    try:
        while True:
            got.append(exe.run(main, fetch_list=[out], return_numpy=False)[0].recursive_sequence_lengths())
    except core.EOFException:
        loader.reset()
    assert got == [[[1, 2]], [[3, 1]]]

    main, startup, feed_list, out, pemb = _lod_net()
    reader = fluid.io.PyReader(feed_list=feed_list, capacity=2)
    reader.decorate_sample_list_generator(fluid.io.batch(lambda: _samples(3), 3), places=CPU)
    data = next(iter(reader()))
    _check_batch(data[0], list(_samples(3)))

    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        r = L.py_reader(capacity=2, shapes=[[-1, 1], [-1, 1]], dtypes=["int64", "int64"], lod_levels=[1, 0])
        words, label = L.read_file(r)
        emb = L.embedding(words, size=[10, 2])
    r.decorate_paddle_reader(fluid.io.batch(lambda: ([s[0], s[2]] for s in _samples(3)), 3))
    exe.run(startup)
    r.start()
    e, = exe.run(main, fetch_list=[emb], return_numpy=False)
    assert e.recursive_sequence_lengths() == [[1, 2, 3]]
    r.reset()


# ---------------------------------------------------------------- fetching

FLUID_FETCH_MESSAGE = ("Some of your fetched tensors hold LoD information." + " " * 13 + "They can not be completely "
                       "cast to Python ndarray." + " " * 13 + "Please set the parameter 'return_numpy' as 'False' "
                       "to" + " " * 13 + "return LoDTensor itself directly.")


def test_fetching_a_lod_tensor(exe):
    main, x, y = _scale_program()
    with fluid.program_guard(main):
        total = L.reduce_sum(y)  # reduces over dim 0: no LoD
    t = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], CPU)
    got = exe.run(main, feed={"x": t}, fetch_list=[y, total], return_numpy=False)
    assert isinstance(got[0], core.LoDTensor) and got[0].lod() == [[0, 1, 3]] and got[1].lod() == []
    r, = exe.run(main, feed={"x": t}, fetch_list=[total])  # return_numpy=True without LoD: an array
    assert float(r) == 12.0
    with pytest.raises(RuntimeError) as info:
        exe.run(main, feed={"x": t}, fetch_list=[y, total])
    assert str(info.value) == FLUID_FETCH_MESSAGE and not isinstance(info.value, core.EnforceNotMet)
    r, = exe.run(main, feed={"x": np.ones((3, 2), "float32")}, fetch_list=[y])  # not fed a LoD: fine
    np.testing.assert_array_equal(r, np.full((3, 2), 2.0))


# ---------------------------------------------------------------- showing LoD

def test_glog_op_lines_show_the_lod(exe, capfd):
    main, x, y = _scale_program(lod_level=2)
    t = fluid.create_lod_tensor(np.ones((5, 2), "float32"), [[1, 1], [2, 3]], CPU)
    capfd.readouterr()
    with fluid.log.vlog_guard(level=4):
        exe.run(main, feed={"x": t}, fetch_list=[y], return_numpy=False)
    err = capfd.readouterr().err
    assert re.search(r"\] CPUPlace Op\(scale\), inputs:\{X\[x:float\[5, 2\]\(\{\{0, 1, 2\}\{0, 2, 5\}\}\)\]\}, "
                     r"outputs:\{Out\[scale_0\.tmp_0\[uninited\]\]\}\.$", err, re.M), err
    assert re.search(r"\] CPUPlace Op\(scale\), inputs:\{X\[x:float\[5, 2\]\(\{\{0, 1, 2\}\{0, 2, 5\}\}\)\]\}, "
                     r"outputs:\{Out\[scale_0\.tmp_0:float\[5, 2\]\(\{\{0, 1, 2\}\{0, 2, 5\}\}\)\]\}\.$", err, re.M)
    capfd.readouterr()
    with fluid.log.vlog_guard(level=3):
        exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[y])
    assert "Op(scale), inputs:{X[x:float[2, 2]({})]}, outputs:{Out[scale_0.tmp_0:float[2, 2]({})]}." in \
        capfd.readouterr().err


def test_profiler_args_and_chrome_trace_show_the_lod(exe, tmp_path):
    main, x, y = _scale_program()
    path = str(tmp_path / "trace.json")
    batches = [fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], CPU),
               fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[2, 1]], CPU),
               fluid.create_lod_tensor(np.ones((10, 2), "float32"), [[1] * 10], CPU),
               np.ones((3, 2), "float32")]
    with profiler.profiler("CPU", profile_path=path, print_report=False):
        for b in batches:
            exe.run(main, feed={"x": b}, fetch_list=[y], return_numpy=False)
    args = [e["args"].split(",\"input_vars\"")[0] for e in profiler.events() if e["name"] == "scale"]  # shapes, LoD
    assert args == ['"inputs":"X[3, 2]({{0, 1, 3}})","outputs":"Out[3, 2]({{0, 1, 3}})"',
                    '"inputs":"X[3, 2]({{0, 2, 3}})","outputs":"Out[3, 2]({{0, 2, 3}})"',  # same dims, new LoD
                    '"inputs":"X[10, 2]({{0, 1, 2, 3, 4, 5, ..., 10}})","outputs":"Out[10, 2]({{0, 1, 2, 3, 4, 5, '
                    '..., 10}})"',
                    '"inputs":"X[3, 2]","outputs":"Out[3, 2]"']
    with open(path) as f:
        trace = [e for e in json.load(f)["traceEvents"] if e.get("name") == "scale"]
    assert {k: trace[0]["args"][k] for k in ("inputs", "outputs")} == {"inputs": "X[3, 2]({{0, 1, 3}})",
                                                                     "outputs": "Out[3, 2]({{0, 1, 3}})"}


def test_print_program_shows_lod_levels():
    main, x, y = _scale_program(lod_level=2)
    with fluid.program_guard(main):
        z = L.reduce_sum(y)
    text = str(main)
    assert "var x : LOD_TENSOR.shape(-1, 2).dtype(float32).lod_level(2)\n" in text
    assert "var scale_0.tmp_0 : LOD_TENSOR.shape(-1, 2).dtype(float32).lod_level(2)\n" in text
    assert re.search(r"var %s : LOD_TENSOR\.shape\(1\)\.dtype\(float32\)\n" % re.escape(z.name), text)
    assert str(x) == "var x : LOD_TENSOR.shape(-1, 2).dtype(float32).lod_level(2)"
    assert "lod_level" not in str(z)
    assert "var x : LOD_TENSOR.shape(-1, 2).dtype(float32).lod_level(2)" in str(main.global_block())


# ---------------------------------------------------------------- invalid LoD: a fuzz

def test_fuzzed_lods_never_reach_a_kernel_unchecked(exe):
    """Random LoDs set from Python on random rows: set_lod accepts only LoDs that fit (else ValueError), a LoD left
    stale by set() is refused at feed time, and the accepted ones run through ops that pass the LoD on
    (fc) and rewrite it (lod_reset from Y's LoD) with the LoD intact."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = L.data("x", [3], lod_level=1)
        h = L.fc(x, size=2)
        y = L.data("y", [1], lod_level=1)
        r = L.lod_reset(h, y)
    exe.run(startup)
    rng = np.random.RandomState(5)
    accepted = refused = stale = 0
    def well_formed(rows):  # one or two levels over `rows` (the upper one over the lower one's entries)
        cuts = sorted(rng.randint(0, rows + 1, int(rng.randint(0, 4))).tolist())
        lower = [0] + cuts + [rows]
        if rng.rand() < 0.5:
            return [lower]
        upper = sorted(rng.randint(0, len(lower), int(rng.randint(0, 3))).tolist())
        return [[0] + upper + [len(lower) - 1], lower]

    for _ in range(300):
        rows = int(rng.randint(0, 6))
        if rng.rand() < 0.5:
            lod = well_formed(rows)
        else:  # garbage: random offsets, negative ones, huge ones
            lod = [sorted(rng.randint(-1, 8, int(rng.randint(1, 5))).tolist()) for _ in range(rng.randint(1, 3))]
            if rng.rand() < 0.3:
                lod[-1] = lod[-1] + [2 ** 62]
        t = core.LoDTensor()
        t.set(np.ones((rows, 3), "float32"), CPU)
        try:
            t.set_lod(lod)
        except ValueError:
            refused += 1
            continue
        if rng.rand() < 0.5:  # rows changed after the LoD was set: stale
            t.set(np.ones((rows + 1, 3), "float32"), CPU)
            with pytest.raises(core.FeedError, match="is fed the invalid LoD"):
                exe.run(main, feed={"x": t, "y": t}, fetch_list=[h], return_numpy=False)
            stale += 1
            continue
        accepted += 1
        if rows == 0:
            continue
        got_h, got_r = exe.run(main, feed={"x": t, "y": t}, fetch_list=[h, r], return_numpy=False)
        assert got_h.lod() == t.lod() == got_r.lod() and got_h.shape() == [rows, 2]
    assert accepted > 50 and refused > 80 and stale > 30, (accepted, refused, stale)


# ---------------------------------------------------------------- save / load

def _persistable_with_lod(lod=((0, 2, 5),)):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        v = main.global_block().create_var(name="seq_state", shape=[-1, 3], dtype="float32", persistable=True,
                                           lod_level=len(lod))
        w = main.global_block().create_var(name="plain", shape=[2], dtype="float32", persistable=True)
    scope = fluid.global_scope()
    arr = np.arange(15, dtype="float32").reshape(5, 3)
    t = scope.var("seq_state").get_tensor()
    t.set_lod([])
    t.set(arr, CPU)
    t.set_lod([list(level) for level in lod])
    scope.var("plain").get_tensor().set(np.ones(2, "float32"), CPU)
    return main, v, w, arr


@pytest.mark.parametrize("filename", [None, "all_vars"])
def test_save_and_load_vars_keep_the_lod(exe, tmp_path, filename):
    main, v, w, arr = _persistable_with_lod([[0, 1, 2], [0, 2, 5]])
    fluid.io.save_persistables(exe, str(tmp_path), main, filename=filename)
    scope = fluid.global_scope()
    for name in ("seq_state", "plain"):
        t = scope.var(name).get_tensor()
        t.set_lod([])
        t.set(np.zeros_like(np.array(t)), CPU)
    fluid.io.load_vars(exe, str(tmp_path), main, vars=[v, w], filename=filename)
    t = scope.find_var("seq_state").get_tensor()
    assert t.lod() == [[0, 1, 2], [0, 2, 5]]
    np.testing.assert_array_equal(np.array(t), arr)
    assert scope.find_var("plain").get_tensor().lod() == []
    if filename is None:  # a tensor without LoD keeps the version-1 record
        with open(tmp_path / "plain", "rb") as f:
            assert f.read(12)[8:] == (1).to_bytes(4, "little")
        with open(tmp_path / "seq_state", "rb") as f:
            assert f.read(12)[8:] == (2).to_bytes(4, "little")


def test_inference_model_keeps_a_persistable_lod(exe, tmp_path):
    main, v, w, arr = _persistable_with_lod()
    with fluid.program_guard(main):
        x = fluid.data("x", [None, 3])
        out = L.elementwise_add(x, main.global_block().var("seq_state"))
    fluid.io.save_inference_model(str(tmp_path), ["x"], [out], exe, main)
    fluid.global_scope().var("seq_state").get_tensor().set_lod([])
    program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert fluid.global_scope().find_var("seq_state").get_tensor().lod() == [[0, 2, 5]]


def _crafted(tmp_path, levels_block):
    """A version-2 tensor file of a [5, 3] float32 tensor with the given raw LoD block."""
    import struct
    data = np.zeros((5, 3), "float32").tobytes()
    header = b"FLTENSOR" + struct.pack("<III", 2, int(core.VarDesc.VarType.FP32), 2) + struct.pack("<2q", 5, 3)
    path = tmp_path / "seq_state"
    with open(path, "wb") as f:
        import zlib
        f.write(header + levels_block + struct.pack("<QI", len(data), zlib.crc32(data)) + data)
    return path


@pytest.mark.parametrize("block, match", [
    ((1).to_bytes(4, "little") + (3).to_bytes(8, "little") + b"".join(v.to_bytes(8, "little") for v in (0, 4, 2)),
     r"corrupt LoD: level 0 decreases at position 2 \(4 then 2\)"),
    ((1).to_bytes(4, "little") + (3).to_bytes(8, "little") + b"".join(v.to_bytes(8, "little") for v in (0, 2, 9)),
     r"corrupt LoD: the last level ends at 9 but the tensor has 5 rows"),
    ((1).to_bytes(4, "little") + (2 ** 40).to_bytes(8, "little"), r"corrupt header \(a LoD level of 1099511627776 "
                                                                   r"offsets\)"),
    ((100000).to_bytes(4, "little"), r"corrupt header \(100000 LoD levels\)"),
    ((2).to_bytes(4, "little") + (2).to_bytes(8, "little") + b"".join(v.to_bytes(8, "little") for v in (0, 3))
     + (3).to_bytes(8, "little") + b"".join(v.to_bytes(8, "little") for v in (0, 2, 5)),
     r"corrupt LoD: level 0 ends at 3 but level 1 has 2 entries"),
])
def test_a_crafted_lod_in_a_tensor_file_is_an_error(exe, tmp_path, block, match):
    main, v, w, arr = _persistable_with_lod()
    _crafted(tmp_path, block)
    with pytest.raises(core.EnforceNotMet, match=match):
        fluid.io.load_vars(exe, str(tmp_path), main, vars=[v])
    assert fluid.global_scope().find_var("seq_state").get_tensor().lod() == [[0, 2, 5]]  # nothing was set


def test_fluid_save_and_load_keep_parameters_without_lod(exe, tmp_path):
    """fluid.save writes Fluid's pickles of numpy arrays: no LoD, as in Fluid; arrays round-trip."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        words = fluid.data("words", [None, 1], "int64", lod_level=1)
        L.fc(L.embedding(words, size=[10, 4]), size=2)
    exe.run(startup)
    before = {p.name: np.array(fluid.global_scope().find_var(p.name).get_tensor()) for p in main.all_parameters()}
    fluid.save(main, str(tmp_path / "m"))
    exe.run(startup)
    fluid.load(main, str(tmp_path / "m"), exe)
    for name, arr in before.items():
        np.testing.assert_array_equal(np.array(fluid.global_scope().find_var(name).get_tensor()), arr)
    assert os.path.exists(str(tmp_path / "m.pdparams"))
