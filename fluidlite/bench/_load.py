"""``--background-load N``: N busy processes beside the bench, so a run on a machine where other work holds cores is
measured the same way every time (the thread pool must hold up under load: docs/benchmarks.md).

Each process spins in pure Python (one core each, no memory traffic to speak of) until the run ends; a process
whose parent dies is killed by the kernel (PR_SET_PDEATHSIG), so an interrupted bench leaves nothing behind.
"""
import contextlib
import ctypes
import multiprocessing
import os
import signal

_PR_SET_PDEATHSIG = 1


def _spin(parent):
    try:  # die with the bench, even if it is killed
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        return
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


@contextlib.contextmanager
def background_load(n):
    """Runs `n` busy processes for the duration of the block (none for 0); yields their pids."""
    if n <= 0:
        yield []
        return
    ctx = multiprocessing.get_context("fork")  # the child runs only _spin: nothing of fluidlite's state is used
    procs = [ctx.Process(target=_spin, args=(os.getpid(),), daemon=True, name="bench-load-%d" % i) for i in range(n)]
    try:
        for p in procs:
            p.start()
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.pid is not None and p.is_alive():
                p.kill()
        for p in procs:
            if p.pid is not None:
                p.join(timeout=5)
