"""Where the seq2seq bench model's training step spends its time, by part of the model and by op.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/seq2seq_profile.py \\
        [--steps 5 --cell reset_after --threads 2 --top 12]

Runs the ``seq2seq`` model (fluidlite.bench.models.seq2seq) for a few warm-up steps, then records ``--steps``
steps with fluidlite's profiler and splits each step's time over the main block's ops: the three StaticRNNs
(encoder forward, encoder backward, decoder) forward and backward, with the ops run inside their steps, and the
rest of the main block (output layer, loss, optimizer, ...). Self times, so the rows add up to the step.
"""
import argparse
import collections

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench.models import seq2seq

RNN_NAMES = ("encoder fwd", "encoder bwd", "decoder")


def record(cell, steps, warmup=3):
    built = seq2seq.build(32, 0, cell=cell)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed = built.feed()

    def step():
        exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    for _ in range(warmup):
        step()
    profiler.start_profiler("CPU")
    for _ in range(steps):
        step()
    profiler.stop_profiler(profile_path=None, print_report=False)
    return profiler.events()


def breakdown(events):
    """{part: {op: [calls, self ns]}} and the total ns of the Executor::run events."""
    child = collections.defaultdict(int)
    for e in events:
        if e["parent"] >= 0:
            child[e["parent"]] += e["dur_ns"]
    part_of = {}  # event index -> part name
    parts = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    total = 0
    fwd_seen, grad_seen = collections.Counter(), collections.Counter()
    for i, e in enumerate(events):
        if e["parent"] < 0:
            if e["name"] == "Executor::run":
                total += e["dur_ns"]
                fwd_seen.clear()
                grad_seen.clear()
            continue
        parent = e["parent"]
        if events[parent]["parent"] < 0:  # a main-block op
            if e["name"] == "recurrent":
                part = RNN_NAMES[fwd_seen["n"] % 3] + " forward"
                fwd_seen["n"] += 1
            elif e["name"] == "recurrent_grad":  # backward visits the RNNs in reverse order
                part = RNN_NAMES[2 - grad_seen["n"] % 3] + " backward"
                grad_seen["n"] += 1
            else:
                part = "main block"
        else:
            part = part_of.get(parent, "main block")
        part_of[i] = part
        row = parts[part][e["name"]]
        row[0] += 1
        row[1] += max(0, e["dur_ns"] - child[i])
    return parts, total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--cell", default=seq2seq.CELL, choices=("reset_after", "basic"))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--top", type=int, default=12, help="ops listed per part")
    args = ap.parse_args(argv)
    if args.threads:
        fluid.core.set_num_threads(args.threads)
    parts, total = breakdown(record(args.cell, args.steps))
    n = args.steps
    print("seq2seq (%s cell): %.2f ms per step (profiled, %d steps)" % (args.cell, total / n / 1e6, n))
    order = sorted(parts, key=lambda p: -sum(r[1] for r in parts[p].values()))
    for part in order:
        rows = parts[part]
        ms = sum(r[1] for r in rows.values()) / n / 1e6
        print("\n%-22s %8.2f ms  %5.1f%%" % (part, ms, 100.0 * ms * 1e6 * n / total))
        for op, (calls, ns) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:args.top]:
            print("    %-36s %6d calls %8.2f ms  %7.1f us/call" % (op, calls // n, ns / n / 1e6, ns / calls / 1e3))


if __name__ == "__main__":
    main()
