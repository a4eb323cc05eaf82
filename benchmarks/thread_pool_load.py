"""The thread pool under load: bench models at 1 and 2 threads with 0, 1 and 2 busy background processes, fluidlite
and PyTorch in the same conditions, and the ratios 2 threads / 1 thread per load.

    python benchmarks/thread_pool_load.py [--models mlp,lstm,...|all] [--loads 0,1,2] [--rounds 7]
                                          [--steps N] [--compare torch] [--pool default,cpt1,...] [--json PATH]

Per model, fluidlite's programs and the torch reference (``fluidlite.bench``'s, checked against fluidlite's first
step) are built once; then, with the bench's busy processes running (``fluidlite/bench/_load.py``, the same as
``python -m fluidlite.bench --background-load N``), the cells run interleaved in one process: round by round, each
framework at 1 thread then at 2 (``core.set_num_threads``, ``torch.set_num_threads``), a 50 ms pause (the previous
cell's spinning threads go to sleep), one warm-up step and ``--steps`` timed steps per cell. A cell's figure is its
ms/step; a (model, load, framework) row shows the median over rounds at 1 and 2 threads and the median (min-max) of
the rounds' 2t/1t ratios (> 1: two threads are slower than one). Interleaving in short cells is what makes the ratio
meaningful on a machine shared with other work: the machine's own load drifts by far more than the effect between
two separate runs.

``--pool`` adds fluidlite rows for pool settings (core.thread_pool_options), each a cell of its own at 2 threads:
``default``; ``cpt1``/``cpt2`` (1 or 2 chunks per thread); ``nobackoff``; ``asbefore`` (1 chunk per thread, no
back-off: the pool's splitting before issue 18); ``serial``/``serialcpt1`` (every job's chunks on the caller, as when
backed off, at 4 or 1 chunks per thread). Goal (issue 18): fluidlite's 2t/1t <= 1 under loads 1 and 2, and
no worse than torch's. The load average is printed: on a shared machine "load 0" is not an idle machine.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SETTLE_S = 0.05
STAT_KEYS = ("jobs", "serial_jobs", "chunks", "worker_chunks", "caller_sleeps", "backoffs", "probes", "resumes")
POOL_SETTINGS = {"default": {}, "cpt1": {"chunks_per_thread": 1}, "cpt2": {"chunks_per_thread": 2},
                 "nobackoff": {"backoff": 0}, "asbefore": {"chunks_per_thread": 1, "backoff": 0},
                 "serial": {"backoff": 2}, "serialcpt1": {"chunks_per_thread": 1, "backoff": 2}}


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def _time_steps(step, steps):
    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1e3


class _Model:
    def __init__(self, name, compare):
        import fluidlite as fluid
        from fluidlite import bench
        from fluidlite.bench import models
        mod = models.load(name)
        self.name, self.steps = name, max(3, mod.DEFAULTS["iterations"] // 5)
        self.fl = bench._Fluidlite(mod, mod.DEFAULTS["batch_size"], 0, fluid.CPUPlace())
        self.refs = {}
        for fw, runner, reason in bench._references(mod, self.fl, compare, 1):
            if runner is None:
                print("  %s: %s skipped (%s)" % (name, fw, reason), file=sys.stderr)
                continue
            if not bench._agree(self.fl.step(), runner.step(), bench.reference.tolerance(mod)):
                print("  %s: %s disagrees with fluidlite on the first step: skipped" % (name, fw), file=sys.stderr)
                continue
            self.refs[fw] = runner


def _cells(model, pools):
    """(row, threads, set-up, step) per cell of a round, the 1-thread cell of a row first."""
    from fluidlite import core
    from fluidlite.bench import reference

    def fl(threads, options):
        def setup():
            core.set_num_threads(threads)
            core.thread_pool_options(**dict({"chunks_per_thread": 4, "backoff": 1}, **options))
        return setup

    out = [("fluidlite", 1, fl(1, {}), model.fl.step)]
    for p in pools:
        out.append(("fluidlite" if p == "default" else "fluidlite " + p, 2, fl(2, POOL_SETTINGS[p]), model.fl.step))
    for fw, runner in model.refs.items():
        setter = reference.set_torch_threads if fw == "torch" else reference.set_numpy_threads
        for threads in (1, 2):
            out.append((fw, threads, (lambda s, t: lambda: s(t))(setter, threads), runner.step))
    return out


def measure(models, loads, rounds, pools, steps=None):
    """{(model, load, row): {"1t": [ms per round], "2t": [ms per round]}} (a pool row's 1t is fluidlite's), and
    {(model, load): the pool's statistics summed over the default setting's 2-thread cells}."""
    from fluidlite import core
    from fluidlite.bench._load import background_load
    res, stats = {}, {}
    for load in loads:
        with background_load(load):
            time.sleep(0.5)  # let the busy processes start
            for m in models:
                cells = _cells(m, pools)
                for _ in range(rounds):
                    for row, threads, setup, step in cells:
                        setup()
                        time.sleep(SETTLE_S)  # the previous cell's spinning threads go to sleep first
                        core.reset_thread_pool_stats()
                        ms = _time_steps(step, steps or m.steps)
                        if row == "fluidlite" and threads == 2:
                            st = core.thread_pool_stats()
                            acc = stats.setdefault((m.name, load), dict.fromkeys(STAT_KEYS, 0))
                            for k in STAT_KEYS:
                                acc[k] += st[k]
                        if row == "fluidlite" and threads == 1:
                            for p in pools:
                                r = "fluidlite" if p == "default" else "fluidlite " + p
                                res.setdefault((m.name, load, r), {"1t": [], "2t": []})["1t"].append(ms)
                        else:
                            res.setdefault((m.name, load, row), {"1t": [], "2t": []})["%dt" % threads].append(ms)
        print("load %d done (load average %s)" % (load, _loadavg()), file=sys.stderr)
    return res, stats


def table(res):
    lines = ["%-14s %4s %-20s %9s %9s  %s" % ("model", "load", "framework", "ms 1t", "ms 2t", "2t/1t median (min-max)")]
    for (model, load, row), v in res.items():
        ratios = [b / a for a, b in zip(v["1t"], v["2t"])]
        lines.append("%-14s %4d %-20s %9.2f %9.2f  %.2f (%.2f-%.2f)" % (
            model, load, row, statistics.median(v["1t"]), statistics.median(v["2t"]), statistics.median(ratios),
            min(ratios), max(ratios)))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,lstm,resnet_small",
                   help="comma-separated bench models, or all (default: %(default)s)")
    p.add_argument("--loads", default="0,1,2", help="background loads (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--steps", type=int, help="timed steps per cell (default: a fifth of the model's iterations)")
    p.add_argument("--compare", default="torch", help="reference frameworks ('' for none; default: torch)")
    p.add_argument("--pool", default="default", help="fluidlite pool settings, comma-separated, of %s (default: "
                   "%%(default)s)" % ",".join(POOL_SETTINGS))
    p.add_argument("--json", metavar="PATH", help="write every cell to PATH")
    args = p.parse_args(argv)
    from fluidlite.bench import models as bench_models
    names = sorted(n for n in bench_models.MODELS if n != "overhead") if args.models == "all" else \
        args.models.split(",")
    pools = args.pool.split(",")
    bad = [x for x in pools if x not in POOL_SETTINGS]
    if bad:
        p.error("--pool: unknown setting(s) %s" % ",".join(bad))
    loads = [int(x) for x in args.loads.split(",")]
    compare = [f for f in args.compare.split(",") if f]
    print("thread pool under load: models %s, loads %s, %d rounds; load average before: %s (other processes share "
          "this machine)" % (",".join(names), args.loads, args.rounds, _loadavg()))
    models = [_Model(n, compare) for n in names]
    res, stats = measure(models, loads, args.rounds, pools, args.steps)
    print("\n".join(table(res)))
    if stats:
        print("the pool at 2 threads, default setting (summed over its cells): parallel jobs, jobs on the caller "
              "alone (backed off), workers' share of chunks, caller sleeps, back-offs, probes, resumes")
        for (model, load), st in stats.items():
            print("%-14s %4d  jobs %6d  serial %6d  workers %3.0f%%  sleeps %5d  backoffs %3d  probes %3d  "
                  "resumes %3d" % (model, load, st["jobs"], st["serial_jobs"],
                                   100.0 * st["worker_chunks"] / max(1, st["chunks"]), st["caller_sleeps"],
                                   st["backoffs"], st["probes"], st["resumes"]))
    print("load average after: %s" % _loadavg())
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"model": m, "load": ld, "row": r, **v} for (m, ld, r), v in res.items()], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
