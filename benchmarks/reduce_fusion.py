"""The tuning notes' reduction-fusion program, fused against unfused: a = reduce_sum(x, dim=[1]),
b = reduce_sum(elementwise_mul(x, identity(x)), dim=[1]) on a [4096, 4096] float32 x (identity: scale(x, 1.0), or
assign with --identity assign). The fuse_reductions pass turns the four ops into one fused_reduce that reads x once.
x lives in the scope (a persistable variable), so a run times the program's ops, not a feed copy.

Runs the two programs alternately (fused, unfused, fused, ...) in one process, prints the median, min and max
time of one run each, the ratio of the medians (goal: >= 1.8), and the profiler's op rows of one profiled run of
each (the fused one shows one fused_reduce row; its args name the ops it replaced).

    PYTHONPATH=. python benchmarks/reduce_fusion.py [--rows 4096] [--cols 4096] [--repeat 7] [--runs 10]
"""
import argparse
import json
import statistics
import time

import numpy as np

import fluidlite as fluid
from fluidlite import profiler


def build(rows, cols, identity):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = main.global_block().create_var(name="x", shape=[rows, cols], dtype="float32", persistable=True)
        a = fluid.layers.reduce_sum(x, dim=[1])
        t = fluid.layers.scale(x, 1.0) if identity == "scale" else fluid.layers.assign(x)
        b = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(x, t), dim=[1])
    return main, [a, b]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--identity", choices=["scale", "assign"], default="scale")
    ap.add_argument("--repeat", type=int, default=7, help="alternating repetitions (medians over them)")
    ap.add_argument("--runs", type=int, default=10, help="runs timed together in one repetition")
    args = ap.parse_args()
    prog, fetch = build(args.rows, args.cols, args.identity)
    off = fluid.BuildStrategy()
    off.fuse_reductions = False
    programs = {"fused": prog, "unfused": fluid.CompiledProgram(prog, build_strategy=off)}
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.random.RandomState(0).uniform(-1, 1, (args.rows, args.cols)).astype("float32")
    fluid.global_scope().var("x").get_tensor().set(xv, fluid.CPUPlace())
    results = {k: exe.run(p, fetch_list=fetch) for k, p in programs.items()}
    for r in results["fused"] + results["unfused"]:
        assert r.shape == (args.rows,)
    same = all(np.array_equal(f, u) for f, u in zip(results["fused"], results["unfused"]))
    samples = {k: [] for k in programs}
    for _ in range(args.repeat):
        for k, p in programs.items():
            t0 = time.perf_counter()
            for _ in range(args.runs):
                exe.run(p, fetch_list=fetch)
            samples[k].append((time.perf_counter() - t0) / args.runs)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print("reduce fusion, x [%d, %d] float32, identity %s, %d threads; fused == unfused bit for bit: %s"
          % (args.rows, args.cols, args.identity, fluid.core.get_num_threads(), same))
    for k in programs:
        print("  %-8s median %8.3f ms  (min %.3f, max %.3f) over %d x %d runs"
              % (k, med[k] * 1e3, min(samples[k]) * 1e3, max(samples[k]) * 1e3, args.repeat, args.runs))
    print("  ratio unfused / fused: %.2fx (goal >= 1.8x)" % (med["unfused"] / med["fused"]))
    for k, p in programs.items():
        with profiler.profiler("CPU", sorted_key="total", profile_path=None, print_report=False):
            exe.run(p, fetch_list=fetch)
        rows = [e for e in profiler.events() if e["category"] == "Operator"]
        print("  profiler, %s: %d op rows" % (k, len(rows)))
        for e in rows:
            args_ = json.loads("{%s}" % e["args"]) if e["args"] else {}
            print("    %-16s %8.3f ms  %s" % (e["name"], e["dur_ns"] / 1e6,
                                             json.dumps(args_.get("fused_ops")) if "fused_ops" in args_ else ""))


if __name__ == "__main__":
    main()
