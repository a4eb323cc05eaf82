"""The thread pool under load: every bench model at 1 and 2 threads with 0, 1 and 2 busy background processes, for
fluidlite and PyTorch in the same conditions, and the ratios 2 threads / 1 thread per load.

    python benchmarks/thread_pool_load.py [--models all|mlp,lstm,...] [--loads 0,1,2] [--rounds 3]
                                          [--iterations N] [--repeat N] [--compare torch] [--json PATH]

Each cell is one ``python -m fluidlite.bench --model M --threads T --background-load L --compare torch`` run in a
fresh process (the bench starts the busy processes, fluidlite/bench/_load.py, and sets torch's threads with
``torch.set_num_threads(T)`` like fluidlite's). The cells run interleaved: round by round, load by load, model by
model, 1 thread then 2 threads, so slow drift of the machine's own load (other users) hits both thread counts
alike. Per cell the figure is the bench's median ms/step; per (model, load) the table shows the median over the
rounds of each thread count, and the ratio 2t/1t is the median of the rounds' ratios with its min-max range
(> 1: two threads are slower than one). Goal (issue 18): fluidlite's 2t/1t <= 1 under --background-load 1 and 2,
and no worse than torch's. The machine's load average is printed: on a shared machine there is always some load
already, so "load 0" is not an idle machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def _models(spec):
    if spec != "all":
        return spec.split(",")
    sys.path.insert(0, ROOT)
    from fluidlite.bench import models
    return sorted(n for n in models.MODELS if n != "overhead")


def run_cell(model, threads, load, args):
    """ms/step medians of one bench run: {"fluidlite": ms, "torch": ms or None}; None when the run failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "fluidlite.bench", "--model", model, "--threads", str(threads),
               "--background-load", str(load), "--json", out, "--no_progress"]
        if args.compare:
            cmd += ["--compare", args.compare]
        if args.iterations:
            cmd += ["--iterations", str(args.iterations)]
        if args.repeat:
            cmd += ["--repeat", str(args.repeat)]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not os.path.exists(out):
            print("  %s threads=%d load=%d failed (exit %d): %s" % (model, threads, load, proc.returncode,
                                                                    proc.stderr.strip()[-300:]), file=sys.stderr)
            return None
        with open(out) as f:
            doc = json.load(f)
    res = doc["results"][0]
    cell = {"fluidlite": res["ms_per_step"]["median"]}
    for e in res.get("compare", {}).get("frameworks", []):
        if e["framework"] != "fluidlite":
            cell[e["framework"]] = e["ms_per_step"]["median"] if "ms_per_step" in e else None
    return cell


def _fmt_ratio(rs):
    if not rs:
        return "-"
    return "%.2f (%.2f-%.2f)" % (statistics.median(rs), min(rs), max(rs))


def table(cells, models, loads, frameworks):
    """cells[(model, load, threads)] = list over rounds of {framework: ms}. Returns the printed lines."""
    lines = []
    head = "%-20s %4s" % ("model", "load")
    for fw in frameworks:
        head += "  %9s %9s %-18s" % (fw[:5] + " 1t", fw[:5] + " 2t", fw + " 2t/1t")
    lines.append(head)
    for model in models:
        for load in loads:
            row = "%-20s %4d" % (model, load)
            for fw in frameworks:
                one = [c.get(fw) for c in cells.get((model, load, 1), [])]
                two = [c.get(fw) for c in cells.get((model, load, 2), [])]
                ratios = [b / a for a, b in zip(one, two) if a and b]
                med = lambda xs: "%9.2f" % statistics.median([x for x in xs if x]) if any(xs) else "%9s" % "-"
                row += "  %s %s %-18s" % (med(one), med(two), _fmt_ratio(ratios))
            lines.append(row)
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="all", help="comma-separated bench models, or all (default; not overhead)")
    p.add_argument("--loads", default="0,1,2", help="background loads (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--iterations", type=int, help="timed steps per repetition (default: the model's)")
    p.add_argument("--repeat", type=int, help="repetitions per run (default: the model's)")
    p.add_argument("--compare", default="torch", help="reference frameworks ('' for none; default: torch)")
    p.add_argument("--json", metavar="PATH", help="write every cell to PATH")
    args = p.parse_args(argv)
    models = _models(args.models)
    loads = [int(x) for x in args.loads.split(",")]
    frameworks = ["fluidlite"] + [f for f in args.compare.split(",") if f]
    print("thread pool under load: models %s, loads %s, %d rounds; load average before: %s" % (
        ",".join(models), args.loads, args.rounds, _loadavg()))
    cells = {}
    for r in range(args.rounds):
        for load in loads:
            for model in models:
                for threads in (1, 2):
                    c = run_cell(model, threads, load, args)
                    if c is not None:
                        cells.setdefault((model, load, threads), []).append(c)
        print("round %d done (load average %s)" % (r + 1, _loadavg()), file=sys.stderr)
    lines = table(cells, models, loads, frameworks)
    print("ms/step medians over rounds; 2t/1t: median (min-max) of the rounds' ratios; > 1 means 2 threads slower")
    print("\n".join(lines))
    print("load average after: %s (other users share this machine)" % _loadavg())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"models": models, "loads": loads, "rounds": args.rounds,
                       "cells": [{"model": m, "load": ld, "threads": t, "runs": v} for (m, ld, t), v in cells.items()]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
