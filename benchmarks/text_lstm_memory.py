"""Peak tensor memory of the text_lstm bench model (a LoD batch: 64 sequences of 5-100 words, no padding) against
the same model padded to the longest sequence: the StaticRNN LSTM of the ``lstm`` model over [max length, 64]
(text_lstm.build_padded), and dynamic_lstm on the batch with every sequence padded to the longest
(text_lstm.build(pad_to_longest=True)). Each runs its startup program and one step in a fresh scope, then the
allocator's peak is reset and `steps` training steps run; prints the peak bytes in tensors over those steps (what
``python -m fluidlite.bench`` prints as "peak ... in tensors"), the bytes in use before them (weights), and ms/step.

    PYTHONPATH=. python benchmarks/text_lstm_memory.py [--batch_size 64] [--steps 3] [--seed 0]
"""
import argparse
import time

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench.models import text_lstm


def measure(built, steps):
    """(peak tensor bytes during `steps` steps, bytes in use before them, ms per step)."""
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed = built.feed()
    exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    core.release_cached_memory()
    core.reset_peak_memory(place)
    before = core.memory_stats(place)["bytes_in_use"]
    t0 = time.perf_counter()
    for _ in range(steps):
        exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    ms = (time.perf_counter() - t0) / steps * 1e3
    return core.memory_stats(place)["peak_bytes"], before, ms


def variants(batch_size, seed):
    return [("text_lstm (LoD, no padding)", text_lstm.build(batch_size, seed)),
            ("padded: StaticRNN LSTM [max len, N]", text_lstm.build_padded(batch_size, seed)),
            ("padded: dynamic_lstm, all sequences max len", text_lstm.build(batch_size, seed, pad_to_longest=True))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    _, lengths, _ = text_lstm.sample_batch(args.batch_size, args.seed)
    print("batch of %d sequences, %d rows (lengths %d-%d); padded to the longest: %d rows"
          % (len(lengths), sum(lengths), min(lengths), max(lengths), max(lengths) * len(lengths)))
    first = None
    for name, built in variants(args.batch_size, args.seed):
        peak, before, ms = measure(built, args.steps)
        first = first or peak
        print("  %-45s peak %7.1f MiB in tensors (%.1f MiB before the steps), %.2fx of text_lstm's; %.1f ms/step"
              % (name, peak / 2**20, before / 2**20, peak / first, ms))


if __name__ == "__main__":
    main()
