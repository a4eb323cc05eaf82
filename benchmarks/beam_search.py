"""Times one beam_search step, beam_search_decode and gather_tree at decoder-like sizes, from fluidlite's own profiler
events, beside PyTorch doing the same selection the batched way (BeamSearchDecoder's: scores viewed as [batch,
beam * V], topk) and numpy tracing the beams back step by step.

    PYTHONPATH=. python benchmarks/beam_search.py [--runs 30] [--threads 2] [--batch 32] [--beam 4] [--vocab 10000]

Cases: beam_search over the whole vocabulary (no ids: each prefix's V scores, is_accumulated), beam_search after a
top_k of beam_size per prefix (ids given, the book's machine_translation decoder), beam_search_decode of a 30-step
search, and gather_tree over [T=50, batch, beam]. Each figure is the fastest of --runs calls after warm-up (the
minimum: on a shared machine the median moves with the other processes' load); fluidlite's are the op events'
durations, PyTorch's and numpy's the wall time of the same work. The selections are checked against each other before
timing.
"""
import argparse
import os
import sys

import numpy as np

import fluidlite as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sequence_misc_ops import op_times, wall_ms  # noqa: E402


def beam_search_program(width, with_ids):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pre_ids = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        pre_scores = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        scores = fluid.data("scores", [-1, width], "float32", lod_level=2)
        ids = fluid.data("ids", [-1, width], "int64", lod_level=2) if with_ids else None
        outs = fluid.layers.beam_search(pre_ids, pre_scores, ids, scores, BEAM, END, return_parent_idx=True)
    return main, list(outs)


def bench_beam_search(rng, runs, torch, with_ids):
    rows = BATCH * BEAM
    lod = [[BEAM] * BATCH, [1] * rows]
    full = rng.randn(rows, VOCAB).astype("float32")
    pre_ids = rng.randint(1, VOCAB, (rows, 1)).astype("int64")  # no prefix has ended
    feed = {"pre_ids": (pre_ids, lod), "pre_scores": (np.zeros((rows, 1), "float32"), lod)}
    if with_ids:  # the per-prefix top_k the book's decoder runs first
        ids = np.argsort(-full, axis=1)[:, :BEAM].astype("int64")
        scores = np.take_along_axis(full, ids, 1)
        feed.update(scores=(scores, lod), ids=(ids, lod))
    else:
        scores = full
        feed["scores"] = (scores, lod)
    main, fetch = beam_search_program(scores.shape[1], with_ids)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    # Check: each source keeps the beam_size best scores of its whole [beam, V] block.
    best = np.sort(-full.reshape(BATCH, -1), axis=1)[:, :BEAM]
    np.testing.assert_allclose(np.sort(-np.array(got[1]).reshape(BATCH, BEAM), axis=1), best, rtol=1e-6)
    ours = op_times(main, feed, fetch[2:], ["beam_search"], runs)["beam_search"]  # parent_idx: no LoD to fetch
    theirs = None
    if torch is not None:
        t = torch.from_numpy(scores.reshape(BATCH, -1))
        vals, idx = t.topk(BEAM, dim=1)
        np.testing.assert_allclose(np.sort(-vals.numpy(), axis=1), best, rtol=1e-6)

        def step():  # the batched selection: flat top-k, then the parent beam and the token of each
            v, i = t.topk(BEAM, dim=1)
            return v, i // scores.shape[1], i % scores.shape[1]
        theirs = wall_ms(step, runs)
    label = "beam_search, %s [%d, %d]" % ("top_k'd ids" if with_ids else "whole vocabulary", rows, scores.shape[1])
    return label, ours, theirs, "torch topk over [batch, beam*V]"


def bench_beam_search_decode(rng, runs, steps=30):
    """A search of `steps` top_k'd steps over random scores (ended prefixes and pruned sources included), then the
    decode of its arrays."""
    main, fetch = beam_search_program(BEAM, True)
    exe = fluid.Executor(fluid.CPUPlace())
    lod = [[1] * BATCH, [1] * BATCH]
    pre_ids = fluid.create_lod_tensor(np.ones((BATCH, 1), "int64"), lod, fluid.CPUPlace())
    pre_scores = fluid.create_lod_tensor(np.zeros((BATCH, 1), "float32"), lod, fluid.CPUPlace())
    entries = [(pre_ids, pre_scores)]
    for _ in range(steps):
        rows = np.array(pre_ids).shape[0]
        if rows == 0:
            break
        ids = rng.randint(0, 50, (rows, BEAM)).astype("int64")  # id 0 (END) ends about one candidate in 50
        scores = np.array(pre_scores) + np.log(rng.uniform(0.05, 1, (rows, BEAM))).astype("float32")
        plod = pre_ids.recursive_sequence_lengths()
        pre_ids, pre_scores, _ = exe.run(main, feed={"pre_ids": pre_ids, "pre_scores": pre_scores,
                                                     "ids": (ids, plod), "scores": (scores, plod)},
                                         fetch_list=fetch, return_numpy=False)
        entries.append((pre_ids, pre_scores))
    decode = fluid.Program()
    with fluid.program_guard(decode, fluid.Program()):
        ids_array, scores_array = fluid.layers.create_array("int64"), fluid.layers.create_array("float32")
        feed = {}
        for t, (i, s) in enumerate(entries):
            index = fluid.layers.fill_constant([1], "int64", t)
            fluid.layers.array_write(fluid.data("ids_%d" % t, [-1, 1], "int64", lod_level=2), index, ids_array)
            fluid.layers.array_write(fluid.data("scores_%d" % t, [-1, 1], "float32", lod_level=2), index,
                                     scores_array)
            feed["ids_%d" % t], feed["scores_%d" % t] = i, s
        out = fluid.layers.beam_search_decode(ids_array, scores_array, BEAM, END)
    got = exe.run(decode, feed=feed, fetch_list=list(out), return_numpy=False)
    assert got[0].recursive_sequence_lengths()[0] == [BEAM] * BATCH
    ours = op_times(decode, feed, [], ["beam_search_decode"], runs)["beam_search_decode"]
    return "beam_search_decode, %d steps x %d sources x %d" % (len(entries), BATCH, BEAM), ours, None, ""


def bench_gather_tree(rng, runs, steps=50):
    ids = rng.randint(0, VOCAB, (steps, BATCH, BEAM)).astype("int64")
    parents = rng.randint(0, BEAM, (steps, BATCH, BEAM)).astype("int64")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = fluid.layers.gather_tree(fluid.data("ids", [steps, BATCH, BEAM], "int64"),
                                       fluid.data("parents", [steps, BATCH, BEAM], "int64"))
    feed = {"ids": ids, "parents": parents}

    def numpy_trace():  # vectorised over batch and beam, step by step back
        res = np.empty_like(ids)
        at = np.broadcast_to(np.arange(BEAM), (BATCH, BEAM))
        for t in range(steps - 1, -1, -1):
            res[t] = np.take_along_axis(ids[t], at, 1)
            at = np.take_along_axis(parents[t], at, 1)
        return res
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out])
    np.testing.assert_array_equal(got, numpy_trace())
    ours = op_times(main, feed, [out], ["gather_tree"], runs)["gather_tree"]
    return "gather_tree [%d, %d, %d]" % (steps, BATCH, BEAM), ours, wall_ms(numpy_trace, runs), "numpy, step by step"


def main():
    global BATCH, BEAM, VOCAB
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--vocab", type=int, default=10000)
    args = p.parse_args()
    BATCH, BEAM, VOCAB = args.batch, args.beam, args.vocab
    fluid.core.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    rng = np.random.RandomState(0)
    rows = [bench_beam_search(rng, args.runs, torch, False), bench_beam_search(rng, args.runs, torch, True),
            bench_beam_search_decode(rng, args.runs), bench_gather_tree(rng, args.runs)]
    print("%-48s %12s %12s  %s" % ("case (threads=%d)" % args.threads, "fluidlite ms", "reference ms", "reference"))
    for label, ours, theirs, ref in rows:
        print("%-48s %12.4f %12s  %s" % (label, ours, "-" if theirs is None else "%.4f" % theirs, ref))


BATCH, BEAM, VOCAB, END = 32, 4, 10000, 0

if __name__ == "__main__":
    main()
