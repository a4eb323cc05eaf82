"""Does elementwise fusion pay? Every bench model's training step with the fuse_elementwise_chains pass on and off,
in one process, interleaved (on, off, on, off, ...), so that a loaded machine slows both alike.

    python benchmarks/fusion_default.py [--models mlp,lstm_primitive] [--rounds 7] [--steps 5] [--threads N]

For each model: the fused op count, ms/step median (and min) of each variant over --rounds rounds of --steps steps,
and off / on (> 1: fusion is faster). The pass-off variant is prepared under FLUIDLITE_DISABLE_PASSES (read when a
program is prepared). This is how BuildStrategy.fuse_elementwise_chains' default was decided (docs/architecture.md,
"Elementwise fusion").
"""
import argparse
import os
import statistics
import time

import fluidlite as fluid
from fluidlite.bench import models

PASS = "fuse_elementwise_chains"


def prepared_step(name, disable):
    mod = models.load(name)
    old = os.environ.pop("FLUIDLITE_DISABLE_PASSES", None)
    if disable:
        os.environ["FLUIDLITE_DISABLE_PASSES"] = PASS
    try:
        built = mod.build(mod.DEFAULTS["batch_size"], 0)
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(built.startup, scope=scope)
        feed = built.feed()

        def step():
            exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
        step()  # prepares (and applies the passes) now, under this environment
        view = exe.prepared_program(built.main, feed=list(feed), fetch_list=built.fetch_list, scope=scope)
        fused = sum(op.type == "fused_elementwise" for b in view.blocks for op in b.ops)
        return step, fused
    finally:
        os.environ.pop("FLUIDLITE_DISABLE_PASSES", None)
        if old is not None:
            os.environ["FLUIDLITE_DISABLE_PASSES"] = old


def measure(name, rounds, steps, warmup=3):
    (on, fused), (off, _) = prepared_step(name, False), prepared_step(name, True)
    for _ in range(warmup):
        on()
        off()
    times = {"on": [], "off": []}
    for _ in range(rounds):
        for label, fn in (("on", on), ("off", off)):
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            times[label].append((time.perf_counter() - t0) / steps * 1e3)
    return fused, times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(models.MODELS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    if args.threads:
        fluid.core.set_num_threads(args.threads)
    print("%-20s %6s %22s %22s %8s" % ("model", "fused", "on ms (min)", "off ms (min)", "off/on"))
    for name in args.models.split(","):
        fused, t = measure(name, args.rounds, args.steps)
        on, off = statistics.median(t["on"]), statistics.median(t["off"])
        print("%-20s %6d %14.3f (%6.3f) %14.3f (%6.3f) %8.3f" % (name, fused, on, min(t["on"]), off, min(t["off"]),
                                                                 off / on), flush=True)


if __name__ == "__main__":
    main()
