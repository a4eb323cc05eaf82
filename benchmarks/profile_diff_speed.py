"""Times save_profile, load_profile and diff + text on a synthetic profile of --events events (Executor::run steps of
99 op events each, with args strings as the recorder writes them), and prints the file size.

    PYTHONPATH=. python benchmarks/profile_diff_speed.py [--events 200000] [--path /tmp/profile_diff_speed.json]

The house target: analysis of a 200k-event profile well under a few seconds.
"""
import argparse
import os
import random
import time

import fluidlite as fluid
from fluidlite.profiler import Event

OPS = ("mul", "elementwise_add", "relu", "tanh", "sum", "reduce_sum", "scale", "fetch", "feed")
OPS_PER_STEP = 99


def synthetic_events(count, seed=0):
    rng = random.Random(seed)
    evs, t = [], 0
    while len(evs) < count:
        root = len(evs)
        evs.append(Event(name="Executor::run", category="Executor", start_ns=t, end_ns=t + 100_000, dur_ns=100_000,
                         thread=0, tid=1, depth=0, parent=-1, bytes=-1, args=None, cpu_ns=-1, mem_in_use=-1,
                         mem_peak=-1, value=-1))
        for k in range(OPS_PER_STEP):
            start = t + k * 1000 + rng.randrange(50)
            evs.append(Event(name=rng.choice(OPS), category="Operator", start_ns=start, end_ns=start + 900,
                             dur_ns=900, thread=0, tid=1, depth=1, parent=root, bytes=-1,
                             args='"inputs":"X[32, 128]","outputs":"Out[32, 128]","block":0,"index":%d' % k,
                             cpu_ns=-1, mem_in_use=1 << 20, mem_peak=2 << 20, value=-1))
        t += 100_000
    return evs[:count]  # parents come before their children: a cut keeps every parent index valid


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--path", default="/tmp/profile_diff_speed.json")
    args = ap.parse_args()
    evs = synthetic_events(args.events)
    t0 = time.perf_counter()
    fluid.profiler.save_profile(args.path, events=evs)
    t1 = time.perf_counter()
    loaded = fluid.profiler.load_profile(args.path)
    t2 = time.perf_counter()
    text = fluid.profiler.diff(loaded, evs).text()
    t3 = time.perf_counter()
    print("%d events: save %.2f s, load %.2f s, diff + text %.2f s (%d rows); file %.1f MB" % (
        len(evs), t1 - t0, t2 - t1, t3 - t2, text.count("\n"), os.path.getsize(args.path) / 1e6))
    os.unlink(args.path)


if __name__ == "__main__":
    main()
