"""What one While iteration costs, against the same ops in a flat block.

    python benchmarks/while_overhead.py [--iterations 1000] [--repeat 15] [--runs 50]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.

Every While body needs two loop-control ops (increment(i), less_than(i, n, cond=cond)); a "one-op body" adds one op
of its own, here `scale` on a [16] float32 tensor. Four programs, each one exe.run per sample, timed in this process:
- loop:      While over ITERATIONS iterations of {scale, increment, less_than} (training mode and is_test),
- flat:      the same ITERATIONS x {scale, increment, less_than} unrolled in one block,
- control:   ITERATIONS x {increment, less_than} unrolled (what the loop-control ops cost by themselves),
- one op:    ITERATIONS x {scale} unrolled (what the body's op costs in a flat block).
Reported per iteration: the loop, the flat equivalent, the loop machinery (loop - flat: step scope switch, condition
read, profiler check), and the goal figure: (loop - control) / one op, the cost of an iteration of a one-op body
(its op plus the machinery) in units of that op in a flat block. Goal (issue [6/10]): <= 2x. Every figure is the
median over --repeat repetitions (each the mean of --runs calls) after warm-up; fixed per-run costs cancel in the
differences because every program runs the same number of iterations.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite import layers
from fluidlite.bench import machine_info, seconds_per_call

GOAL_RATIO = 2.0
SIZE = 16


def _counter(n):
    i = layers.fill_constant([1], "int64", 0)
    limit = layers.fill_constant([1], "int64", n)
    return i, limit


def build_loop(iterations, is_test):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [SIZE], "float32")
        i, limit = _counter(iterations)
        cond = layers.less_than(i, limit)
        loop = layers.While(cond, is_test=is_test)
        with loop.block():
            layers.scale(x, scale=1.0001, bias=0.001)
            layers.increment(i, in_place=True)
            layers.less_than(i, limit, cond=cond)
    return main, startup, i


def build_flat(iterations, scale=True, control=True):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [SIZE], "float32")
        i, limit = _counter(iterations)
        cond = layers.less_than(i, limit)
        for _ in range(iterations):
            if scale:
                layers.scale(x, scale=1.0001, bias=0.001)
            if control:
                layers.increment(i, in_place=True)
                layers.less_than(i, limit, cond=cond)
    return main, startup, i


def runner(built, x):
    main, startup, fetch = built
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": x}

    def step():
        return exe.run(main, feed=feed, fetch_list=[fetch], scope=scope)
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=15, help="repetitions; the median is reported")
    ap.add_argument("--runs", type=int, default=50, help="calls per repetition")
    args = ap.parse_args()
    n = args.iterations

    m = machine_info()
    print("machine: %s, %d cores, python %s, numpy %s, fluidlite %s (%s)" % (
        m["cpu_model"], m["cpu_usable"], m["python"], m["numpy"], m["fluidlite"], m["git_commit"] or "no git"))
    print("%d iterations per run; median of %d repetitions x %d runs after warm-up\n" % (n, args.repeat, args.runs))

    x = np.random.RandomState(0).rand(SIZE).astype("float32")
    programs = [("loop (training)", build_loop(n, False)), ("loop (is_test)", build_loop(n, True)),
                ("flat", build_flat(n)), ("control", build_flat(n, scale=False)),
                ("one op", build_flat(n, control=False))]
    us = {}
    print("%-18s %14s   %s" % ("", "us/iteration", "min-max"))
    for name, built in programs:
        step = runner(built, x)
        out = step()[0]
        if name.startswith("loop") or name == "control" or name == "flat":
            assert int(out[0]) == n, "%s ran %d iterations, not %d: not timing" % (name, int(out[0]), n)
        med, lo, hi = seconds_per_call(step, args.runs, args.repeat, max(3, args.runs // 10))
        us[name] = med * 1e6 / n
        print("%-18s %14.4f   %.4f-%.4f" % (name, us[name], lo * 1e6 / n, hi * 1e6 / n))

    print()
    for mode in ("training", "is_test"):
        loop = us["loop (%s)" % mode]
        machinery = loop - us["flat"]
        ratio = (loop - us["control"]) / us["one op"]
        print("%-9s loop machinery per iteration (loop - flat): %.4f us; loop / flat = %.2fx" % (
            mode, machinery, loop / us["flat"]))
        print("%-9s goal: one-op body iteration <= %.0fx one flat op: (loop - control) / one op = %.2fx  %s" % (
            mode, GOAL_RATIO, ratio, "PASS" if ratio <= GOAL_RATIO else "MISS"))


if __name__ == "__main__":
    main()
