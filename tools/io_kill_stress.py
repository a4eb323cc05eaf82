"""kill -9 during saves, longer than the suite's test_io.py::test_kill_9_at_random_points_never_leaves_a_mix.

    python tools/io_kill_stress.py [--kills 1000] [--fork] [--seed N] [--dir DIR]

Runs tests/io_kill_worker.py's kill loop: workers save a model generation after generation (a file per
variable, one combined file, an inference model: in turns) and get SIGKILL at a random point; after each
kill a load must get the last completed save or the one in flight, never a mix, and a final save must leave
no temporary file. Workers are fresh interpreters (python tests/io_kill_worker.py) unless --fork. Exits 1
on the first failure. Tests this checkout's fluidlite (PYTHONPATH=<another checkout> does not change that).
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # this checkout's fluidlite, whatever is installed
import io_kill_worker  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=1000)
    ap.add_argument("--fork", action="store_true", help="fork workers from this process (fast start)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where to save (default: a temp directory, removed after)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    root = args.dir or tempfile.mkdtemp(prefix="io_kill_stress.")
    worker = io_kill_worker.ForkWorker if args.fork else io_kill_worker.ProcessWorker
    print("io_kill_stress: %d kills, seed %d, %s workers, in %s" % (args.kills, seed, worker.__name__, root))
    start = time.time()
    try:
        outcomes = io_kill_worker.kill_loop(root, args.kills, random.Random(seed), worker, log=print)
    except AssertionError as e:
        print("io_kill_stress: FAIL (seed %d): %r; the directories are kept in %s" % (seed, e, root))
        return 1
    print("io_kill_stress: OK, %d kills in %.1f s: %s" % (args.kills, time.time() - start, sorted(outcomes.items())))
    if args.dir is None:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
