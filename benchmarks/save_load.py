"""Save and load time of a bench model's persistables (default resnet_small), per file and combined.

    python benchmarks/save_load.py [--model resnet_small] [--repeat 15] [--dir DIR]

Builds the model, runs its startup program and one step (so the optimizer's accumulators exist), then
times ``fluid.io.save_persistables`` and ``load_persistables`` into DIR (a fresh temp directory next to
the working directory by default, so on the same file system as real saves), one file per variable and
``filename=`` (one combined file). Prints the median and the min of `repeat` runs.
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench import models


def _time(fn, repeat):
    fn()  # warm-up: the first save creates the files
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out), min(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet_small")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    built = models.load(args.model).build(batch_size=4, seed=1)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    root = args.dir or tempfile.mkdtemp(prefix=".save_load_bench.", dir=os.getcwd())
    try:
        with fluid.scope_guard(scope):
            exe.run(built.startup)
            exe.run(built.main, feed=built.feed(), fetch_list=built.fetch_list)
            pers = [v for v in built.main.list_vars() if fluid.io.is_persistable(v)]
            nbytes = sum(np.array(scope.find_var(v.name).get_tensor()).nbytes for v in pers)
            print("%s: %d persistables, %.2f MB" % (args.model, len(pers), nbytes / 1e6))
            for label, filename in (("per-file", None), ("combined", "all_vars")):
                d = os.path.join(root, label)
                save = lambda d=d, f=filename: fluid.io.save_persistables(exe, d, built.main, filename=f)
                load = lambda d=d, f=filename: fluid.io.load_persistables(exe, d, built.main, filename=f)
                for what, fn in (("save", save), ("load", load)):
                    med, best = _time(fn, args.repeat)
                    print("%-8s %-4s median %7.1f ms   min %7.1f ms" % (label, what, med * 1e3, best * 1e3))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
