"""The process group of data-parallel training: MPI through mpi4py, handed to the C++ rings (csrc/comm.h).

``init()`` is what ``fleet.init(role)`` calls. It imports mpi4py (``pip install fluidlite[mpi]`` brings it and the
mpich wheel's ``mpiexec``), creates ring 0 over a duplicate of ``MPI.COMM_WORLD``, sets this rank's thread count to
its share of the node's cores (``FLUIDLITE_NUM_THREADS`` wins), and arranges that an uncaught exception on any
rank aborts the whole job instead of leaving the others waiting. Run alone (no ``mpiexec``, or without mpi4py) it
makes a one-rank ring: a fleet script then trains as a single process.
"""
import atexit
import os
import sys
import threading
import time

from .. import core

__all__ = ["init", "is_initialized", "rank", "size", "local_rank", "local_size", "barrier", "allgather_object",
           "broadcast_object", "abort", "timeout_s", "ring_stats", "DEFAULT_TIMEOUT_S"]

# How long a collective waits for the other ranks before it fails (FLUIDLITE_COMM_TIMEOUT overrides): long enough
# for a rank that saves a checkpoint while the others wait, short enough that a lost rank ends the job.
DEFAULT_TIMEOUT_S = 120.0

_lock = threading.Lock()
_state = None  # _State once initialized


class _State:
    def __init__(self, rank, size, local_rank, local_size, timeout, comm, mpi):
        self.rank, self.size = rank, size
        self.local_rank, self.local_size = local_rank, local_size
        self.timeout_s = timeout
        self.comm = comm  # the mpi4py communicator of ring 0 (None for a one-rank job without MPI)
        self.mpi = mpi    # the mpi4py.MPI module, or None


def _timeout_from_env():
    value = os.environ.get("FLUIDLITE_COMM_TIMEOUT")
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        t = float(value)
    except ValueError:
        t = -1.0
    if not t > 0:
        raise ValueError("FLUIDLITE_COMM_TIMEOUT must be a positive number of seconds, got %r" % value)
    return t


def _launched_by_mpi():
    """True when a process manager started this process as one of several ranks (hydra, Open MPI, slurm)."""
    for key in ("PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if key in os.environ:
            return key != "PMI_SIZE" or os.environ[key] != "1"
    return False


def _import_mpi():
    try:
        import mpi4py
    except ImportError as e:
        if _launched_by_mpi():
            raise ImportError("fluidlite.distributed: this process was started by mpiexec as one of several ranks, "
                              "but mpi4py is not installed: pip install 'fluidlite[mpi]' (mpi4py and the mpich "
                              "wheel)") from e
        return None
    mpi4py.rc.thread_level = "multiple"  # the comm stream calls MPI beside the main thread
    from mpi4py import MPI
    return MPI


def _libmpi_path():
    """The MPI library mpi4py loaded (the C++ rings dlopen it again: it is already mapped)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/libmpi" in line}
    except OSError:
        paths = set()
    for p in sorted(paths):
        base = os.path.basename(p)
        if base.startswith("libmpi.so") or base.startswith("libmpi_abi.so"):
            return p
    raise RuntimeError("fluidlite.distributed: cannot find the MPI library mpi4py loaded (no libmpi in "
                       "/proc/self/maps); fluidlite needs a shared libmpi (pip install 'fluidlite[mpi]')")


def _default_threads(local_size):
    """Each rank's share of this node's cores (at least 1), unless FLUIDLITE_NUM_THREADS says otherwise."""
    if "FLUIDLITE_NUM_THREADS" in os.environ:
        return None
    from .launch import usable_cores
    return max(1, usable_cores() // max(1, local_size))


ABORT_FLUSH_S = 0.2


def _install_abort_on_exception():
    """An uncaught exception on one rank aborts every rank (MPI_Abort), naming the rank, instead of leaving the
    others inside a collective until their timeout. Also covers exceptions in other Python threads."""
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        previous(kind, value, tb)
        abort("rank %d of %d raised %s: %s" % (rank(), size(), kind.__name__, value), code=1)

    sys.excepthook = excepthook
    previous_thread_hook = threading.excepthook

    def thread_excepthook(args):
        previous_thread_hook(args)
        if args.exc_type is not SystemExit:
            abort("rank %d of %d: thread %s raised %s: %s" % (rank(), size(), getattr(args.thread, "name", "?"),
                                                               args.exc_type.__name__, args.exc_value), code=1)

    threading.excepthook = thread_excepthook


def _signed(handle):
    """mpi4py reports handles as unsigned 64-bit numbers; the C++ side takes int64 (an int handle's bits)."""
    return handle - (1 << 64) if handle >= (1 << 63) else handle


def init(timeout=None):
    """Joins the job (idempotent): ring 0 over MPI.COMM_WORLD when launched by mpiexec, else a one-rank ring.
    Returns (rank, size)."""
    global _state
    with _lock:
        if _state is not None:
            return _state.rank, _state.size
        t = float(timeout) if timeout is not None else _timeout_from_env()
        if not t > 0:
            raise ValueError("fluidlite.distributed.comm.init: timeout must be > 0 seconds, got %r" % (timeout,))
        MPI = _import_mpi()
        if MPI is None or MPI.COMM_WORLD.Get_size() == 1:
            core.comm_init_ring(0, 0, 1, t)
            _state = _State(0, 1, 0, 1, t, MPI.COMM_WORLD.Dup() if MPI is not None else None, MPI)
        else:
            world = MPI.COMM_WORLD
            comm = world.Dup()
            node = world.Split_type(MPI.COMM_TYPE_SHARED)
            local_rank, local_size = node.Get_rank(), node.Get_size()
            node.Free()
            handles = dict(
                library=_libmpi_path(), handle_bytes=MPI._sizeof(MPI.Comm), comm=_signed(MPI._handleof(comm)),
                dtypes=[_signed(MPI._handleof(t_)) for t_ in (MPI.FLOAT, MPI.DOUBLE, MPI.INT32_T, MPI.INT64_T)],
                ops=[_signed(MPI._handleof(o)) for o in (MPI.SUM, MPI.MAX, MPI.MIN, MPI.PROD)])
            core.comm_init_ring(0, comm.Get_rank(), comm.Get_size(), t, **handles)
            _state = _State(comm.Get_rank(), comm.Get_size(), local_rank, local_size, t, comm, MPI)
            _install_abort_on_exception()
            # One INFO line per rank (glog's LOG(INFO), on by default): mpiexec names a failed rank by its pid only.
            import socket
            core.log_line("I", __file__, sys._getframe().f_lineno,
                          "fluidlite.distributed: rank %d of %d is pid %d on %s"
                          % (_state.rank, _state.size, os.getpid(), socket.gethostname()))
        _register_with_launcher()
        threads = _default_threads(_state.local_size)
        if threads is not None:
            core.set_num_threads(min(threads, 64))
        atexit.register(_shutdown)
        return _state.rank, _state.size


def _launch_record(kind, **fields):
    """Under ``python -m fluidlite.distributed.launch`` (FLUIDLITE_LAUNCH_DIR set): a record of this rank for the
    launcher's report of a failed job."""
    launch_dir = os.environ.get("FLUIDLITE_LAUNCH_DIR")
    if not launch_dir or _state is None:
        return
    from .launch import write_record
    try:
        write_record(launch_dir, kind, _state.rank, pid=os.getpid(), **fields)
    except OSError:
        pass  # the launcher is gone or its directory with it: nothing to report to


def _register_with_launcher():
    import socket
    _launch_record("rank", size=_state.size, host=socket.gethostname())


def _shutdown():
    _launch_record("finish")  # this rank's script is done: the launcher's report names a rank that left early
    # The rings' streams stop before mpi4py finalizes MPI (atexit runs in reverse order of registration, and
    # mpi4py registered its finalizer when it was imported, before init() registered this).
    try:
        core.comm_destroy_all_rings()
    except Exception:  # noqa: BLE001 -- best effort at exit
        pass


def is_initialized():
    return _state is not None


def _require():
    if _state is None:
        raise RuntimeError("fluidlite.distributed: the job is not initialized: call fleet.init(role) first")
    return _state


def rank():
    return _require().rank


def size():
    return _require().size


def local_rank():
    return _require().local_rank


def local_size():
    return _require().local_size


def timeout_s():
    return _require().timeout_s


def ring_stats(ring_id=0):
    """core.comm_ring_stats: collectives, bytes, busy_ns (the comm stream's time in collectives), wait_ns."""
    return core.comm_ring_stats(ring_id)


def barrier():
    """Returns when every rank got here; fails after the ring's timeout if one never does."""
    st = _require()
    if st.size == 1:
        return
    _wait(st.comm.Ibarrier(), "barrier")


def _wait(request, what):
    """Polls an mpi4py request with the ring's deadline (a plain Wait would hang on a lost rank)."""
    st = _state
    deadline = time.monotonic() + st.timeout_s
    pause = 1e-5
    while not request.Test():
        if time.monotonic() > deadline:
            raise RuntimeError("fluidlite.distributed: %s (rank %d of %d): the other ranks did not join within %g s: a "
                               "rank died, exited early, or runs a different program (FLUIDLITE_COMM_TIMEOUT sets the "
                               "limit)" % (what, st.rank, st.size, st.timeout_s))
        time.sleep(pause)
        pause = min(pause * 2, 5e-3)


def allgather_object(obj, what="allgather_object"):
    """Every rank's `obj` (picklable), in rank order, with the ring's deadline."""
    st = _require()
    if st.size == 1:
        return [obj]
    import pickle

    import numpy as np
    data = np.frombuffer(pickle.dumps(obj, protocol=4), dtype=np.uint8)
    sizes = np.zeros(st.size, dtype=np.int64)
    _wait(st.comm.Iallgather(np.array([data.size], dtype=np.int64), sizes), what)
    out = np.zeros(int(sizes.sum()), dtype=np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    _wait(st.comm.Iallgatherv(data, [out, sizes.tolist(), displs.tolist(), st.mpi.BYTE]), what)
    return [pickle.loads(out[displs[i]:displs[i] + sizes[i]].tobytes()) for i in range(st.size)]


def broadcast_object(obj, root=0, what="broadcast_object"):
    """Rank `root`'s `obj` on every rank."""
    return allgather_object(obj if rank() == root else None, what)[root]


def abort(message, code=1):
    """Ends every rank of the job now (MPI_Abort), after printing `message` on this rank's stderr."""
    sys.stderr.write("fluidlite.distributed: %s; aborting the job\n" % message)
    sys.stderr.flush()
    _launch_record("abort", message=message)
    st = _state
    if st is not None and st.mpi is not None and st.size > 1:
        # MPI_Abort makes mpiexec kill every rank at once: give its proxy a moment to forward what this rank (and a
        # rank failing alike at the same time) just wrote, so the job's output holds the reason.
        time.sleep(ABORT_FLUSH_S)
        st.mpi.COMM_WORLD.Abort(code)
    os._exit(code)
