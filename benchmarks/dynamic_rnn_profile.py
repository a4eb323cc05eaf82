"""Profile a DynamicRNN training step: where the time of a While loop over LoD sequences goes.

    python benchmarks/dynamic_rnn_profile.py [--batch 32] [--hidden 128] [--runs 5]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.

The model is the understand_sentiment chapter's DynamicRNN net, simplified to a tanh cell: embedding, fc, a
DynamicRNN whose step is fc([word, prev]) -> tanh, sequence_last_step, softmax, cross-entropy, Adagrad, on a
batch of BATCH sequences of 5-40 word ids. After three warm-up runs the profiler records RUNS training steps and
prints Fluid's report (sorted by total time), then the memcpy and scope summaries: the loop's iterations are
`while::step` / `while_grad::step` events, and the scope summary counts the step scopes made for them.
"""
import argparse

import numpy as np

import fluidlite as fluid


def build(hidden):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(input=words, size=[5000, 128], is_sparse=True)
        sentence = fluid.layers.fc(input=emb, size=hidden, act="tanh")
        rnn = fluid.layers.DynamicRNN()
        with rnn.block():
            word = rnn.step_input(sentence)
            prev = rnn.memory(value=0.0, shape=[hidden])
            h = fluid.layers.fc(input=[word, prev], size=hidden, act="tanh")
            rnn.update_memory(prev, h)
            rnn.output(h)
        last = fluid.layers.sequence_last_step(rnn())
        pred = fluid.layers.fc(input=last, size=2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(input=pred, label=label))
        fluid.optimizer.Adagrad(0.002).minimize(loss)
    return main, startup, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    main_prog, startup, loss = build(args.hidden)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.RandomState(0)
    lens = rng.randint(5, 41, size=args.batch).tolist()
    ids = rng.randint(0, 5000, size=(sum(lens), 1)).astype("int64")
    feed = {"words": fluid.create_lod_tensor(ids, [lens], fluid.CPUPlace()),
            "label": rng.randint(0, 2, size=(args.batch, 1)).astype("int64")}
    for _ in range(3):
        exe.run(main_prog, feed=feed, fetch_list=[loss])
    print("%d sequences of %d-%d steps (%d words), hidden %d; %d profiled training steps"
          % (args.batch, min(lens), max(lens), sum(lens), args.hidden, args.runs))
    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path=None):
        for _ in range(args.runs):
            exe.run(main_prog, feed=feed, fetch_list=[loss])


if __name__ == "__main__":
    main()
