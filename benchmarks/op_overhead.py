"""Per-op and per-run overhead of the fluidlite executor vs a numpy loop and PyTorch eager.

    python benchmarks/op_overhead.py [--ops 1000] [--size 16] [--repeat 15] [--runs 200]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.

fluidlite runs a program of OPS chained `scale` ops on a [SIZE] float32 tensor, one exe.run per sample
(feed x, fetch the last output). numpy runs `x = x * s + b` OPS times; PyTorch runs the same loop in
eager mode under no_grad. The fixed cost is one exe.run of a 1-op program. Every figure is the median
over --repeat repetitions (each the mean of --runs calls) after warm-up, all measured in this process.
Goals (issue 2): <= 0.2 us per op and <= 10 us fixed per run.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite.bench import machine_info, seconds_per_call
from fluidlite.bench.models.overhead import NumpyChain, TorchChain, build_chain

GOAL_US_PER_OP = 0.2
GOAL_FIXED_US = 10.0


def median_us(fn, runs, repeat, warmup):
    """(median, min, max) over `repeat` repetitions of the mean time of one fn() call, in microseconds."""
    return tuple(s * 1e6 for s in seconds_per_call(fn, runs, repeat, warmup))


def fluidlite_runner(num_ops, size, x):
    main, startup, out = build_chain(num_ops, size)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": x}
    fetch = [out]

    def step():
        return exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    return step


def torch_runner(num_ops, x):
    try:
        import torch
    except ImportError:
        return None, None
    return TorchChain(x, num_ops).step, torch.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=15, help="repetitions; the median is reported")
    ap.add_argument("--runs", type=int, default=200, help="calls per repetition (the fixed cost uses 20x)")
    args = ap.parse_args()

    m = machine_info()
    print("machine: %s, %d cores, python %s, numpy %s, fluidlite %s (%s)" % (
        m["cpu_model"], m["cpu_usable"], m["python"], m["numpy"], m["fluidlite"], m["git_commit"] or "no git"))
    print("%d chained scale ops on a [%d] float32 tensor; median of %d repetitions x %d runs after warm-up\n"
          % (args.ops, args.size, args.repeat, args.runs))

    x = np.random.RandomState(0).rand(args.size).astype("float32")
    fl_step = fluidlite_runner(args.ops, args.size, x)
    fixed_step = fluidlite_runner(1, args.size, x)
    numpy_step = NumpyChain(x, args.ops).step
    ref = numpy_step()
    got = fl_step()[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, err_msg="fluidlite and numpy disagree: not timing")

    torch_step, torch_version = torch_runner(args.ops, x)
    runners = [("fluidlite", fl_step), ("numpy loop", numpy_step)]
    if torch_step is not None:
        np.testing.assert_allclose(torch_step(), ref, rtol=1e-4, err_msg="torch and numpy disagree")
        runners.append(("torch eager %s" % torch_version, torch_step))

    warm = max(3, args.runs // 10)
    per_op = {}
    print("%-22s %12s %12s   %s" % ("", "us/op", "us/run", "min-max us/op"))
    for name, step in runners:
        med, lo, hi = median_us(step, args.runs, args.repeat, warm)
        per_op[name.split()[0]] = med / args.ops
        print("%-22s %12.4f %12.1f   %.4f-%.4f" % (name, med / args.ops, med, lo / args.ops, hi / args.ops))
    if torch_step is None:
        print("%-22s %s" % ("torch eager", "skipped: not installed"))

    fixed, flo, fhi = median_us(fixed_step, args.runs * 20, args.repeat, warm * 20)
    marginal = (per_op["fluidlite"] * args.ops - fixed) / max(args.ops - 1, 1)
    print("\nfluidlite fixed cost of one exe.run (1-op program, feed + fetch): %.2f us (min %.2f, max %.2f)"
          % (fixed, flo, fhi))
    print("fluidlite marginal cost per op ((run - fixed) / (ops - 1)): %.4f us" % marginal)
    print("ratios: numpy loop / fluidlite = %.1fx" % (per_op["numpy"] / per_op["fluidlite"]), end="")
    if "torch" in per_op:
        print(", torch eager / fluidlite = %.1fx" % (per_op["torch"] / per_op["fluidlite"]), end="")
    print("  (higher = fluidlite faster)\n")

    ok_op = per_op["fluidlite"] <= GOAL_US_PER_OP
    ok_fixed = fixed <= GOAL_FIXED_US
    print("goal: <= %.1f us/op (whole run / ops):   %.4f us  %s" % (GOAL_US_PER_OP, per_op["fluidlite"],
                                                                    "PASS" if ok_op else "MISS"))
    print("goal: <= %.0f us fixed per exe.run:       %.2f us  %s" % (GOAL_FIXED_US, fixed,
                                                                    "PASS" if ok_fixed else "MISS"))


if __name__ == "__main__":
    main()
