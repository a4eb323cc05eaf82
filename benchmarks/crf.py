"""The CRF ops at label_semantic_roles' sizes: linear_chain_crf forward + backward (the loss and its gradients for
the emissions and the transitions), crf_decoding and chunk_eval, on a LoD batch of random sentences, against the
same computations in PyTorch (the usual batched CRF: a padded [N, L, D] batch with a mask, logsumexp per time step,
autograd for the backward; Viterbi by max per time step), checked to agree first, timed interleaved.

    PYTHONPATH=. python benchmarks/crf.py [--batch 10] [--tags 59] [--min_len 5] [--max_len 60] [--threads 1]
                                          [--repeat 7] [--runs 20] [--profile]

--profile prints fluidlite's profiler report of the fluidlite runs (per-op times). Figures are the median over
--repeat repetitions of the mean of --runs calls, in ms per batch.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite.bench._measure import seconds_per_call

L = fluid.layers


def batch(rng, n, tags, min_len, max_len):
    lens = rng.randint(min_len, max_len + 1, n).tolist()
    x = rng.uniform(-2, 2, (sum(lens), tags)).astype("float32")
    y = rng.randint(0, tags, (sum(lens), 1)).astype("int64")
    w = rng.uniform(-0.5, 0.5, (tags + 2, tags)).astype("float32")
    return lens, x, y, w


def fluidlite_runs(lens, x, y, w):
    """(train(), decode()): the loss with its two gradients, and decoding + chunk_eval, each one exe.run."""
    tags = x.shape[1]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xv = fluid.data("x", [-1, tags], "float32", lod_level=1)
        xv.stop_gradient = False
        yv = fluid.data("y", [-1, 1], "int64", lod_level=1)
        cost = L.linear_chain_crf(xv, yv, param_attr=fluid.ParamAttr(
            name="crfw", initializer=fluid.initializer.NumpyArrayInitializer(w)))
        loss = L.reduce_sum(cost)
        dx, dw = fluid.gradients([loss], [xv, main.global_block().var("crfw")])
    decode_prog = fluid.Program()
    with fluid.program_guard(decode_prog, startup), fluid.unique_name.guard():
        xv = fluid.data("x", [-1, tags], "float32", lod_level=1)
        yv = fluid.data("y", [-1, 1], "int64", lod_level=1)
        decode_prog.global_block().create_parameter(name="crfw", shape=[tags + 2, tags], dtype="float32")
        path = L.crf_decoding(xv, param_attr=fluid.ParamAttr(name="crfw"))
        f1 = L.chunk_eval(path, yv, chunk_scheme="IOB", num_chunk_types=(tags - 1) // 2)[2]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"x": (x, [lens]), "y": (y, [lens])}
    return (lambda: exe.run(main, feed=feed, fetch_list=[loss, dx, dw]),
            lambda: exe.run(decode_prog, feed=feed, fetch_list=[path, f1]))


def torch_runs(lens, x, y, w):
    import torch
    n, tags, max_len = len(lens), x.shape[1], max(lens)
    xp = np.zeros((n, max_len, tags), "float32")
    yp = np.zeros((n, max_len), "int64")
    mask = np.zeros((n, max_len), bool)
    start = 0
    for i, m in enumerate(lens):
        xp[i, :m], yp[i, :m], mask[i, :m] = x[start:start + m], y[start:start + m, 0], True
        start += m
    xt = torch.tensor(xp, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    yt, mt = torch.tensor(yp), torch.tensor(mask)
    lt = torch.tensor(lens) - 1
    rows = torch.arange(n)

    def nll():
        start, end, trans = wt[0], wt[1], wt[2:]
        alpha = start + xt[:, 0]
        score = start[yt[:, 0]] + xt[rows, 0, yt[:, 0]]
        for k in range(1, max_len):
            nxt = torch.logsumexp(alpha[:, :, None] + trans, dim=1) + xt[:, k]
            alpha = torch.where(mt[:, k, None], nxt, alpha)
            step = xt[rows, k, yt[:, k]] + trans[yt[:, k - 1], yt[:, k]]
            score = score + torch.where(mt[:, k], step, torch.zeros_like(step))
        score = score + end[yt[rows, lt]]
        return (torch.logsumexp(alpha + end, dim=1) - score).sum()

    def train():
        xt.grad = wt.grad = None
        loss = nll()
        loss.backward()
        return loss.item(), xt.grad, wt.grad

    def decode():
        with torch.no_grad():
            start, end, trans = wt[0], wt[1], wt[2:]
            score = start + xt[:, 0]
            back = []
            for k in range(1, max_len):
                best, arg = (score[:, :, None] + trans).max(dim=1)
                back.append(arg)
                score = torch.where(mt[:, k, None], best + xt[:, k], score)
            # the backtrack of each sequence from its own last position
            tag = (score + end).argmax(dim=1)
            out = torch.zeros((n, max_len), dtype=torch.int64)
            for k in range(max_len - 1, -1, -1):
                alive = lt >= k
                out[:, k] = torch.where(alive, tag, out[:, k])
                if k > 0:
                    prev = back[k - 1][rows, tag]
                    tag = torch.where(lt >= k, prev, tag)
            return out[mt]

    return train, decode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--tags", type=int, default=59)
    parser.add_argument("--min_len", type=int, default=5)
    parser.add_argument("--max_len", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    fluid.core.set_num_threads(args.threads)
    lens, x, y, w = batch(np.random.RandomState(args.seed), args.batch, args.tags, args.min_len, args.max_len)
    fl_train, fl_decode = fluidlite_runs(lens, x, y, w)
    runs = {"fluidlite": (fl_train, fl_decode)}
    try:
        import torch
        torch.set_num_threads(args.threads)
        runs["torch"] = torch_runs(lens, x, y, w)
    except ImportError:
        print("torch is not installed: fluidlite alone")
    ours = fl_train()
    if "torch" in runs:
        loss, gx, gw = runs["torch"][0]()
        np.testing.assert_allclose(float(ours[0].reshape(-1)[0]), loss, rtol=1e-4)
        np.testing.assert_allclose(ours[1], gx.numpy()[np.array([[i < m for i in range(max(lens))] for m in lens])],
                                   atol=1e-4)
        np.testing.assert_allclose(ours[2], gw.numpy(), atol=2e-4)
        np.testing.assert_array_equal(fl_decode()[0][:, 0], runs["torch"][1]().numpy())
        print("agree: loss %.4f, Emission@GRAD, Transition@GRAD, Viterbi paths" % loss)
    print("batch of %d sequences (%d rows, lengths %d-%d), %d tags, %d thread(s)"
          % (len(lens), sum(lens), min(lens), max(lens), args.tags, args.threads))
    times = {name: {} for name in runs}
    for _ in range(args.repeat):  # interleaved: a load spike hits both alike
        for name, (train, decode) in runs.items():
            for what, fn in (("train", train), ("decode", decode)):
                t = seconds_per_call(fn, args.runs, 1, 2)[0]
                times[name].setdefault(what, []).append(t)
    for what in ("train", "decode"):
        line = "%-7s" % what
        for name in runs:
            line += "  %s %.3f ms" % (name, 1e3 * np.median(times[name][what]))
        if "torch" in runs:
            line += "  (%.1fx)" % (np.median(times["torch"][what]) / np.median(times["fluidlite"][what]))
        print(line)
    if args.profile:
        with fluid.profiler.profiler("CPU", sorted_key="total"):
            for _ in range(args.runs):
                fl_train()
                fl_decode()


if __name__ == "__main__":
    main()
