"""fluidlite.batch and fluidlite.reader (Fluid 1.x paddle.batch / paddle.reader): exact output sequences,
errors that reach the consumer, and worker threads that stop when the consumer stops early."""
import gc
import random
import sys
import threading
import time

import numpy as np
import pytest

import fluidlite
from fluidlite import reader as R


def rng(n, start=0):
    def r():
        return iter(range(start, start + n))
    return r


def from_list(items):
    def r():
        return iter(list(items))
    return r


def failing_after(k, exc):
    def r():
        for i in range(k):
            yield i
        raise exc
    return r


def test_exported_names():
    # Fluid 1.6/1.7's paddle.reader.__all__ (PipeReader and Fake may have left it by 1.8; fluidlite keeps them)
    assert R.__all__ == ["cache", "map_readers", "buffered", "compose", "chain", "shuffle", "ComposeNotAligned",
                         "firstn", "xmap_readers", "PipeReader", "multiprocess_reader", "Fake"]
    for name in R.__all__ + ["batch"]:
        assert getattr(fluidlite.io, name) is getattr(fluidlite.reader if name != "batch" else fluidlite, name)
        assert name in fluidlite.io.__all__
    assert fluidlite.io.batch is fluidlite.batch


def test_batch_keeps_or_drops_short_tail():
    assert list(fluidlite.batch(rng(7), 3)()) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(fluidlite.batch(rng(7), 3, drop_last=True)()) == [[0, 1, 2], [3, 4, 5]]
    assert list(fluidlite.batch(rng(6), "2")()) == [[0, 1], [2, 3], [4, 5]]  # int() as in Fluid
    assert list(fluidlite.batch(rng(0), 2)()) == []
    # a reader is re-callable: each call starts over
    b = fluidlite.batch(rng(3), 2)
    assert list(b()) == list(b()) == [[0, 1], [2]]


@pytest.mark.parametrize("bad", [0, -1, "x", None])
def test_batch_rejects_bad_size(bad):
    with pytest.raises(ValueError, match=r"batch: batch_size must be a positive integer, got %s" % repr(bad)):
        fluidlite.batch(rng(3), bad)


def test_batch_rejects_non_callable_reader():
    with pytest.raises(TypeError, match="batch: reader must be a callable .* got list"):
        fluidlite.batch([1, 2, 3], 2)


def test_cache_reads_once_at_decoration():
    calls = []

    def r():
        calls.append(1)
        return iter([1, 2, 3])

    c = R.cache(r)
    assert calls == [1]
    assert list(c()) == [1, 2, 3] and list(c()) == [1, 2, 3]
    assert calls == [1]


def test_map_readers_zips_to_shortest():
    m = R.map_readers(lambda a, b: a * 10 + b, rng(4), rng(3, start=5))
    assert list(m()) == [5, 16, 27]


def test_shuffle_is_windowed_and_follows_global_random():
    random.seed(7)
    got = list(R.shuffle(rng(10), 4)())
    random.seed(7)
    want = []
    for chunk in ([0, 1, 2, 3], [4, 5, 6, 7], [8, 9]):
        random.shuffle(chunk)
        want += chunk
    assert got == want
    assert sorted(got[:4]) == [0, 1, 2, 3] and sorted(got[8:]) == [8, 9]


def test_chain_concatenates():
    assert list(R.chain(rng(2), rng(0), rng(3, start=10))()) == [0, 1, 10, 11, 12]


def test_compose_flattens_tuples():
    a = from_list([(1, 2), (10, 20)])
    b = from_list([3, 30])
    c = from_list([(4, 5), (40, 50)])
    assert list(R.compose(a, b, c)()) == [(1, 2, 3, 4, 5), (10, 20, 30, 40, 50)]
    # a list sample is not spliced, only tuples are
    assert list(R.compose(from_list([[1, 2]]), from_list([3]))()) == [([1, 2], 3)]


def test_compose_alignment():
    with pytest.raises(R.ComposeNotAligned, match=r"reader\(s\) \[1\] ended after 2 samples"):
        list(R.compose(rng(3), rng(2))())
    assert issubclass(R.ComposeNotAligned, ValueError)
    assert list(R.compose(rng(3), rng(2), check_alignment=False)()) == [(0, 0), (1, 1)]
    # None is a legitimate sample (Fluid mistook it for a missing one)
    assert list(R.compose(from_list([None]), from_list([1]))()) == [(None, 1)]


def test_firstn_takes_exactly_n():
    pulled = []

    def r():
        for i in range(10):
            pulled.append(i)
            yield i

    assert list(R.firstn(r, 3)()) == [0, 1, 2]
    assert pulled == [0, 1, 2]
    assert list(R.firstn(rng(2), 5)()) == [0, 1]


def test_buffered_keeps_order_and_forwards_errors():
    assert list(R.buffered(rng(50), 4)()) == list(range(50))
    got = []
    with pytest.raises(KeyError, match="broken file"):
        for x in R.buffered(failing_after(3, KeyError("broken file")), 2)():
            got.append(x)
    assert got == [0, 1, 2]


def _wait_new_threads_gone(before, timeout=10.0):
    """Wait until every thread started since ``before`` (a set of threads) has ended; return those left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t not in before]
        if not left:
            break
        time.sleep(0.01)
    return [t for t in threading.enumerate() if t not in before]


def test_buffered_worker_stops_when_consumer_stops_early():
    before = set(threading.enumerate())
    produced = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    it = R.buffered(endless, 2)()
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert _wait_new_threads_gone(before) == []
    n = len(produced)
    assert n <= 3 + 2 + 2  # consumed + queue + one in hand: the queue is bounded


@pytest.mark.parametrize("order", [True, False])
def test_xmap_readers_maps_every_sample(order):
    def slow_square(x):
        time.sleep(0.001 * ((x * 7) % 5))  # uneven work so that threads finish out of order
        return x * x

    out = list(R.xmap_readers(slow_square, rng(40), 4, 3, order=order)())
    if order:
        assert out == [x * x for x in range(40)]
    else:
        assert sorted(out) == [x * x for x in range(40)]


@pytest.mark.parametrize("order", [True, False])
def test_xmap_readers_forwards_mapper_error(order):
    def mapper(x):
        if x == 5:
            raise ZeroDivisionError("bad sample %d" % x)
        return x

    before = set(threading.enumerate())
    with pytest.raises(ZeroDivisionError, match="bad sample 5"):
        list(R.xmap_readers(mapper, rng(100), 3, 4, order=order)())
    assert _wait_new_threads_gone(before) == []


def test_xmap_readers_forwards_reader_error():
    with pytest.raises(OSError, match="disk gone"):
        list(R.xmap_readers(lambda x: x, failing_after(4, OSError("disk gone")), 2, 2, order=True)())


def test_xmap_readers_threads_stop_when_consumer_stops_early():
    before = set(threading.enumerate())
    it = R.xmap_readers(lambda x: x + 1, rng(10 ** 9), 4, 2, order=True)()
    assert [next(it) for _ in range(5)] == [1, 2, 3, 4, 5]
    del it
    gc.collect()
    assert _wait_new_threads_gone(before) == []


def test_xmap_readers_rejects_bad_args():
    with pytest.raises(ValueError, match="xmap_readers: process_num must be a positive integer, got 0"):
        R.xmap_readers(lambda x: x, rng(3), 0, 2)
    with pytest.raises(TypeError, match="xmap_readers: mapper must be callable, got int"):
        R.xmap_readers(3, rng(3), 1, 2)


def _pairs(start):
    def r():
        for i in range(start, start + 3):
            yield (i, np.full(2, i, dtype="float32"))
    return r


def test_multiprocess_reader_pipe_is_round_robin_and_keeps_types():
    out = list(R.multiprocess_reader([_pairs(0), _pairs(10)], use_pipe=True)())
    assert [s[0] for s in out] == [0, 10, 1, 11, 2, 12]
    assert all(isinstance(s, tuple) and s[1].dtype == np.float32 for s in out)
    np.testing.assert_array_equal(out[3][1], [11, 11])


def test_multiprocess_reader_queue_merges_all():
    out = list(R.multiprocess_reader([rng(5), rng(5, start=100)], use_pipe=False, queue_size=2)())
    assert sorted(out) == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]


@pytest.mark.parametrize("use_pipe", [True, False])
def test_multiprocess_reader_reports_child_errors(use_pipe):
    with pytest.raises(ValueError, match=r"(?s)multiprocess reader raises an exception: reader 1 raised "
                                         r"RuntimeError: child broke.*Traceback"):
        list(R.multiprocess_reader([rng(2), failing_after(1, RuntimeError("child broke"))], use_pipe=use_pipe)())
    with pytest.raises(ValueError, match="reader 0 raised ValueError: sample has None"):
        list(R.multiprocess_reader([from_list([1, None])], use_pipe=use_pipe)())


def test_multiprocess_reader_rejects_non_list():
    with pytest.raises(TypeError, match="multiprocess_reader: readers must be a non-empty list"):
        R.multiprocess_reader(rng(3))


def test_pipe_reader_lines_plain_and_gzip(tmp_path):
    import gzip
    text = "a b\nsecond line\nlast without break"
    plain = tmp_path / "f.txt"
    plain.write_text(text)
    assert list(R.PipeReader("cat %s" % plain, bufsize=4).get_line()) == ["a b", "second line",
                                                                          "last without break"]
    gz = tmp_path / "f.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert list(R.PipeReader("cat %s" % gz, bufsize=5, file_type="gzip").get_line()) == [
        "a b", "second line", "last without break"]
    assert "".join(R.PipeReader("cat %s" % plain, bufsize=4).get_line(cut_lines=False)) == text


def test_pipe_reader_errors(tmp_path):
    with pytest.raises(RuntimeError, match=r"PipeReader: command 'cat .*missing' exited with status 1"):
        list(R.PipeReader("cat %s" % (tmp_path / "missing")).get_line())
    with pytest.raises(TypeError, match="PipeReader: file_type must be 'plain' or 'gzip', got 'zip'"):
        R.PipeReader("true", file_type="zip")
    with pytest.raises(TypeError, match="PipeReader: command must be a string, got list"):
        R.PipeReader(["cat"])


def test_fake_repeats_first_sample():
    f = R.Fake()(rng(5, start=3), 4)
    assert list(f()) == [3, 3, 3, 3]
    assert list(f()) == [3, 3, 3, 3]


def test_decorators_compose_like_paddle_book():
    # paddle.batch(paddle.reader.shuffle(train(), buf_size), batch_size) as the book writes it
    random.seed(0)
    b = fluidlite.batch(R.shuffle(rng(10), buf_size=100), batch_size=4)
    batches = list(b())
    assert [len(x) for x in batches] == [4, 4, 2]
    assert sorted(sum(batches, [])) == list(range(10))


def test_interpreter_exits_with_blocked_workers():
    # A consumer that abandons buffered/xmap readers mid-stream must not keep the interpreter alive.
    import subprocess
    code = (
        "import itertools\n"
        "from fluidlite import reader as R\n"
        "it = R.buffered(lambda: itertools.count(), 1)()\n"
        "next(it)\n"
        "it2 = R.xmap_readers(lambda x: x, lambda: itertools.count(), 2, 1, order=True)()\n"
        "next(it2)\n"
        "print('done')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "done"


@pytest.mark.parametrize("use_pipe", [True, False])
def test_multiprocess_reader_reports_unpicklable_sample(use_pipe):
    def r():
        yield lambda: 0  # a lambda cannot be pickled

    with pytest.raises(ValueError, match="multiprocess reader raises an exception: reader 0 raised "
                                         "(PicklingError|AttributeError)"):
        list(R.multiprocess_reader([r], use_pipe=use_pipe)())


@pytest.mark.parametrize("use_pipe", [True, False])
def test_multiprocess_reader_reports_killed_child(use_pipe):
    import os

    def r():
        yield 1
        os._exit(3)  # dies without a word, as when the OOM killer strikes

    with pytest.raises(ValueError, match="multiprocess reader raises an exception: reader 0's process exited"):
        list(R.multiprocess_reader([r], use_pipe=use_pipe)())
