"""Profiler overhead: time per run with the profiler on / off, measured interleaved in one process.

    python benchmarks/profiler_overhead.py [--model chain|mlp|lod|both|all] [--repeat 7]

chain: 1000 chained `scale` ops on a [16] float32 tensor (the worst case: ~0.1 us ops): the bench's
       `overhead` model.
mlp:   one training step of 784-512-512-10 (relu, softmax cross-entropy, SGD), batch 64: the bench's `mlp`.
lod:   1000 chained `scale` ops on a [64, 4] float32 LoDTensor of 64 one-row sequences (every op's args name a
       65-offset LoD: the profiler compares it with the one its cached args string was built from).
Also reports the cost of building the report for the recorded events and the trace size.
Goal (issue 4): on/off <= 1.05x on both; report for 20k events well under a second.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench import models


# name -> (fluidlite.bench model, batch size, exe.run calls per timing)
MODELS = {"chain": ("overhead", 16, 200), "mlp": ("mlp", 64, 30), "lod": (None, 64, 200)}


def lod_chain(rows, ops=1000):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        y = x = fluid.data("x", [-1, 4], lod_level=1)
        for _ in range(ops):
            y = fluid.layers.scale(y, scale=1.0)
        y = fluid.layers.reduce_sum(y)  # no LoD: the fetch returns an array
    t = fluid.create_lod_tensor(np.ones((rows, 4), "float32"), [[1] * rows], fluid.CPUPlace())
    return main, startup, {x.name: t}, [y]


def measure(name, repeat):
    model, batch_size, n = MODELS[name]
    if model is None:
        main, startup, feed, fetch = lod_chain(batch_size)
    else:
        built = models.load(model).build(batch_size, seed=1)
        main, startup, feed, fetch = built.main, built.startup, built.feed(), built.fetch_list
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    def timed():
        t = time.perf_counter()
        for _ in range(n):
            exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        return (time.perf_counter() - t) / n

    for _ in range(3):
        timed()
    off, on = [], []
    for _ in range(repeat):  # interleaved so drift hits both equally
        off.append(timed())
        fluid.core.enable_profiler()
        on.append(timed())
        fluid.core.disable_profiler()
        fluid.core.reset_profiler()
    m_off, m_on = statistics.median(off), statistics.median(on)
    # coverage: share of exe.run wall time covered by top-level events
    profiler.start_profiler("CPU")
    t = time.perf_counter()
    for _ in range(n):
        exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    wall = time.perf_counter() - t
    profiler.stop_profiler(profile_path=None, print_report=False)
    evs = profiler.events()
    top = sum(e["dur_ns"] for e in evs if e["depth"] == 0 and e["name"] == "Executor::run") / 1e9
    t = time.perf_counter()
    profiler.report("total")
    report_s = time.perf_counter() - t
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    profiler.export_chrome_trace(path)
    print("%-6s off %9.3f us/run  on %9.3f us/run  ratio %.3f  (%s)   events %d, report %.3f s, trace %.1f MB, "
          "top-level coverage %.1f%%" % (name, m_off * 1e6, m_on * 1e6, m_on / m_off,
                                           "PASS" if m_on / m_off <= 1.05 else "MISS", len(evs), report_s,
                                           os.path.getsize(path) / 1e6, 100 * top / wall))
    return m_on / m_off


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["chain", "mlp", "lod", "both", "all"], default="both",
                    help="both: chain and mlp; all: the three")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    for name in MODELS:
        if args.model in (name, "all") or (args.model == "both" and name != "lod"):
            measure(name, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
