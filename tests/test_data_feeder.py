"""fluid.DataFeeder: mini-batches of Python samples to feed dicts (Fluid 1.x's data_feeder.py)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import unique_name


def _program():
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        img = fluid.layers.data(name="img", shape=[4], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        nested = fluid.layers.data(name="nested", shape=[1], dtype="int64", lod_level=2)
        checked = fluid.data(name="checked", shape=[None, 2, 3], dtype="float64")
    return main, img, label, words, nested, checked


def test_feed_converts_dtypes_and_reshapes_to_the_declared_shape():
    main, img, label, words, nested, checked = _program()
    feeder = fluid.DataFeeder([img, "label"], fluid.CPUPlace(), program=main)
    assert feeder.feed_names == ["img", "label"] and feeder.feed_shapes == [[-1, 4], [-1, 1]]
    rng = np.random.RandomState(0)
    imgs = [rng.rand(4) for _ in range(3)]  # float64 samples into a float32 variable
    out = feeder.feed([(imgs[i], i) for i in range(3)])  # scalar labels reshape to [-1, 1]
    assert sorted(out) == ["img", "label"]
    a, b = np.array(out["img"]), np.array(out["label"])
    assert a.dtype == np.float32 and a.shape == (3, 4)
    np.testing.assert_array_equal(a, np.array(imgs, "float32"))
    assert b.dtype == np.int64 and b.tolist() == [[0], [1], [2]]
    assert out["img"].lod() == []
    # 2x2 images reshape into the declared [-1, 4]
    out = feeder.feed([(np.arange(4).reshape(2, 2), 1), (np.arange(4, 8).reshape(2, 2), 0)])
    np.testing.assert_array_equal(np.array(out["img"]), np.arange(8).reshape(2, 4))


def test_feed_builds_lod_from_nested_sequences():
    main, img, label, words, nested, checked = _program()
    feeder = fluid.DataFeeder([words, nested, label], fluid.CPUPlace(), program=main)
    batch = [([1, 2, 3], [[1, 2], [3]], 0), ([4, 5], [[4], [5, 6, 7]], 1)]
    out = feeder.feed(batch)
    w, n = out["words"], out["nested"]
    assert w.recursive_sequence_lengths() == [[3, 2]] and w.lod() == [[0, 3, 5]]
    np.testing.assert_array_equal(np.array(w), np.arange(1, 6).reshape(5, 1))
    assert n.recursive_sequence_lengths() == [[2, 2], [2, 1, 1, 3]] and n.has_valid_recursive_sequence_lengths()
    np.testing.assert_array_equal(np.array(n).ravel(), [1, 2, 3, 4, 5, 6, 7])
    # the feed dict runs: words go through a LoD-preserving op with their LoD
    with fluid.program_guard(main):
        y = fluid.layers.scale(words, scale=10.0)
    exe = fluid.Executor(fluid.CPUPlace())
    r, = exe.run(main, feed={"words": w}, fetch_list=[y], return_numpy=False)
    assert r.lod() == [[0, 3, 5]] and np.array(r).ravel().tolist() == [10, 20, 30, 40, 50]


def test_wrong_field_counts_and_non_sequences_name_the_sample():
    main, img, label, words, nested, checked = _program()
    feeder = fluid.DataFeeder([img, label], fluid.CPUPlace(), program=main)
    with pytest.raises(ValueError, match=r"DataFeeder.feed: the number of fields in data \(3\) does not match "
                                         r"len\(feed_list\) \(2\): sample 1 has 3 field\(s\), feed_list is "
                                         r"\['img', 'label'\]"):
        feeder.feed([(np.zeros(4), 1), (np.zeros(4), 1, 2)])
    with pytest.raises(TypeError, match=r"DataFeeder.feed: sample 0 is a int, not a sequence of 2 field"):
        feeder.feed([5])
    wf = fluid.DataFeeder([words], fluid.CPUPlace(), program=main)
    with pytest.raises(TypeError, match=r"DataFeeder: variable 'words' has lod_level 1, but sample 1's field 7 is "
                                        r"not a sequence"):
        wf.feed([([1, 2],), (7,)])


def test_bad_shapes_name_the_variable_and_the_sample():
    main, img, label, words, nested, checked = _program()
    feeder = fluid.DataFeeder([img, label], fluid.CPUPlace(), program=main)
    with pytest.raises(ValueError, match=r"DataFeeder: variable 'img' \(declared shape \[-1, 4\], float32\): sample 2 "
                                         r"has shape \(3,\) but sample 0 has shape \(4,\)"):
        feeder.feed([(np.zeros(4), 0), (np.zeros(4), 1), (np.zeros(3), 1)])
    with pytest.raises(ValueError, match=r"variable 'img' \(declared shape \[-1, 4\], float32\): cannot reshape the "
                                         r"batch of shape \(2, 5, 1\) to the declared shape: sample 0 has shape "
                                         r"\(5, 1\) \(5 elements\), but each row needs 4 elements"):
        feeder.feed([(np.zeros((5, 1)), 0), (np.zeros((5, 1)), 1)])
    # same rank as declared: layers.data takes the batch as it is (Fluid does not check it)
    assert np.array(feeder.feed([(np.zeros(5), 0)])["img"]).shape == (1, 5)
    with pytest.raises(ValueError, match=r"variable 'label' \(declared shape \[-1, 1\], int64\): sample 0's value "
                                         r"'a' does not convert to int64"):
        feeder.feed([(np.zeros(4), "a")])
    cf = fluid.DataFeeder([checked], fluid.CPUPlace(), program=main)
    out = cf.feed([(np.ones((2, 3)),), (np.zeros((2, 3)),)])
    assert np.array(out["checked"]).shape == (2, 2, 3) and np.array(out["checked"]).dtype == np.float64
    with pytest.raises(ValueError, match=r"variable 'checked' \(declared shape \[-1, 2, 3\], float64\): the batch has "
                                         r"shape \(2, 3, 2\) \(dim 1 is 3, not 2\): sample 0 has shape \(3, 2\)"):
        cf.feed([(np.ones((3, 2)),), (np.ones((3, 2)),)])


def test_feed_list_errors():
    main, *_ = _program()
    with pytest.raises(ValueError, match="DataFeeder: variable 'nope' of feed_list is not in the program's global "
                                         "block"):
        fluid.DataFeeder(["nope"], fluid.CPUPlace(), program=main)
    with pytest.raises(TypeError, match="DataFeeder: feed_list items must be Variables or variable names, got int"):
        fluid.DataFeeder([3], fluid.CPUPlace(), program=main)


def test_feed_parallel_and_decorate_reader(monkeypatch):
    main, img, label, *_ = _program()
    feeder = fluid.DataFeeder([img, label], fluid.CPUPlace(), program=main)
    batches = [[(np.full(4, i, "float32"), i)] for i in range(5)]
    parts = list(feeder.feed_parallel(batches[:2], num_places=2))
    assert [np.array(p["label"]).tolist() for p in parts] == [[[0]], [[1]]]
    with pytest.raises(ValueError, match=r"feed_parallel takes one mini-batch per device: 2 device\(s\), 3 "
                                         r"mini-batch\(es\)"):
        list(feeder.feed_parallel(batches[:3], num_places=2))
    monkeypatch.setenv("CPU_NUM", "2")
    assert len(list(feeder.feed_parallel(batches[:2]))) == 2  # CPU_NUM devices
    single = feeder.decorate_reader(lambda: iter(batches), multi_devices=False)
    assert [np.array(d["label"]).item() for d in single()] == [0, 1, 2, 3, 4]
    multi = feeder.decorate_reader(lambda: iter(batches), multi_devices=True, num_places=2)
    groups = list(multi())  # the fifth batch is dropped (drop_last)
    assert [[np.array(d["label"]).item() for d in g] for g in groups] == [[0, 1], [2, 3]]
    keep = feeder.decorate_reader(lambda: iter(batches), multi_devices=True, num_places=2, drop_last=False)
    with pytest.raises(ValueError, match=r"1 mini-batch\(es\) are left over for 2 devices"):
        list(keep())
    # the feed dicts run as they are
    with fluid.program_guard(main):
        y = fluid.layers.scale(img, scale=2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    for i, d in enumerate(single()):
        r, = exe.run(main, feed={"img": d["img"]}, fetch_list=[y])
        np.testing.assert_array_equal(r, np.full((1, 4), 2.0 * i))
