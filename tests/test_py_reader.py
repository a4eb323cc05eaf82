"""The py_reader family (Fluid 1.3-1.5): layers.py_reader / create_py_reader_by_data / read_file /
double_buffer with decorate_paddle_reader, decorate_tensor_provider and friends, start()/reset() and
EOFException epochs; and fluid.io.PyReader, iterable and not."""
import threading
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name


def _batched(samples, batch_size):
    """paddle.batch's behaviour (the last short batch kept), written out so this test needs no other module."""
    def reader():
        buf = []
        for s in samples():
            buf.append(s)
            if len(buf) == batch_size:
                yield buf
                buf = []
        if buf:
            yield buf
    return reader


def _samples(n):
    def reader():
        for i in range(n):
            yield np.full([2], i, "float32"), [i]
    return reader


def _epochs(exe, prog, fetch, reader, epochs):
    out = []
    for _ in range(epochs):
        reader.start()
        rows = []
        try:
            while True:
                rows.append(exe.run(prog, fetch_list=fetch))
        except fluid.core.EOFException:
            reader.reset()
        out.append(rows)
    return out


def _build_py_reader(**kwargs):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        reader = fluid.layers.py_reader(capacity=4, shapes=[(-1, 2), (-1, 1)], dtypes=["float32", "int64"],
                                        **kwargs)
        x, label = fluid.layers.read_file(reader)
        out = fluid.layers.scale(x, scale=3.0)
    return main, reader, x, label, out


def test_py_reader_paddle_reader_epochs():
    main, reader, x, label, out = _build_py_reader(name="train_reader")
    assert x.shape == (-1, 2) and label.shape == (-1, 1) and label.dtype == fluid.core.VarDesc.VarType.INT64
    reader.decorate_paddle_reader(_batched(_samples(7), 3))
    exe = fluid.Executor(fluid.CPUPlace())
    for rows in _epochs(exe, main, [out, label], reader, 3):
        assert [r[0].shape[0] for r in rows] == [3, 3, 1]
        np.testing.assert_array_equal(np.concatenate([r[1] for r in rows])[:, 0], np.arange(7))
        np.testing.assert_array_equal(np.concatenate([r[0] for r in rows])[:, 0], np.arange(7) * 3.0)


def test_decorate_before_read_file_and_tensor_provider():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        reader = fluid.layers.py_reader(capacity=2, shapes=[[-1, 2]], dtypes=["float32"], use_double_buffer=False)

        def provider():
            for i in range(4):
                yield (np.full([2, 2], i, "float64"),)  # float64 cast to the declared float32
        reader.decorate_tensor_provider(provider)  # before read_file: applied when it binds
        x = fluid.layers.read_file(reader)  # one slot: a Variable, not a list
        out = fluid.layers.reduce_sum(x)
    exe = fluid.Executor(fluid.CPUPlace())
    (rows,) = _epochs(exe, main, [out], reader, 1)
    assert [float(r[0][0]) for r in rows] == [0.0, 4.0, 8.0, 12.0]
    reader.decorate_batch_generator(lambda: iter([(np.ones([1, 2]),)]))  # the 1.5 name, after read_file
    (rows,) = _epochs(exe, main, [out], reader, 1)
    assert [float(r[0][0]) for r in rows] == [2.0]


def test_create_py_reader_by_data_keeps_the_data_variables_and_double_buffer():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        img = fluid.layers.data(name="img", shape=[2], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        reader = fluid.layers.create_py_reader_by_data(capacity=2, feed_list=[img, lbl], use_double_buffer=False)
        buffered = fluid.layers.double_buffer(reader, place=fluid.CPUPlace())
        got_img, got_lbl = fluid.layers.read_file(buffered)
        out = fluid.layers.scale(got_img, scale=2.0)
    assert (got_img.name, got_lbl.name) == ("img", "lbl") and reader.use_double_buffer
    reader.decorate_sample_list_generator(_batched(_samples(4), 2))
    (rows,) = _epochs(fluid.Executor(fluid.CPUPlace()), main, [out, "lbl"], reader, 1)
    np.testing.assert_array_equal(np.concatenate([r[1] for r in rows])[:, 0], [0, 1, 2, 3])


def test_train_and_test_readers_in_their_own_programs():
    def net(name, n):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), unique_name.guard():
            reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 2), (-1, 1)], dtypes=["float32", "int64"],
                                            name=name)
            x, _ = fluid.layers.read_file(reader)
            out = fluid.layers.reduce_sum(x)
        reader.decorate_paddle_reader(_batched(_samples(n), 2))
        return main, reader, out
    train, train_reader, train_out = net("train_reader", 6)
    test, test_reader, test_out = net("test_reader", 4)
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(2):
        assert len(_epochs(exe, train, [train_out], train_reader, 1)[0]) == 3
        assert len(_epochs(exe, test, [test_out], test_reader, 1)[0]) == 2


def test_py_reader_errors():
    with pytest.raises(ValueError, match="py_reader: 2 shapes but 1 dtypes"):
        fluid.layers.py_reader(capacity=2, shapes=[[-1, 1], [-1, 2]], dtypes=["float32"])
    with pytest.raises(ValueError, match="py_reader: capacity must be a positive number of batches, got 0"):
        fluid.layers.py_reader(capacity=0, shapes=[[-1, 1]], dtypes=["float32"])
    with pytest.raises(TypeError, match="create_py_reader_by_data: feed_list should be a list of Variable"):
        fluid.layers.create_py_reader_by_data(capacity=2, feed_list=None)
    with pytest.raises(TypeError, match="read_file: reader must be what fluid.layers.py_reader"):
        fluid.layers.read_file("reader")
    with pytest.raises(TypeError, match="double_buffer: reader must be what fluid.layers.py_reader returns"):
        fluid.layers.double_buffer(object())
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        reader = fluid.layers.py_reader(capacity=2, shapes=[[-1, 1]], dtypes=["float32"], name="r")
        with pytest.raises(RuntimeError, match=r"py_reader 'r'.start\(\): call fluid.layers.read_file\(reader\)"):
            reader.start()
        fluid.layers.read_file(reader)
        with pytest.raises(ValueError, match="py_reader 'r' is already read by"):
            fluid.layers.read_file(reader)


def test_py_reader_bad_batch_names_the_variable_and_reset_mid_epoch():
    main, reader, x, label, out = _build_py_reader()

    def endless():
        while True:
            yield np.ones([2, 5], "float32"), np.ones([2, 1], "int64")
    reader.decorate_tensor_provider(endless)
    exe = fluid.Executor(fluid.CPUPlace())
    reader.start()
    with pytest.raises(ValueError, match="variable '%s' expects shape \\[-1, 2\\]" % x.name):
        exe.run(main, fetch_list=[out])
    reader.reset()
    reader.decorate_tensor_provider(lambda: ((np.ones([2, 2], "float32"), np.ones([2, 1], "int64"))
                                             for _ in iter(int, 1)))
    reader.start()
    exe.run(main, fetch_list=[out])
    reader.reset()  # mid-epoch: the worker stops
    deadline = time.time() + 10
    while any(t.name == reader._loader._name for t in threading.enumerate()) and time.time() < deadline:
        time.sleep(0.01)
    assert not any(t.name == reader._loader._name for t in threading.enumerate())


# ------------------------------------------------------------------------------------------ PyReader

def _pyreader_net(iterable, return_list=False):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        out = fluid.layers.scale(x, scale=-1.0)
        reader = fluid.io.PyReader(feed_list=[x, y], capacity=3, iterable=iterable, return_list=return_list)
    return main, reader, out


def test_pyreader_iterable_sample_generator():
    main, reader, out = _pyreader_net(iterable=True)
    assert reader.iterable and reader.queue is None
    reader.decorate_sample_generator(_samples(5), batch_size=2, drop_last=True, places=fluid.cpu_places())
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(2):
        ys = []
        for data in reader():
            got, = exe.run(main, feed=data, fetch_list=[out])
            np.testing.assert_array_equal(got, -np.array(data[0]["x"]))
            ys.append(np.array(data[0]["y"])[:, 0].tolist())
        assert ys == [[0, 1], [2, 3]]


def test_pyreader_return_list_and_batch_generator():
    main, reader, out = _pyreader_net(iterable=True, return_list=True)
    reader.decorate_batch_generator(lambda: iter([(np.zeros([3, 2]), np.arange(3))]), places=fluid.CPUPlace())
    (batch,) = list(reader)
    x, y = batch[0]
    assert np.array(x).dtype == np.float32 and np.array(y).tolist() == [[0], [1], [2]]


def test_pyreader_non_iterable_epochs():
    main, reader, out = _pyreader_net(iterable=False)
    reader.decorate_sample_list_generator(_batched(_samples(5), 2))
    exe = fluid.Executor(fluid.CPUPlace())
    for rows in _epochs(exe, main, [out], reader, 2):
        np.testing.assert_array_equal(np.concatenate([r[0] for r in rows])[:, 0], -np.arange(5.0))
    with pytest.raises(core.EOFException, match="PyReader: the reader is not started"):
        exe.run(main, fetch_list=[out])
    with pytest.raises(RuntimeError, match="PyReader is not iterable"):
        iter(reader)


def test_py_reader_with_paddle_batch_and_reader_decorators():
    # the Fluid 1.x pattern: reader.decorate_paddle_reader(paddle.reader.shuffle(paddle.batch(...)))
    main, reader, x, label, out = _build_py_reader()
    reader.decorate_paddle_reader(fluid.batch(fluid.reader.firstn(_samples(100), 7), batch_size=3))
    (rows,) = _epochs(fluid.Executor(fluid.CPUPlace()), main, [label], reader, 1)
    assert [r[0][:, 0].tolist() for r in rows] == [[0, 1, 2], [3, 4, 5], [6]]
