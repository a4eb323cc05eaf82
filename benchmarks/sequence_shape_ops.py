"""Kernel times of the sequence ops that move rows (sequence_expand, _expand_as, _concat, _reshape, _slice, _pad,
_unpad, _mask), forward and backward, on a text batch: 64 sequences of 5-100 steps (the text_lstm bench's
lengths), 128 float32 values a step.

    PYTHONPATH=. python benchmarks/sequence_shape_ops.py [--threads 2] [--iterations 50] [--width 128]

Each op runs in its own small training program (op, then mean, then the gradient back to the op's input); the
times are fluidlite's profiler events of the op and of its grad op over --iterations runs after warm-up: median
and minimum (the minimum is the steadier figure on a shared machine). Next to them: GB/s of the forward op (bytes
read + written, at the median), and the same work done per sequence in numpy and, when installed, PyTorch
(pad_sequence, repeat_interleave, torch.cat), medians, for scale."""
import argparse
import time

import numpy as np

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench import machine_info

BATCH = 64


def batch_lengths(rng):
    return rng.randint(5, 101, size=BATCH).tolist()


def build(name, width, lens, rng):
    """(main program, feed, forward op type, bytes the forward op reads + writes, numpy function doing the same)."""
    rows = sum(lens)
    x_lod = rng.uniform(-1, 1, (rows, width)).astype("float32")
    x_rows = rng.uniform(-1, 1, (BATCH, width)).astype("float32")
    off = np.concatenate([[0], np.cumsum(lens)])
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        seq = fluid.layers.data("seq", shape=[width], dtype="float32", lod_level=1)
        seq.stop_gradient = False
        row = fluid.layers.data("row", shape=[width], dtype="float32")
        row.stop_gradient = False
        feed = {"seq": (x_lod, [lens])}
        if name == "sequence_expand":
            out = fluid.layers.sequence_expand(row, seq)
            feed = {"row": x_rows, "seq": (x_lod, [lens])}
            moved = 4 * width * (BATCH + rows)
            ref = lambda: np.concatenate([np.repeat(x_rows[i:i + 1], n, 0) for i, n in enumerate(lens)])
        elif name == "sequence_expand_as":
            out = fluid.layers.sequence_expand_as(row, seq)
            feed = {"row": x_rows, "seq": (x_lod, [lens])}
            moved = 4 * width * (BATCH + rows)
            ref = lambda: np.repeat(x_rows, lens, axis=0)
        elif name == "sequence_concat":
            other = fluid.layers.data("other", shape=[width], dtype="float32", lod_level=1)
            other.stop_gradient = False
            out = fluid.layers.sequence_concat([seq, other])
            feed["other"] = (x_lod, [lens])
            moved = 4 * width * rows * 4
            ref = lambda: np.concatenate([p for i in range(BATCH) for p in (x_lod[off[i]:off[i + 1]],) * 2])
        elif name == "sequence_reshape":
            out = fluid.layers.sequence_reshape(seq, new_dim=width // 2)
            moved = 0  # a view
            ref = lambda: [x_lod[off[i]:off[i + 1]].reshape(-1, width // 2) for i in range(BATCH)]
        elif name == "sequence_slice":
            half = [n // 2 for n in lens]
            o = fluid.layers.assign(np.array(half, "int64").reshape(-1, 1))
            n = fluid.layers.assign(np.array(half, "int64").reshape(-1, 1))
            out = fluid.layers.sequence_slice(seq, o, n)
            moved = 4 * width * sum(half) * 2
            ref = lambda: np.concatenate([x_lod[off[i] + h:off[i] + 2 * h] for i, h in enumerate(half)])
        elif name in ("sequence_pad", "sequence_unpad"):
            pad = fluid.layers.assign(np.zeros(1, "float32"))
            out, length = fluid.layers.sequence_pad(seq, pad)
            moved = 4 * width * (rows + BATCH * max(lens))
            if name == "sequence_unpad":
                out = fluid.layers.sequence_unpad(out, length)

            def ref():
                padded = np.zeros((BATCH, max(lens), width), "float32")
                for i, n in enumerate(lens):
                    padded[i, :n] = x_lod[off[i]:off[i + 1]]
                if name == "sequence_pad":
                    return padded
                return np.concatenate([padded[i, :n] for i, n in enumerate(lens)])
        elif name == "sequence_mask":
            n = fluid.layers.assign(np.array(lens, "int64"))
            out = fluid.layers.sequence_mask(n, dtype="float32")
            moved = 8 * BATCH + 4 * BATCH * max(lens)
            ref = lambda: (np.arange(max(lens))[None, :] < np.array(lens)[:, None]).astype("float32")
        if name != "sequence_mask":
            loss = fluid.layers.mean(out)
            fluid.backward.append_backward(loss)
        else:
            loss = fluid.layers.mean(out)
    return main, startup, feed, loss, moved, ref


def torch_ref(name, width, lens, rng):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(fluid.core.get_num_threads())
    rows = sum(lens)
    x = torch.from_numpy(rng.uniform(-1, 1, (rows, width)).astype("float32"))
    r = torch.from_numpy(rng.uniform(-1, 1, (BATCH, width)).astype("float32"))
    ln = torch.tensor(lens)
    pieces = list(torch.split(x, lens))
    if name in ("sequence_expand", "sequence_expand_as"):
        return lambda: torch.repeat_interleave(r, ln, dim=0)
    if name == "sequence_concat":
        return lambda: torch.cat([p for q in pieces for p in (q, q)])
    if name == "sequence_pad":
        return lambda: torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True)
    if name == "sequence_unpad":
        padded = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True)
        return lambda: torch.cat([padded[i, :n] for i, n in enumerate(lens)])
    if name == "sequence_mask":
        return lambda: (torch.arange(max(lens))[None, :] < ln[:, None]).float()
    return None


def per_call_us(fn, iterations):
    """Median microseconds of one fn() call over `iterations` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return float(np.median(times))


def _median_min(us):
    return (float(np.median(us)), float(np.min(us))) if us else (float("nan"), float("nan"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--width", type=int, default=128)
    a = p.parse_args()
    if a.threads:
        fluid.core.set_num_threads(a.threads)
    info = machine_info()
    print("fluidlite on %s, %d threads; %d sequences of 5-100 steps x %d float32" % (
        info["cpu_model"], fluid.core.get_num_threads(), BATCH, a.width))
    print("%-20s %7s %7s %7s %7s %8s %10s %10s" % ("op", "fwd us", "(min)", "bwd us", "(min)", "GB/s", "numpy us",
                                                  "torch us"))
    names = ["sequence_expand", "sequence_expand_as", "sequence_concat", "sequence_reshape", "sequence_slice",
             "sequence_pad", "sequence_unpad", "sequence_mask"]
    for name in names:
        rng = np.random.RandomState(0)
        lens = batch_lengths(rng)
        prog, startup, feed, loss, moved, ref = build(name, a.width, lens, rng)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for _ in range(5):
            exe.run(prog, feed=feed, fetch_list=[loss])
        with profiler.profiler("CPU", profile_path=None, print_report=False):
            for _ in range(a.iterations):
                exe.run(prog, feed=feed, fetch_list=[loss])
        durations = {}
        for e in profiler.events():
            durations.setdefault(e["name"], []).append(e["dur_ns"] / 1e3)
        fwd, fwd_min = _median_min(durations.get(name))
        bwd, bwd_min = _median_min(durations.get(name + "_grad"))
        gbs = moved / (fwd * 1e-6) / 1e9 if moved else float("nan")
        tref = torch_ref(name, a.width, lens, np.random.RandomState(1))
        print("%-20s %7.1f %7.1f %7.1f %7.1f %8.2f %10.1f %10s" % (
            name, fwd, fwd_min, bwd, bwd_min, gbs, per_call_us(ref, a.iterations),
            "%.1f" % per_call_us(tref, a.iterations) if tref else "-"))


if __name__ == "__main__":
    main()
