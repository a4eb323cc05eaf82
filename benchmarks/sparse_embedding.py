"""Sparse against dense embedding gradients: the ctr_dnn bench model (embedding 1,000,000 x 16 over 26 slots,
batch 256, fc 400 x 3, Adam) built with is_sparse=True (SelectedRows gradient, lazy Adam touching only the
batch's rows) and with is_sparse=False (a dense 64 MB W@GRAD and an Adam update of the whole table), timed
in this process one after the other; prints ms per step of each, the ratio (goal: >= 20x) and the startup
time of the 1M x 16 table. The 3 hidden fc layers cost the same both ways; a second pair of runs without
them (embedding -> fc 2 -> loss) shows the ratio of the table's own part of the step.

    PYTHONPATH=. python benchmarks/sparse_embedding.py [--vocab 1000000] [--steps 20] [--repeat 3]
"""
import argparse
import time

import fluidlite as fluid
from fluidlite.bench.models import ctr_dnn


def measure(vocab, is_sparse, steps, repeat, batch_size, hidden=ctr_dnn.HIDDEN):
    built = ctr_dnn.build(batch_size, 1, vocab=vocab, is_sparse=is_sparse, lazy_mode=is_sparse, hidden=hidden)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        t0 = time.perf_counter()
        exe.run(built.startup)
        startup = time.perf_counter() - t0
        feed = built.feed()
        for _ in range(2):
            exe.run(built.main, feed=feed, fetch_list=built.fetch_list)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(steps):
                exe.run(built.main, feed=feed, fetch_list=built.fetch_list)
            best = min(best, (time.perf_counter() - t0) / steps)
    return best * 1e3, startup * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=ctr_dnn.VOCAB)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=256)
    args = ap.parse_args()
    sparse, startup = measure(args.vocab, True, args.steps, args.repeat, args.batch_size)
    dense, _ = measure(args.vocab, False, max(2, args.steps // 4), args.repeat, args.batch_size)
    print("ctr_dnn %d x %d, batch %d: startup (table init) %.1f ms" % (args.vocab, ctr_dnn.EMB_DIM,
                                                                    args.batch_size, startup))
    print("  is_sparse=True  (lazy Adam):  %.2f ms/step" % sparse)
    print("  is_sparse=False (dense Adam): %.2f ms/step" % dense)
    print("  sparse speedup: %.1fx (goal >= 20x)" % (dense / sparse))
    sparse0, _ = measure(args.vocab, True, args.steps, args.repeat, args.batch_size, hidden=())
    dense0, _ = measure(args.vocab, False, max(2, args.steps // 4), args.repeat, args.batch_size, hidden=())
    print("without the hidden fc layers (the table's part): sparse %.2f ms/step, dense %.2f ms/step: %.1fx"
          % (sparse0, dense0, dense0 / sparse0))


if __name__ == "__main__":
    main()
