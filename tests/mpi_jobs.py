"""Running small MPI jobs from tests: where mpiexec is, a skip mark when it or mpi4py is missing, and a runner with
a hard timeout (a job that hangs fails the test instead of CI)."""
import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest

from fluidlite.distributed.launch import mpiexec_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKERS = os.path.join(REPO, "tests", "distributed")


MPIEXEC = mpiexec_path()
requires_mpi = pytest.mark.skipif(MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
                                  reason="needs mpiexec and mpi4py: pip install 'fluidlite[mpi]'")


def worker(name):
    return os.path.join(WORKERS, name)


def run(cmd, timeout=60, **env):
    """Runs `cmd` (a list) with PYTHONPATH at this checkout, no PADDLE_* variables and `env` added (None: unset);
    returns (returncode, stdout + stderr, seconds). Fails the test when it runs past `timeout`."""
    rc, out, _, seconds = _run(cmd, timeout, subprocess.STDOUT, env)
    return rc, out, seconds


def run_apart(cmd, timeout=60, **env):
    """As run, with stdout and stderr apart: (returncode, stdout, stderr, seconds)."""
    return _run(cmd, timeout, subprocess.PIPE, env)


def _run(cmd, timeout, stderr, env):
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    for k in [k for k in e if k.startswith("PADDLE_")]:
        del e[k]
    for k, v in env.items():  # None: unset
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    start = time.monotonic()
    # Its own session: a job past its timeout is killed whole (mpiexec, its proxies and the ranks).
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("%s ran past its %d s timeout (hung?); output:\n%s" % (" ".join(cmd), timeout,
                                                                         (out + (err or ""))[-4000:]))
    return p.returncode, out, err or "", time.monotonic() - start


def mpiexec(n, *args, timeout=60, **env):
    return run([MPIEXEC, "-n", str(n), sys.executable] + list(args), timeout=timeout, **env)


def launch(n, *args, timeout=60, launcher_args=(), **env):
    return run([sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node", str(n)]
               + list(launcher_args) + list(args), timeout=timeout, **env)
