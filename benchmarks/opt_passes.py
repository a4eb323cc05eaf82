"""A BuildStrategy flag off against on, on the bench models, measured so that a shared, loaded machine hurts least:
the step as the calling thread's CPU time with one pool thread (time.thread_time() around each exe.run: time the
process is preempted does not count), off and on interleaved in one process; and per op, the profiler's minimum
over interleaved steps of each op type's total per step. The numbers in docs/architecture.md ("Optimizer and
aggregation fusion") come from it.

    PYTHONPATH=. python benchmarks/opt_passes.py --flag enable_inplace --models resnet_small,mobilenet_v2
        [--reps 9] [--steps 3] [--ops relu,relu_grad,sum] [--threads 1]

--flag may join several with "+" (fuse_bn_act_ops+enable_inplace). --ops prints the per-op table for those op
types (and every op whose name starts with "fused_"); without it, only the step times.
"""
import argparse
import collections
import importlib
import statistics
import time


def build_variants(name, flags):
    import fluidlite as fluid

    mod = importlib.import_module("fluidlite.bench.models." + name)
    b = mod.build(mod.DEFAULTS["batch_size"], 0)
    feed = b.feed()
    variants = {}
    for on in (False, True):
        bs = fluid.BuildStrategy()
        for f in flags:
            setattr(bs, f, on)
        scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
        prog = fluid.CompiledProgram(b.main, build_strategy=bs)
        with fluid.scope_guard(scope):
            exe.run(b.startup)
            for _ in range(2):
                exe.run(prog, feed=feed, fetch_list=b.fetch_list)
        variants[on] = (scope, exe, prog)
    return b, feed, variants


def step_times(b, feed, variants, reps, steps):
    import fluidlite as fluid

    cpu = {False: [], True: []}
    for r in range(reps):
        for on in ((False, True) if r % 2 == 0 else (True, False)):
            scope, exe, prog = variants[on]
            with fluid.scope_guard(scope):
                for _ in range(steps):
                    c = time.thread_time()
                    exe.run(prog, feed=feed, fetch_list=b.fetch_list)
                    cpu[on].append((time.thread_time() - c) * 1e3)
    return cpu


def op_times(b, feed, variants, reps):
    import fluidlite as fluid
    from fluidlite.profiler import _session

    per = collections.defaultdict(list)
    for r in range(reps):
        for on in ((False, True) if r % 2 == 0 else (True, False)):
            scope, exe, prog = variants[on]
            with fluid.scope_guard(scope):
                fluid.profiler.start_profiler("CPU")
                exe.run(prog, feed=feed, fetch_list=b.fetch_list)
                events = _session._collect()
                fluid.profiler.stop_profiler(print_report=False)
            total = collections.defaultdict(float)
            for e in events:
                if e["category"] == "Operator":
                    total[e["name"]] += e["dur_ns"] / 1e3
            for op, us in total.items():
                per[(on, op)].append(us)
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flag", required=True, help="BuildStrategy field(s), joined by +")
    ap.add_argument("--models", default="resnet_small")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--ops", default="")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    from fluidlite import core

    core.set_num_threads(a.threads)
    flags = a.flag.split("+")
    for name in a.models.split(","):
        b, feed, variants = build_variants(name, flags)
        cpu = step_times(b, feed, variants, a.reps, a.steps)
        off, on = statistics.median(cpu[False]), statistics.median(cpu[True])
        print("%-20s step cpu ms: off %.2f (min %.2f)  on %.2f (min %.2f)  off/on %.3f (min %.3f)" % (
            name, off, min(cpu[False]), on, min(cpu[True]), off / on, min(cpu[False]) / min(cpu[True])), flush=True)
        if a.ops:
            wanted = set(a.ops.split(","))
            per = op_times(b, feed, variants, max(3, a.reps // 2 * 2))
            for op in sorted({op for _, op in per if op in wanted or op.startswith("fused_")}):
                print("    %-30s per step, min: off %8.0f us  on %8.0f us" % (
                    op, min(per.get((False, op), [0])), min(per.get((True, op), [0]))))


if __name__ == "__main__":
    main()
