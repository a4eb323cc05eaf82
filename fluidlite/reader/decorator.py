"""Reader decorators of Fluid 1.x ``paddle.reader`` (also exported from ``fluidlite.io`` as Fluid 1.6+ does).

A *reader* is a zero-argument callable that returns an iterator of samples; each decorator returns a
new reader. Signatures and output sequences are Fluid's. Where Fluid could hang or lose an error,
fluidlite does better (see docs/data.md):

* ``buffered`` and ``xmap_readers`` run daemon threads over bounded queues. An exception raised by the
  wrapped reader or by the mapper is re-raised in the consumer (Fluid's worker thread died and the
  consumer waited forever). A consumer that stops early (``break``, ``close()``, garbage collection)
  stops the threads, which never block for good on a full queue.
* ``xmap_readers(order=True)`` waits on a condition instead of Fluid's busy loop.
* ``compose`` detects unaligned readers with a private sentinel, so a reader may yield ``None``.
* ``multiprocess_reader`` pickles samples in both modes (Fluid's pipe mode JSON-encoded them, which
  turned tuples into lists and refused numpy arrays), reports the child's exception text, and
  terminates its children when the consumer stops early.
* ``PipeReader.get_line`` also yields a last line that has no line break, and raises when the command
  exits with a non-zero status.
"""
import codecs
import itertools
import pickle
import queue
import random
import threading
import traceback
import zlib

# Fluid 1.6/1.7's list; 1.8 may have dropped PipeReader and Fake, which stay here.
__all__ = ["cache", "map_readers", "buffered", "compose", "chain", "shuffle", "ComposeNotAligned", "firstn",
           "xmap_readers", "PipeReader", "multiprocess_reader", "Fake"]

_POLL_S = 0.05  # how often a blocked worker checks whether its consumer has gone away


def _check_reader(func, reader, what="reader"):
    if not callable(reader):
        raise TypeError("%s: %s must be a callable returning an iterator of samples, got %s"
                        % (func, what, type(reader).__name__))


def cache(reader):
    """Read the whole of ``reader`` now (once) and return a reader that replays it from memory."""
    _check_reader("cache", reader)
    data = tuple(reader())

    def cached_reader():
        yield from data

    return cached_reader


def map_readers(func, *readers):
    """Yield ``func(*samples)`` over the readers zipped together (stops at the shortest, like ``map``)."""
    for r in readers:
        _check_reader("map_readers", r)

    def mapped_reader():
        yield from map(func, *[r() for r in readers])

    return mapped_reader


def shuffle(reader, buf_size):
    """Shuffle within consecutive windows of ``buf_size`` samples (the last, shorter window too).

    Uses the global ``random`` module, as Fluid does, so ``random.seed`` makes it repeatable.
    This is a local shuffle, not a shuffle of the whole data set.
    """
    _check_reader("shuffle", reader)

    def shuffled_reader():
        buf = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                random.shuffle(buf)
                yield from buf
                buf = []
        if buf:
            random.shuffle(buf)
            yield from buf

    return shuffled_reader


def chain(*readers):
    """Concatenate the readers' outputs, in order."""
    for r in readers:
        _check_reader("chain", r)

    def chained_reader():
        yield from itertools.chain(*[r() for r in readers])

    return chained_reader


class ComposeNotAligned(ValueError):
    """``compose(check_alignment=True)``: the composed readers yielded different numbers of samples."""


def compose(*readers, check_alignment=True):
    """Zip the readers and flatten each step into one tuple.

    A tuple sample contributes its elements, any other sample contributes itself: samples ``(1, 2)``,
    ``3``, ``(4, 5)`` become ``(1, 2, 3, 4, 5)``. With ``check_alignment`` (default) readers of different
    lengths raise ``ComposeNotAligned``; without it the output stops at the shortest reader.
    """
    for r in readers:
        _check_reader("compose", r)
    missing = object()

    def flatten(outputs):
        out = ()
        for o in outputs:
            out += o if isinstance(o, tuple) else (o,)
        return out

    def composed_reader():
        its = [r() for r in readers]
        if not check_alignment:
            for outputs in zip(*its):
                yield flatten(outputs)
            return
        for step, outputs in enumerate(itertools.zip_longest(*its, fillvalue=missing)):
            if any(o is missing for o in outputs):
                ended = [i for i, o in enumerate(outputs) if o is missing]
                raise ComposeNotAligned("compose: outputs of readers are not aligned: reader(s) %s ended after %d "
                                        "samples while the others go on (pass check_alignment=False to stop at the "
                                        "shortest)" % (ended, step))
            yield flatten(outputs)

    return composed_reader


def firstn(reader, n):
    """Yield at most the first ``n`` samples of ``reader``."""
    _check_reader("firstn", reader)

    def firstn_reader():
        yield from itertools.islice(reader(), n)

    return firstn_reader


class _Failure:
    """Carries an exception from a worker thread or process to the consumer."""

    def __init__(self, where, exc):
        self.where = where
        self.exc = exc


class _End:
    pass


def _put(q, item, stop):
    """Put into a bounded queue, giving up once ``stop`` is set (the consumer has gone away)."""
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            pass
    return False


def _get(q, stop):
    """Get from a queue, returning ``_End`` once ``stop`` is set."""
    while not stop.is_set():
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            pass
    return _End


def _raise_failure(func, failure):
    # The original exception, so that ``except ValueError`` around the loop works as without threads.
    exc = failure.exc
    if hasattr(exc, "add_note"):
        exc.add_note("(raised by %s in a %s worker thread)" % (failure.where, func))
    raise exc


def _start_daemon(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def buffered(reader, size):
    """Read ``reader`` in a daemon thread into a buffer of at most ``size`` samples.

    An exception in ``reader`` is re-raised in the consumer.
    """
    _check_reader("buffered", reader)

    def fill(q, stop):
        try:
            for sample in reader():
                if not _put(q, sample, stop):
                    return
        except BaseException as e:  # every error must reach the consumer
            _put(q, _Failure("the reader", e), stop)
            return
        _put(q, _End, stop)

    def buffered_reader():
        q = queue.Queue(maxsize=size)
        stop = threading.Event()
        _start_daemon(fill, q, stop)
        try:
            while True:
                item = q.get()
                if item is _End:
                    return
                if isinstance(item, _Failure):
                    _raise_failure("buffered", item)
                yield item
        finally:
            stop.set()

    return buffered_reader


def xmap_readers(mapper, reader, process_num, buffer_size, order=False):
    """Map ``reader``'s samples with ``mapper`` in ``process_num`` daemon threads (threads, as in Fluid).

    One thread reads ``reader`` into a queue of ``buffer_size``; the mapper threads write to a second
    queue of ``buffer_size``. With ``order=True`` the output keeps the input order; otherwise it is
    the order in which the mappers finish. An exception in the reader or the mapper is re-raised in
    the consumer.
    """
    _check_reader("xmap_readers", reader)
    if not callable(mapper):
        raise TypeError("xmap_readers: mapper must be callable, got %s" % type(mapper).__name__)
    if int(process_num) <= 0:
        raise ValueError("xmap_readers: process_num must be a positive integer, got %r" % (process_num,))
    process_num = int(process_num)

    def read(in_q, out_q, stop):
        try:
            for item in enumerate(reader()):
                if not _put(in_q, item, stop):
                    return
        except BaseException as e:
            _put(out_q, _Failure("the reader", e), stop)
            return
        for _ in range(process_num):
            _put(in_q, _End, stop)

    def work(in_q, out_q, stop, turn):
        while True:
            item = _get(in_q, stop)
            if item is _End:
                _put(out_q, _End, stop)
                return
            index, sample = item
            try:
                result = mapper(sample)
            except BaseException as e:
                _put(out_q, _Failure("the mapper (on sample %d)" % index, e), stop)
                return
            if turn is not None:  # order=True: wait until every earlier sample has been put
                with turn["cond"]:
                    while turn["next"] != index and not stop.is_set():
                        turn["cond"].wait(_POLL_S)
                    ok = _put(out_q, result, stop)
                    turn["next"] += 1
                    turn["cond"].notify_all()
                if not ok:
                    return
            elif not _put(out_q, result, stop):
                return

    def xreader():
        in_q = queue.Queue(buffer_size)
        out_q = queue.Queue(buffer_size)
        stop = threading.Event()
        turn = {"cond": threading.Condition(), "next": 0} if order else None
        _start_daemon(read, in_q, out_q, stop)
        for _ in range(process_num):
            _start_daemon(work, in_q, out_q, stop, turn)
        try:
            ended = 0
            while ended < process_num:
                item = out_q.get()
                if item is _End:
                    ended += 1
                elif isinstance(item, _Failure):
                    _raise_failure("xmap_readers", item)
                else:
                    yield item
        finally:
            stop.set()

    return xreader


def _mp_context():
    import multiprocessing  # imported on use: most programs never need it
    # Readers are usually closures, which only the fork start method can hand to a child.
    try:
        return multiprocessing.get_context("fork")
    except ValueError:
        return multiprocessing.get_context()


def _child_run(reader, index, send):
    try:
        for sample in reader():
            if sample is None:
                raise ValueError("sample has None")
            send(("sample", sample))
        send(("end", None))
    except BaseException as e:
        send(("error", "reader %d raised %s: %s\n%s" % (index, type(e).__name__, e, traceback.format_exc())))


def _child_pipe(reader, index, conn):
    try:
        _child_run(reader, index, conn.send)
    finally:
        conn.close()


def _child_queue(reader, index, q):
    # Pickle here, not in the queue's feeder thread, so that an unpicklable sample is reported as an error.
    _child_run(reader, index, lambda msg: q.put(pickle.dumps(msg + (index,))))
    q.close()
    q.join_thread()


def multiprocess_reader(readers, use_pipe=True, queue_size=1000):
    """Run each reader of the list ``readers`` in its own process and merge their samples.

    ``use_pipe=True`` reads one sample from each live reader in turn (round robin, so the output order is
    deterministic); ``use_pipe=False`` merges through one ``multiprocessing.Queue(queue_size)`` in arrival
    order. Samples are pickled in both modes and keep their types. A ``None`` sample is an error. A
    child's exception raises ValueError("multiprocess reader raises an exception: ...") in the consumer
    with the child's traceback. Children are started with ``fork`` where available.
    """
    if not isinstance(readers, list) or not readers:
        raise TypeError("multiprocess_reader: readers must be a non-empty list of readers, got %r" % (readers,))
    for r in readers:
        _check_reader("multiprocess_reader", r, "each element of readers")
    ctx = _mp_context()

    def fail(msg):
        raise ValueError("multiprocess reader raises an exception: " + msg)

    def stop_all(procs):
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()

    def pipe_reader():
        procs, conns = [], []
        try:
            for i, r in enumerate(readers):
                parent, child = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child_pipe, args=(r, i, child), daemon=True)
                p.start()
                child.close()
                procs.append(p)
                conns.append(parent)
            live = list(range(len(readers)))
            while live:
                for i in list(live):
                    try:
                        kind, value = conns[i].recv()
                    except EOFError:
                        fail("reader %d's process exited without finishing (exit code %s)"
                             % (i, procs[i].exitcode if not procs[i].is_alive() else "unknown"))
                    if kind == "sample":
                        yield value
                    elif kind == "end":
                        live.remove(i)
                    else:
                        fail(value)
        finally:
            for c in conns:
                c.close()
            stop_all(procs)

    def queue_reader():
        q = ctx.Queue(queue_size)
        procs = []
        try:
            for i, r in enumerate(readers):
                p = ctx.Process(target=_child_queue, args=(r, i, q), daemon=True)
                p.start()
                procs.append(p)
            ended = set()
            while len(ended) < len(readers):
                try:
                    kind, value, index = pickle.loads(q.get(timeout=0.5))
                except queue.Empty:  # a child killed (e.g. out of memory) never sends its end
                    for i, p in enumerate(procs):
                        if i not in ended and p.exitcode not in (None, 0):
                            fail("reader %d's process exited with code %s without finishing" % (i, p.exitcode))
                    continue
                if kind == "sample":
                    yield value
                elif kind == "end":
                    ended.add(index)
                else:
                    fail(value)
        finally:
            stop_all(procs)
            q.close()

    return pipe_reader if use_pipe else queue_reader


class PipeReader:
    """Read a command's standard output as text (Fluid 1.x ``paddle.reader.PipeReader``).

    ``command`` is split on single spaces and run without a shell, as in Fluid. ``file_type`` is
    ``"plain"`` or ``"gzip"`` (decompressed on the fly). The output is decoded as UTF-8.
    """

    def __init__(self, command, bufsize=8192, file_type="plain"):
        if not isinstance(command, str):
            raise TypeError("PipeReader: command must be a string, got %s" % type(command).__name__)
        if file_type not in ("plain", "gzip"):
            raise TypeError("PipeReader: file_type must be 'plain' or 'gzip', got %r" % (file_type,))
        self.command = command
        self.file_type = file_type
        self.bufsize = bufsize
        import subprocess
        self.process = subprocess.Popen(command.split(" "), bufsize=bufsize, stdout=subprocess.PIPE)

    def get_line(self, cut_lines=True, line_break="\n"):
        """Yield the output line by line (without ``line_break``), or in raw chunks if not ``cut_lines``."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        unzip = zlib.decompressobj(32 + zlib.MAX_WBITS) if self.file_type == "gzip" else None
        rest = ""
        while True:
            buf = self.process.stdout.read(self.bufsize)
            final = not buf
            if unzip is not None:
                buf = unzip.decompress(buf) if buf else unzip.flush()
            text = decoder.decode(buf, final=final)
            if cut_lines:
                lines = (rest + text).split(line_break)
                rest = lines.pop()
                yield from lines
            elif text:
                yield text
            if final:
                break
        if cut_lines and rest:
            yield rest
        code = self.process.wait()
        if code != 0:
            raise RuntimeError("PipeReader: command %r exited with status %d" % (self.command, code))


class Fake:
    """``Fake()(reader, data_num)``: a reader that yields the first sample of ``reader`` ``data_num`` times.

    For speed tests that should not depend on reading. The sample is read once and kept by this object.
    """

    def __init__(self):
        self.data = None
        self.yield_num = 0

    def __call__(self, reader, data_num):
        _check_reader("Fake", reader)

        def fake_reader():
            if self.data is None:
                self.data = next(iter(reader()))
            while self.yield_num < data_num:
                yield self.data
                self.yield_num += 1
            self.yield_num = 0

        return fake_reader
