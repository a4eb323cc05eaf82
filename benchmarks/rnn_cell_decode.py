"""The RNN cell API and its decoders (fluidlite/layers/rnn.py, docs/control_flow.md), timed interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/rnn_cell_decode.py \\
        [--batch 32 --steps 30 --hidden 256 --vocab 1000 --beam 4 --threads 2 --profile CASE]

    rnn train step       layers.rnn(GRUCell(hidden)) over [batch, steps, hidden] with sequence_length, SGD step
    StaticRNN by hand    the same GRU written on StaticRNN with two fc layers (no mask), SGD step
    beam decode          dynamic_decode(BeamSearchDecoder(GRUCell, beam, embedding + output fc over vocab)),
                         max_step_num = steps - 1; an output bias keeps end_token away, so every run takes all steps
    beam decode, Fluid's mask   the same with BeamSearchDecoder._mask_probs as Fluid builds it (expand to
                         [batch, beam, vocab] before the multiply) instead of broadcasting
    beam decode is_test  is_test=True: inputs and states overwritten, no tensor arrays kept for a backward pass
    greedy decode (is_test)   BasicDecoder + GreedyEmbeddingHelper, same sizes

--profile CASE prints fluidlite's profiler report of --runs calls of that case.
"""
import argparse
import os
import sys

import numpy as np

import fluidlite as fluid
from fluidlite import profiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gru import interleaved  # noqa: E402

L = fluid.layers


def _executor(main, startup):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return exe, scope


def rnn_step(args, by_hand=False):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, args.steps, args.hidden], dtype="float32")
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        if by_hand:
            time_major = L.transpose(x, [1, 0, 2])
            srnn = L.StaticRNN()
            with srnn.step():
                x_t = srnn.step_input(time_major)
                h = srnn.memory(shape=[-1, args.hidden], batch_ref=x_t)
                r, u = L.split(L.fc([x_t, h], 2 * args.hidden, act="sigmoid"), 2, dim=1)
                c = L.fc([x_t, r * h], args.hidden, act="tanh")
                new_h = u * h + (1 - u) * c
                srnn.update_memory(h, new_h)
                srnn.step_output(new_h)
            out = L.transpose(srnn(), [1, 0, 2])
        else:
            out, _ = L.rnn(L.GRUCell(args.hidden), x, sequence_length=lengths)
        loss = L.mean(out)
        fluid.optimizer.SGD(0.01).minimize(loss)
    exe, scope = _executor(main, startup)
    rng = np.random.RandomState(0)
    feed = {"x": rng.rand(args.batch, args.steps, args.hidden).astype("float32"),
            "lengths": rng.randint(args.steps // 5, args.steps + 1, args.batch).astype("int64")}
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def _fluid_mask_probs(self, probs, finished):
    """BeamSearchDecoder._mask_probs as Fluid 1.8 builds it."""
    finished = L.cast(finished, dtype=probs.dtype)
    return L.elementwise_sub(
        L.elementwise_mul(L.expand(L.unsqueeze(finished, [2]), [1, 1, self.vocab_size]), self.noend_mask_tensor,
                          axis=-1),
        L.elementwise_mul(probs, (finished - 1), axis=0))


def decode(args, beam=True, is_test=False, fluid_mask=False):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h0 = fluid.data("h0", shape=[None, args.hidden], dtype="float32")
        cell = L.GRUCell(args.hidden)
        emb = lambda ids: fluid.embedding(ids, size=[args.vocab, args.hidden], param_attr=fluid.ParamAttr(name="emb"))
        out_fn = lambda x: L.fc(x, size=args.vocab, num_flatten_dims=len(x.shape) - 1,
                                bias_attr=fluid.ParamAttr(name="out_b"))
        if beam:
            dec = L.BeamSearchDecoder(cell, 0, 1, args.beam, embedding_fn=emb, output_fn=out_fn)
            if fluid_mask:
                dec._mask_probs = _fluid_mask_probs.__get__(dec)
            outs, _ = L.dynamic_decode(dec, inits=h0, max_step_num=args.steps - 1, is_test=is_test)
            fetch = outs
        else:
            start = L.fill_constant_batch_size_like(h0, [-1], "int64", 0)
            dec = L.BasicDecoder(cell, L.GreedyEmbeddingHelper(emb, start, 1), output_fn=out_fn)
            outs, _ = L.dynamic_decode(dec, inits=h0, max_step_num=args.steps - 1, is_test=is_test)
            fetch = outs.sample_ids
    exe, scope = _executor(main, startup)
    bias = scope.find_var("out_b").get_tensor()
    b = np.array(bias)
    b[1] = -1e4  # end_token (1) never wins: every run decodes all steps
    bias.set(b, fluid.CPUPlace())
    feed = {"h0": np.random.RandomState(0).uniform(-1, 1, (args.batch, args.hidden)).astype("float32")}
    got = exe.run(main, feed=feed, fetch_list=[fetch], scope=scope)[0]
    assert got.shape[1] == args.steps, got.shape
    return lambda: exe.run(main, feed=feed, fetch_list=[fetch], scope=scope)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile", metavar="CASE", help="print the profiler report of one case (its name)")
    args = ap.parse_args()
    fluid.core.set_num_threads(args.threads)
    cases = {
        "rnn train step": rnn_step(args),
        "StaticRNN by hand": rnn_step(args, by_hand=True),
        "beam decode": decode(args),
        "beam decode, Fluid's mask": decode(args, fluid_mask=True),
        "beam decode is_test": decode(args, is_test=True),
        "greedy decode": decode(args, beam=False),
        "greedy decode is_test": decode(args, beam=False, is_test=True),
    }
    if args.profile and args.profile not in cases:
        ap.error("--profile: no case %r (cases: %s)" % (args.profile, ", ".join(cases)))
    print("batch %d, %d steps, hidden %d, vocab %d, beam %d, float32, %d thread(s)"
          % (args.batch, args.steps, args.hidden, args.vocab, args.beam, args.threads))
    for name, (med, lo, hi) in interleaved(cases, args.runs, args.repeat, args.warmup).items():
        print("%-26s %8.2f ms  (min %.2f, max %.2f)  %.3f ms per step" % (name, med, lo, hi, med / args.steps))
    if args.profile:
        with profiler.profiler("CPU", sorted_key="total"):
            for _ in range(args.runs):
                cases[args.profile]()


if __name__ == "__main__":
    main()
