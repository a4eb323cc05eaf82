"""Launches a data-parallel job on this machine: ``python -m fluidlite.distributed.launch --nproc_per_node N
train.py args...`` (Paddle's ``paddle.distributed.launch``), over the mpich wheel's ``mpiexec``.

    python -m fluidlite.distributed.launch --nproc_per_node 2 [--log_dir DIR] [--threads_per_rank T] train.py ...

is ``mpiexec -n 2 python -u train.py ...`` plus:
- the environment of Paddle's launcher for each rank: PADDLE_TRAINER_ID (the MPI rank), PADDLE_TRAINERS_NUM,
  PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT (informational: MPI carries the data), so
  ``PaddleCloudRoleMaker`` works; FLUIDLITE_NUM_THREADS = cores // N unless --threads_per_rank or
  FLUIDLITE_NUM_THREADS says otherwise;
- --log_dir: each rank's stdout and stderr go to DIR/workerlog.R instead of the terminal;
- a report when the job fails, naming the rank that failed first and how, e.g. ``rank 1 (pid 1234) was killed by
  signal 9 (SIGKILL); the job was stopped``. hydra only names a pid, and when it stops the other ranks it may name
  one of those, so each rank runs under a small watcher (this file, run by path with ``--_watch``) that hydra
  starts: it starts the rank as its child, so it learns the rank's exit status, and writes it into
  FLUIDLITE_LAUNCH_DIR, where ``comm.init`` registers the rank and ``comm.abort`` records why it aborts.

Only the standard library is imported here: the watcher runs before (and beside) the rank's own interpreter.
"""
import argparse
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["main", "find_mpiexec", "mpiexec_path", "usable_cores", "describe_failure"]

PROG = "fluidlite.distributed.launch"
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def mpiexec_path():
    """The mpiexec of this interpreter's environment (the mpich wheel installs it beside python), else PATH's;
    None when there is none. The launcher, the bench and the tests all start their ranks with it."""
    for d in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")):
        path = os.path.join(d, "mpiexec")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which("mpiexec")


def find_mpiexec():
    """mpiexec_path(), or an error that says what to install."""
    path = mpiexec_path()
    if path is None:
        raise RuntimeError("%s: mpiexec not found (neither beside %s nor on PATH): pip install 'fluidlite[mpi]' "
                           "(mpi4py and the mpich wheel, which brings mpiexec)" % (PROG, sys.executable))
    return path


def usable_cores():
    """The CPUs this process may run on (its affinity mask; the CPU count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m " + PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc_per_node", type=int, default=1, help="number of ranks to start (default 1)")
    ap.add_argument("--log_dir", default=None, help="write rank R's stdout and stderr to LOG_DIR/workerlog.R")
    ap.add_argument("--threads_per_rank", type=int, default=None,
                    help="FLUIDLITE_NUM_THREADS of each rank (default: FLUIDLITE_NUM_THREADS if set, else this "
                         "machine's cores // nproc_per_node)")
    ap.add_argument("--started_port", type=int, default=6170,
                    help="first port of PADDLE_TRAINER_ENDPOINTS (informational: MPI carries the data)")
    ap.add_argument("training_script")
    ap.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    if args.nproc_per_node < 1:
        ap.error("--nproc_per_node must be >= 1, got %d" % args.nproc_per_node)
    if args.threads_per_rank is not None and args.threads_per_rank < 1:
        ap.error("--threads_per_rank must be >= 1, got %d" % args.threads_per_rank)
    if not os.path.isfile(args.training_script):
        ap.error("training script %s does not exist" % args.training_script)
    return args


# ---- the report when the job fails

def _read_records(launch_dir, kind):
    out = {}
    for path in glob.glob(os.path.join(launch_dir, kind + ".*.json")):
        try:
            with open(path) as f:
                rec = json.load(f)
            out[int(rec["rank"])] = rec
        except (OSError, ValueError, KeyError):
            pass  # a record being replaced: os.replace makes that rare; what is left still tells the story
    return out


def _how(returncode):
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return "was killed by signal %d (%s)" % (-returncode, name)
    return "exited with code %d" % returncode


def describe_failure(launch_dir, mpiexec_rc):
    """One line naming the rank that failed first and how, from the records in `launch_dir`: a rank that aborted
    (comm.abort: an uncaught exception, a failed collective), or one whose process ended with an error."""
    ranks = _read_records(launch_dir, "rank")
    exits = _read_records(launch_dir, "exit")
    events = []  # (time, rank, what)
    for r, rec in _read_records(launch_dir, "abort").items():
        events.append((rec["time"], r, "aborted the job: %s" % rec["message"]))
    for r, rec in exits.items():
        if rec["returncode"] != 0:
            events.append((rec["time"], r, "%s; the job was stopped" % _how(rec["returncode"])))

    def who(r):
        pid = ranks.get(r, exits.get(r, {})).get("pid")
        return "rank %d (pid %s)" % (r, pid) if pid is not None else "rank %d" % r

    if not events:
        return ("%s: mpiexec failed with exit code %d and no rank recorded why (it may have failed before joining "
                "the job; see the output above)" % (PROG, mpiexec_rc))
    t, r, what = min(events)
    line = "%s: %s %s" % (PROG, who(r), what)
    # A rank that left while the others still trained is what makes them time out: say so.
    finished = _read_records(launch_dir, "finish")
    for q, rec in exits.items():
        if rec["returncode"] == 0:
            finished.setdefault(q, rec)
    early = sorted(q for q, rec in finished.items() if rec["time"] < t and q != r)
    if early:
        line += " (before that, %s had finished the training script and was exiting while the others still ran)" % (
            ", ".join(who(q) for q in early))
    return line


# ---- the job

def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        mpiexec = find_mpiexec()
    except RuntimeError as e:
        sys.stderr.write("%s\n" % e)
        return 2
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        sys.stderr.write("%s: mpi4py is not installed: pip install 'fluidlite[mpi]'\n" % PROG)
        return 2
    n = args.nproc_per_node
    threads = args.threads_per_rank or os.environ.get("FLUIDLITE_NUM_THREADS") or max(1, usable_cores() // n)
    launch_dir = tempfile.mkdtemp(prefix="fluidlite-launch-")
    env = dict(os.environ)
    env.update({
        "PADDLE_TRAINERS_NUM": str(n),
        "PADDLE_TRAINER_ENDPOINTS": ",".join("127.0.0.1:%d" % (args.started_port + i) for i in range(n)),
        "FLUIDLITE_NUM_THREADS": str(threads),
        "FLUIDLITE_LAUNCH_DIR": launch_dir,
    })
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        env["FLUIDLITE_LAUNCH_LOG_DIR"] = os.path.abspath(args.log_dir)
    env.pop("PADDLE_TRAINER_ID", None)  # each rank's watcher sets its own
    cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__), "--_watch",
           sys.executable, "-u", args.training_script] + args.training_script_args
    try:
        proc = subprocess.Popen(cmd, env=env)
        received = []

        def forward(signum, _frame):  # Ctrl-C, a batch system's SIGTERM: mpiexec stops the ranks
            received.append(signum)
            proc.send_signal(signum)
        for s in _FORWARDED:
            signal.signal(s, forward)
        rc = proc.wait()
        if received:
            name = signal.Signals(received[0]).name
            sys.stderr.write("%s: the job was stopped by %s (sent to the launcher, forwarded to mpiexec)\n"
                             % (PROG, name))
            return 128 + received[0]
        if rc != 0:
            sys.stdout.flush()
            sys.stderr.write(describe_failure(launch_dir, rc) + "\n")
            if args.log_dir:
                sys.stderr.write("%s: the ranks' output is in %s/workerlog.*\n" % (PROG, args.log_dir))
        return rc if rc > 0 else (128 - rc if rc < 0 else 0)
    finally:
        shutil.rmtree(launch_dir, ignore_errors=True)


# ---- one rank's watcher (hydra starts it; it starts the rank)

def write_record(launch_dir, kind, rank, **fields):
    """Atomically writes LAUNCH_DIR/KIND.RANK.json, stamped with the time unless `fields` has one (comm.init,
    comm.abort and comm's exit hook write records too)."""
    fields = dict(fields, rank=int(rank))
    fields.setdefault("time", time.time())
    path = os.path.join(launch_dir, "%s.%d.json" % (kind, rank))
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(fields, f)
    os.replace(tmp, path)


def _rank_preexec():
    # Its own process group: a Ctrl-C reaches the rank once, forwarded by the watcher.
    os.setpgid(0, 0)
    # The rank must not outlive its watcher: hydra stops a job by killing the processes it started.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _watch(cmd):
    rank = int(os.environ.get("PMI_RANK", "0"))
    env = dict(os.environ)
    env["PADDLE_TRAINER_ID"] = str(rank)
    eps = env.get("PADDLE_TRAINER_ENDPOINTS", "").split(",")
    if rank < len(eps):
        env["PADDLE_CURRENT_ENDPOINT"] = eps[rank]
    log = None
    log_dir = env.pop("FLUIDLITE_LAUNCH_LOG_DIR", None)
    if log_dir:
        log = open(os.path.join(log_dir, "workerlog.%d" % rank), "w")
    # close_fds=False: the rank inherits hydra's PMI socket (PMI_FD).
    child = subprocess.Popen(cmd, env=env, close_fds=False, stdout=log, stderr=log and subprocess.STDOUT,
                             preexec_fn=_rank_preexec)
    for s in _FORWARDED:
        signal.signal(s, lambda signum, _frame: child.send_signal(signum))
    rc = child.wait()
    launch_dir = env.get("FLUIDLITE_LAUNCH_DIR")
    if launch_dir and os.path.isdir(launch_dir):
        write_record(launch_dir, "exit", rank, pid=child.pid, returncode=rc, host=socket.gethostname())
    if rc < 0:  # end the same way, so that hydra reports what happened to the rank
        if -rc in _FORWARDED:
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_watch":
        sys.exit(_watch(sys.argv[2:]))
    sys.exit(main())
