"""The tuning notes' reduction-fusion program, fused against unfused: a = reduce_sum(x, dim=[1]),
b = reduce_sum(elementwise_mul(x, identity(x)), dim=[1]) on a [4096, 4096] float32 x (identity: scale(x, 1.0), or
assign with --identity assign). The fuse_reductions pass turns the four ops into one fused_reduce that reads x once.
x lives in the scope (a persistable variable), so a run times the program's ops, not a feed copy.

Runs the two programs alternately (fused, unfused, fused, ...) in one process, prints the median, min and max
time of one run each, the ratio of the medians (goal: >= 1.8), and the profiler's op rows of one profiled run of
each (the fused one shows one fused_reduce row; its args name the ops it replaced).

    PYTHONPATH=. python benchmarks/reduce_fusion.py [--rows 4096] [--cols 4096] [--repeat 7] [--runs 10] [--threads N]

With --models NAME,...|all it times instead the bench models' training steps (fluidlite.bench.models) with the pass
on and off, interleaved in one process (each from the same startup weights, in a scope of its own), and prints how
many groups the pass fused in each model's program and the ratio of the median step times (on / off).

    PYTHONPATH=. python benchmarks/reduce_fusion.py --models all [--repeat 7]
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


def time_models(names, repeat):
    from fluidlite.bench import models

    exe = fluid.Executor(fluid.CPUPlace())
    off = fluid.BuildStrategy()
    off.fuse_reductions = False
    print("bench models, fuse_reductions on vs off, interleaved, %d threads (median ms per step over %d "
          "repetitions)" % (fluid.core.get_num_threads(), repeat))
    for name in names:
        mod = models.load(name)
        d = mod.DEFAULTS
        built = mod.build(d["batch_size"], 0)
        feed = built.feed()
        view = exe.prepared_program(built.main, feed=list(feed), fetch_list=built.fetch_list)
        changes = sum(r["changes"] for r in view.pass_results if r["pass"] == "fuse_reductions")
        runs = {"on": built.main, "off": fluid.CompiledProgram(built.main, build_strategy=off)}
        scopes = {k: fluid.Scope() for k in runs}
        for k in runs:
            exe.run(built.startup, scope=scopes[k])
            for _ in range(d["warmup"]):
                exe.run(runs[k], feed=feed, fetch_list=built.fetch_list, scope=scopes[k])
        iters = max(1, d["iterations"] // 2)
        samples = {k: [] for k in runs}
        for _ in range(repeat):
            for k in runs:
                t0 = time.perf_counter()
                for _ in range(iters):
                    exe.run(runs[k], feed=feed, fetch_list=built.fetch_list, scope=scopes[k])
                samples[k].append((time.perf_counter() - t0) / iters * 1e3)
        med = {k: statistics.median(v) for k, v in samples.items()}
        print("  %-20s %d groups fused  on %9.3f ms  off %9.3f ms  on/off %.3f  (on %.3f-%.3f, off %.3f-%.3f)"
              % (name, changes, med["on"], med["off"], med["on"] / med["off"], min(samples["on"]),
                 max(samples["on"]), min(samples["off"]), max(samples["off"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--identity", choices=["scale", "assign"], default="scale")
    ap.add_argument("--repeat", type=int, default=7, help="alternating repetitions (medians over them)")
    ap.add_argument("--runs", type=int, default=10, help="runs timed together in one repetition")
    ap.add_argument("--threads", type=int, default=None, help="fluidlite's pool size (default: leave as is)")
    ap.add_argument("--models", default=None, help="bench models to time with the pass on and off instead (all)")
    args = ap.parse_args()
    if args.threads:
        fluid.core.set_num_threads(args.threads)
    if args.models:
        from fluidlite.bench import models
        names = sorted(models.MODELS) if args.models == "all" else args.models.split(",")
        time_models(names, args.repeat)
        return
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
