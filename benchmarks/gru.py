"""dynamic_gru on a LoD batch against PyTorch's packed nn.GRU, same data, same process, interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/gru.py \\
        [--batch 64 --min_len 5 --max_len 100 --input 128 --hidden 128 --threads 2 --profile]

One training step each (forward, backward, SGD) of: a LoD batch of `batch` sequences with lengths drawn from
[min_len, max_len] (seed 0), input width `input`, a projection to the gates and one GRU layer of `hidden` units,
loss = mean of every hidden state.

    fluidlite:      fc(x, 3 * hidden) -> layers.dynamic_gru(hidden)            (x: one LoDTensor, no padding)
    torch packed:   nn.GRU(input, hidden) on pack_padded_sequence(x, lengths)  (packed once, outside the timing)
    torch padded:   nn.GRU(input, hidden) on the zero-padded [max_len, batch, input] x, the loss masked to the
                    real steps (the same loss as packed: padding follows each sequence's last step)

PyTorch's CPU backward of a packed GRU spends most of its time in slice_backward's fill_ (each step's slice of
the packed output gets a zero tensor of the whole output, torch.profiler: 88% of the step); the padded form avoids
that but runs every sequence to max_len, its time in the per-step mm / addmm.

The two cells differ in where the reset gate applies (Fluid: (r * h) @ W_c; PyTorch: r * (h @ W_hn + b_hn)) but
do the same GEMM work (3 hidden x hidden per step per sequence, one input projection for all steps), so only the
times are compared. --forward also times the forward pass alone; --profile prints fluidlite's profiler report of
the timed steps (the gru and gru_grad ops and their neighbours).
"""
import argparse
import statistics

import numpy as np

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench import seconds_per_call


def make_data(args):
    rng = np.random.RandomState(0)
    lens = rng.randint(args.min_len, args.max_len + 1, size=args.batch).tolist()
    x = rng.uniform(-1, 1, (sum(lens), args.input)).astype("float32")
    return lens, x


def fluidlite_step(args, lens, x, train=True):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        data = fluid.layers.data("x", shape=[args.input], dtype="float32", lod_level=1)
        gates = fluid.layers.fc(data, size=3 * args.hidden)
        hidden = fluid.layers.dynamic_gru(gates, args.hidden)
        loss = fluid.layers.mean(hidden)
        if train:
            fluid.optimizer.SGD(1e-3).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": fluid.create_lod_tensor(x, [lens], fluid.CPUPlace())}

    def step():
        return exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]
    return step


def torch_step(args, lens, x, train=True, packed=True):
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence

    torch.manual_seed(1)
    gru = torch.nn.GRU(args.input, args.hidden)
    opt = torch.optim.SGD(gru.parameters(), lr=1e-3)
    padded = torch.zeros(max(lens), len(lens), args.input)
    mask = torch.zeros(max(lens), len(lens), 1)
    offset = 0
    for s, n in enumerate(lens):
        padded[:n, s] = torch.from_numpy(x[offset:offset + n])
        mask[:n, s] = 1.0
        offset += n
    data = pack_padded_sequence(padded, torch.tensor(lens), enforce_sorted=False) if packed else padded
    count = float(sum(lens) * args.hidden)

    def loss_of(out):
        return out.data.mean() if packed else (out * mask).sum() / count

    def step():
        if not train:
            with torch.no_grad():
                return loss_of(gru(data)[0]).item()
        opt.zero_grad()
        loss = loss_of(gru(data)[0])
        loss.backward()
        opt.step()
        return loss.item()
    return step


def interleaved(cases, runs, repeat, warmup):
    """{name: (median, min, max) ms per call} over `repeat` rounds, each timing `runs` calls of every case in turn
    (so load changes on the machine hit every case alike)."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            samples[name].append(seconds_per_call(fn, runs, 1, 0)[0] * 1e3)
    return {name: (statistics.median(s), min(s), max(s)) for name, s in samples.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--min_len", type=int, default=5)
    ap.add_argument("--max_len", type=int, default=100)
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="fluidlite's pool and torch's intra-op threads")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--forward", action="store_true", help="also time the forward pass alone")
    ap.add_argument("--no_torch", action="store_true")
    ap.add_argument("--profile", action="store_true", help="print fluidlite's profiler report of --runs steps")
    args = ap.parse_args()
    fluid.core.set_num_threads(args.threads)
    lens, x = make_data(args)
    cases = {"fluidlite train step": fluidlite_step(args, lens, x)}
    if args.forward:
        cases["fluidlite forward"] = fluidlite_step(args, lens, x, train=False)
    if not args.no_torch:
        import torch
        torch.set_num_threads(args.threads)
        for form in ("packed", "padded"):
            cases["torch %s train step" % form] = torch_step(args, lens, x, packed=form == "packed")
            if args.forward:
                cases["torch %s forward" % form] = torch_step(args, lens, x, train=False, packed=form == "packed")
        # Both forms compute the same loss from the same weights: a check that the padded one is masked right.
        first = {form: torch_step(args, lens, x, train=False, packed=form == "packed")() for form in ("packed",
                                                                                                   "padded")}
        assert abs(first["packed"] - first["padded"]) <= 1e-5 * max(1.0, abs(first["packed"])), first
    print("GRU over %d sequences of %d-%d steps (T = %d rows), input %d, hidden %d, float32, %d thread(s)"
          % (args.batch, min(lens), max(lens), sum(lens), args.input, args.hidden, args.threads))
    times = interleaved(cases, args.runs, args.repeat, args.warmup)
    for name, (med, lo, hi) in times.items():
        print("  %-27s %8.2f ms  (min %.2f, max %.2f; median of %d x %d)" % (name, med, lo, hi, args.repeat,
                                                                          args.runs))
    for kind in ("train step", "forward"):
        for form in ("packed", "padded"):
            ours, theirs = times.get("fluidlite " + kind), times.get("torch %s %s" % (form, kind))
            if ours and theirs:
                print("  %-27s %8.2fx  (median torch ms / fluidlite ms; %.2fx of the minima)"
                      % ("vs torch %s, %s" % (form, kind), theirs[0] / ours[0], theirs[1] / ours[1]))
    if args.profile:
        step = cases["fluidlite train step"]
        with profiler.profiler("CPU", sorted_key="total", profile_path=None):
            for _ in range(args.runs):
                step()


if __name__ == "__main__":
    main()
