"""Profiler overhead: time per run with the profiler on / off, measured interleaved in one process.

    python benchmarks/profiler_overhead.py [--model chain|mlp|both] [--repeat 7]

chain: 1000 chained `scale` ops on a [16] float32 tensor (the worst case: ~0.1 us ops).
mlp:   one training step of 784-512-512-10 (relu, softmax cross-entropy, SGD), batch 64.
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


def chain():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[16], dtype="float32", append_batch_size=False)
        h = x
        for _ in range(1000):
            h = fluid.layers.scale(h, scale=1.0001)
    feed = {"x": np.random.rand(16).astype("float32")}
    return main, startup, feed, [h], 200


def mlp():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        img = fluid.layers.data(name="img", shape=[784], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=img, size=512, act="relu")
        h = fluid.layers.fc(input=h, size=512, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
    rng = np.random.RandomState(0)
    feed = {"img": rng.rand(64, 784).astype("float32"), "label": rng.randint(0, 10, (64, 1)).astype("int64")}
    return main, startup, feed, [loss], 30


def measure(name, build, repeat):
    main, startup, feed, fetch, n = build()
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
    if args.model in ("chain", "both"):
        measure("chain", chain, args.repeat)
    if args.model in ("mlp", "both"):
        measure("mlp", mlp, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
