"""Times sequence_softmax, sequence_reverse, sequence_enumerate, sequence_erase, im2sequence and row_conv (forward and
gradient ops) at model-like sizes, from fluidlite's own profiler events, beside PyTorch doing the same work on the
padded equivalent (masked softmax, index-select reversal, F.unfold, a depthwise conv1d for row_conv).

    PYTHONPATH=. python benchmarks/sequence_misc_ops.py [--runs 30] [--threads 2] [--only row_conv,im2sequence]

Each figure is the fastest of --runs calls, after warm-up (the minimum, not the median: on a shared machine the
median moves with the other processes' load); fluidlite's are the op events' durations (so the executor's own
overhead and the loss ops around them are not counted), PyTorch's the wall time of the same calls. Results are
checked against each other before timing.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite.bench import seconds_per_call

L = fluid.layers


def op_times(main, feed, fetch, names, runs):
    """The fastest call of each op type in `names`, in ms, from the profiler's events over `runs` runs."""
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=fetch)
    fluid.profiler.start_profiler("CPU")
    for _ in range(runs):
        exe.run(main, feed=feed, fetch_list=fetch)
    fluid.profiler.stop_profiler(print_report=False, profile_path="/tmp/sequence_misc_ops.trace")
    evs = fluid.profiler.events()
    return {n: min(e["dur_ns"] for e in evs if e["name"] == n) / 1e6 for n in names}


def wall_ms(fn, runs):
    """The fastest of `runs` single calls of fn after 3 warm-up calls, in ms."""
    return seconds_per_call(fn, 1, runs, 3)[1] * 1e3


def lod_program(build, shapes, lod_level=1):
    """A program: data vars of `shapes` {name: (shape, dtype)}, build(vars) -> out; with a float out, the gradients of
    sum(out * G) for every float input."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        vs = {}
        for n, (shape, dtype) in shapes.items():
            vs[n] = L.data(n, shape=shape, dtype=dtype, lod_level=lod_level if n != "img" else 0)
            vs[n].stop_gradient = dtype not in ("float32",)
        out = build(vs)
        fetch = [out]
        if out.dtype == fluid.core.VarDesc.VarType.FP32:
            g = L.data("g", shape=list(out.shape[1:]), dtype="float32", lod_level=out.lod_level)
            loss = L.reduce_sum(L.elementwise_mul(out, g))
            fetch += fluid.gradients([loss], [v for v in vs.values() if not v.stop_gradient])
    return main, startup, fetch


def padded(x, lens):
    t = max(lens)
    out = np.zeros((len(lens), t) + x.shape[1:], x.dtype)
    start = 0
    for i, n in enumerate(lens):
        out[i, :n] = x[start:start + n]
        start += n
    return out


def bench_sequence_softmax(rng, runs, torch):
    lens = list(rng.randint(5, 101, 64))
    x = rng.uniform(-3, 3, (sum(lens), 1)).astype("float32")
    main, _, fetch = lod_program(lambda v: L.sequence_softmax(v["x"]), {"x": ([1], "float32")})
    feed = {"x": (x, [lens]), "g": (np.ones_like(x), [lens])}
    ours = op_times(main, feed, fetch, ["sequence_softmax", "sequence_softmax_grad"], runs)
    theirs = None
    if torch:
        xp = torch.tensor(padded(x, lens)[:, :, 0], requires_grad=True)
        mask = torch.tensor(np.arange(max(lens))[None, :] >= np.array(lens)[:, None])

        def fwd():
            return torch.softmax(xp.masked_fill(mask, float("-inf")), dim=1)
        y = fwd()
        theirs = (wall_ms(fwd, runs), wall_ms(lambda: torch.autograd.grad(fwd().sum(), xp), runs))
        got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch[:1])[0]
        np.testing.assert_allclose(got[:, 0], y.detach().numpy()[~mask.numpy()], rtol=1e-5, atol=1e-7)
    return "sequence_softmax [%d, 1], 64 seqs 5-100" % sum(lens), ours, theirs


def bench_sequence_reverse(rng, runs, torch):
    lens = list(rng.randint(5, 101, 64))
    x = rng.uniform(-1, 1, (sum(lens), 256)).astype("float32")
    main, _, fetch = lod_program(lambda v: L.sequence_reverse(v["x"]), {"x": ([256], "float32")})
    feed = {"x": (x, [lens]), "g": (np.ones_like(x), [lens])}
    ours = op_times(main, feed, fetch, ["sequence_reverse"], runs)
    theirs = None
    if torch:
        idx, start = [], 0
        for n in lens:
            idx += range(start + n - 1, start - 1, -1)
            start += n
        xt, it = torch.tensor(x), torch.tensor(idx)
        theirs = (wall_ms(lambda: torch.index_select(xt, 0, it), runs), None)
        got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch[:1])[0]
        np.testing.assert_array_equal(got, x[idx])
    return "sequence_reverse [%d, 256] (its grad is the same op)" % sum(lens), ours, theirs


def bench_sequence_enumerate(rng, runs, torch):
    lens = list(rng.randint(5, 101, 64))
    x = rng.randint(0, 10000, (sum(lens), 1)).astype("int64")
    main, _, fetch = lod_program(lambda v: L.sequence_enumerate(v["x"], win_size=3), {"x": ([1], "int64")})
    return "sequence_enumerate [%d, 1] win 3" % sum(lens), op_times(main, {"x": (x, [lens])}, fetch,
                                                                    ["sequence_enumerate"], runs), None


def bench_sequence_erase(rng, runs, torch):
    lens = list(rng.randint(5, 101, 64))
    x = rng.randint(0, 100, (sum(lens), 1)).astype("int64")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = L.data("x", shape=[1], dtype="int64", lod_level=1)
        out = main.global_block().create_var(name="out", dtype="int64")
        main.global_block().append_op(type="sequence_erase", inputs={"X": [xv]}, outputs={"Out": [out]},
                                      attrs={"tokens": [0, 1, 2, 3, 4]})
    return "sequence_erase [%d, 1], 5 tokens" % sum(lens), op_times(main, {"x": (x, [lens])}, [out],
                                                                    ["sequence_erase"], runs), None


def bench_im2sequence(rng, runs, torch):
    # OCR-style: conv features [32, 64, 8, 32] scanned by a full-height 8x1 window -> 32 steps of 512 per image.
    x = rng.uniform(-1, 1, (32, 64, 8, 32)).astype("float32")
    main, _, fetch = lod_program(lambda v: L.im2sequence(v["img"], filter_size=[8, 1]),
                                 {"img": ([64, 8, 32], "float32")})
    feed = {"img": x, "g": (np.ones((32 * 32, 512), "float32"), [[32] * 32])}
    ours = op_times(main, feed, fetch, ["im2sequence", "im2sequence_grad"], runs)
    theirs = None
    if torch:
        F = torch.nn.functional
        xt = torch.tensor(x, requires_grad=True)

        def fwd():
            return F.unfold(xt, (8, 1)).transpose(1, 2).reshape(-1, 512)
        y = fwd()
        theirs = (wall_ms(fwd, runs), wall_ms(lambda: torch.autograd.grad(fwd().sum(), xt), runs))
        got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch[:1])[0]
        np.testing.assert_array_equal(got, y.detach().numpy())
    return "im2sequence [32, 64, 8, 32], kernel 8x1", ours, theirs


def bench_row_conv(rng, runs, torch):
    # DeepSpeech2-style: 32 utterances of 50-200 frames, 512 features, future context 2.
    lens = list(rng.randint(50, 201, 32))
    d, k = 512, 3
    x = rng.uniform(-1, 1, (sum(lens), d)).astype("float32")
    main, startup, fetch = lod_program(lambda v: L.row_conv(v["x"], future_context_size=k - 1),
                                       {"x": ([d], "float32")})
    feed = {"x": (x, [lens]), "g": (np.ones_like(x), [lens])}
    fluid.Executor(fluid.CPUPlace()).run(startup)
    ours = op_times(main, feed, fetch, ["row_conv", "row_conv_grad"], runs)
    theirs = None
    if torch:
        F = torch.nn.functional
        w = np.array(fluid.global_scope().find_var("row_conv_0.w_0").get_tensor())
        xp = torch.tensor(padded(x, lens).transpose(0, 2, 1).copy(), requires_grad=True)  # [B, D, T]
        wt = torch.tensor(w.T[:, None, :].copy(), requires_grad=True)  # [D, 1, K]: a depthwise correlation

        def fwd():
            return F.conv1d(F.pad(xp, (0, k - 1)), wt, groups=d)
        theirs = (wall_ms(fwd, runs), wall_ms(lambda: torch.autograd.grad(fwd().sum(), (xp, wt)), runs))
        got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch[:1])[0]
        y = fwd().detach().numpy().transpose(0, 2, 1)
        np.testing.assert_allclose(got, np.concatenate([y[i, :n] for i, n in enumerate(lens)]), rtol=1e-5, atol=1e-5)
    return "row_conv [%d, %d], 32 seqs 50-200, K %d (torch: padded [32, %d, %d])" % (sum(lens), d, k, d, max(lens)), \
        ours, theirs


BENCHES = {"sequence_softmax": bench_sequence_softmax, "sequence_reverse": bench_sequence_reverse,
           "sequence_enumerate": bench_sequence_enumerate, "sequence_erase": bench_sequence_erase,
           "im2sequence": bench_im2sequence, "row_conv": bench_row_conv}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(BENCHES), help="comma-separated ops")
    args = ap.parse_args()
    fluid.core.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    print("%-62s %22s %22s" % ("op (ms, fastest of %d)" % args.runs, "fluidlite fwd / grad", "torch fwd / fwd+bwd"))
    for name in args.only.split(","):
        what, ours, theirs = BENCHES[name](np.random.RandomState(0), args.runs, torch)
        vals = list(ours.values())
        mine = " / ".join("%.3f" % v for v in vals)
        ref = "-" if not theirs else " / ".join("-" if v is None else "%.3f" % v for v in theirs)
        print("%-62s %22s %22s" % (what, mine, ref))


if __name__ == "__main__":
    main()
