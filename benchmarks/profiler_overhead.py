"""Profiler overhead: time per run with the profiler on / off, measured interleaved in one process.

    python benchmarks/profiler_overhead.py [--model chain|mlp|both] [--repeat 7]

chain: 1000 chained `scale` ops on a [16] float32 tensor (the worst case: ~0.1 us ops): the bench's
       `overhead` model.
mlp:   one training step of 784-512-512-10 (relu, softmax cross-entropy, SGD), batch 64: the bench's `mlp`.
Also reports the cost of building the report for the recorded events and the trace size.
Goal (issue 4): on/off <= 1.05x on both; report for 20k events well under a second.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench import models


# name -> (fluidlite.bench model, batch size, exe.run calls per timing)
MODELS = {"chain": ("overhead", 16, 200), "mlp": ("mlp", 64, 30)}


def measure(name, repeat):
    model, batch_size, n = MODELS[name]
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
    ap.add_argument("--model", choices=["chain", "mlp", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    for name in MODELS:
        if args.model in (name, "both"):
            measure(name, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
