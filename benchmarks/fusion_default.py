"""Does elementwise fusion pay? Every bench model's training step with the fuse_elementwise_chains pass on and off,
in one process, interleaved (on, off, on, off, ...), so that a loaded machine slows both alike.

    python benchmarks/fusion_default.py [--models mlp,lstm_primitive] [--rounds 7] [--steps 5] [--threads N]
                                        [--torch] [--cpu]

For each model: the fused op count, ms/step median (and min) of each variant over --rounds rounds of --steps steps,
and off / on (> 1: fusion is faster). --cpu times the process's CPU time instead of wall time (on a machine shared
with other processes it is the steadier figure; with more than one thread it adds the threads up). --torch adds the
model's torch reference (reference_torch, from fluidlite's initial weights), interleaved too, and torch / on (> 1:
fluidlite is faster). The pass-off variant is prepared under FLUIDLITE_DISABLE_PASSES (read when a program is
prepared). This is how BuildStrategy.fuse_elementwise_chains' default was decided (docs/architecture.md,
"Elementwise fusion").
"""
import argparse
import os
import statistics
import time

import numpy as np

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


def torch_step(name):
    """The model's torch reference step from fluidlite's initial weights, or None."""
    mod = models.load(name)
    if not hasattr(mod, "reference_torch"):
        return None
    built = mod.build(mod.DEFAULTS["batch_size"], 0)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(built.startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in built.main.global_block().all_parameters()}
    return mod.reference_torch(params, built.feed()).step


def measure(name, rounds, steps, clock, torch=False, warmup=3):
    (on, fused), (off, _) = prepared_step(name, False), prepared_step(name, True)
    variants = [("on", on), ("off", off)]
    if torch and torch_step(name):
        variants.append(("torch", torch_step(name)))
    for _ in range(warmup):
        for _, fn in variants:
            fn()
    times = {label: [] for label, _ in variants}
    for _ in range(rounds):
        for label, fn in variants:
            t0 = clock()
            for _ in range(steps):
                fn()
            times[label].append((clock() - t0) / steps * 1e3)
    return fused, times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(models.MODELS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--torch", action="store_true", help="add the torch reference where the model has one")
    ap.add_argument("--cpu", action="store_true", help="process CPU time instead of wall time")
    args = ap.parse_args()
    if args.threads:
        fluid.core.set_num_threads(args.threads)
        if args.torch:
            import torch
            torch.set_num_threads(args.threads)
    clock = time.process_time if args.cpu else time.perf_counter
    print("%-20s %6s %22s %22s %8s%s" % ("model", "fused", "on ms (min)", "off ms (min)", "off/on",
                                         " %22s %9s" % ("torch ms (min)", "torch/on") if args.torch else ""))
    for name in args.models.split(","):
        fused, t = measure(name, args.rounds, args.steps, clock, args.torch)
        on, off = statistics.median(t["on"]), statistics.median(t["off"])
        line = "%-20s %6d %14.3f (%6.3f) %14.3f (%6.3f) %8.3f" % (name, fused, on, min(t["on"]), off, min(t["off"]),
                                                                  off / on)
        if "torch" in t:
            tt = statistics.median(t["torch"])
            line += " %14.3f (%6.3f) %9.3f" % (tt, min(t["torch"]), tt / on)
        print(line, flush=True)


if __name__ == "__main__":
    main()
