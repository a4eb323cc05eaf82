"""sequence_conv on the text_cnn batch: fluidlite's op (LoD rows only) vs torch's Conv1d on the padded batch.

    python benchmarks/sequence_conv.py [--batch 64] [--repeat 7] [--runs 5] [--threads N]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.
For OpenBLAS's own kernel choice on this machine, run under `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`.

The batch is fluidlite.bench's text_cnn one: --batch sequences with lengths drawn from 5-100 (seeded), 128 channels
in and out, windows of 3 and 4 rows (contextStart -(k // 2), zero padding). fluidlite runs 1-op programs of
sequence_conv and sequence_conv_grad (X@GRAD and Filter@GRAD) over tensors already in the scope; torch runs
F.conv1d on [batch, 128, longest] (padded as the text_cnn reference pads: k // 2 before, k - 1 - k // 2 after) and
aten.convolution_backward (dx, dW). Results are checked against each other before timing. Times are ms per call,
median of --repeat repetitions of --runs calls; GFLOP/s counts each framework's own work (fluidlite: the rows of
the sequences; torch: every padded position), "useful" the sequences' rows for both.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench import machine_info, seconds_per_call
from fluidlite.bench.models import text_batch, text_cnn

CHANNELS = 128
WINDOWS = (3, 4)


def fluidlite_runners(x, lens, w, dout, k):
    """(forward, backward) 1-op programs over persistable tensors, and their first results."""
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.Scope()
    attrs = {"contextStart": -(k // 2), "contextLength": k}
    progs = []
    for grad in (False, True):
        prog = fluid.Program()
        block = prog.global_block()
        names = {"X": ("sx", x), "Filter": ("sw", w)}
        if grad:
            names["Out@GRAD"] = ("sdout", dout)
        ins = {slot: block.create_var(name=n, shape=list(a.shape), dtype="float32", persistable=True, lod_level=1)
               for slot, (n, a) in names.items()}
        if grad:
            outs = {"X@GRAD": block.create_var(name="sdx", dtype="float32"),
                    "Filter@GRAD": block.create_var(name="sdw", dtype="float32")}
        else:
            outs = {"Out": block.create_var(name="sout", dtype="float32")}
        block.append_op(type="sequence_conv_grad" if grad else "sequence_conv",
                        inputs={s: [v] for s, v in ins.items()}, outputs={s: [v] for s, v in outs.items()},
                        attrs=attrs)
        progs.append((prog, list(outs.values())))
    for n, a in (("sx", x), ("sw", w), ("sdout", dout)):
        t = scope.var(n).get_tensor()
        t.set(a, place)
        if n == "sx":
            t.set_recursive_sequence_lengths([lens])
    results = [exe.run(p, fetch_list=f, scope=scope) for p, f in progs]
    return [lambda p=p: exe.run(p, scope=scope) for p, _ in progs], results


def padded(rows, lens):
    """[batch, channels, longest]: each sequence's rows, zeros after them."""
    out = np.zeros((len(lens), rows.shape[1], max(lens)), rows.dtype)
    begin = 0
    for i, n in enumerate(lens):
        out[i, :, :n] = rows[begin:begin + n].T
        begin += n
    return out


def unpadded(batch, lens):
    return np.concatenate([batch[i, :, :n].T for i, n in enumerate(lens)])


def torch_runners(torch, x, lens, w, dout, k):
    F = torch.nn.functional
    tx = torch.from_numpy(F.pad(torch.from_numpy(padded(x, lens)), (k // 2, k - 1 - k // 2)).numpy())
    tw = torch.from_numpy(np.ascontiguousarray(w.reshape(k, x.shape[1], -1).transpose(2, 1, 0)))
    tdout = torch.from_numpy(padded(dout, lens))

    def fwd():
        with torch.no_grad():
            return F.conv1d(tx, tw)

    def bwd():
        return torch.ops.aten.convolution_backward(tdout, tx, tw, None, [1], [0], [1], False, [0], 1,
                                                   [True, True, False])
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=text_cnn.DEFAULTS["batch_size"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no_torch", action="store_true")
    args = ap.parse_args()
    if args.threads:
        core.set_num_threads(args.threads)
    torch = None
    if not args.no_torch:
        try:
            import torch
            if args.threads:
                torch.set_num_threads(args.threads)
        except ImportError:
            print("torch: not installed, fluidlite only")
    _, lens, _ = text_batch(args.batch, args.seed, text_cnn.VOCAB, text_cnn.NUM_CLASSES, text_cnn.MIN_LEN,
                            text_cnn.MAX_LEN)
    rows, longest = sum(lens), max(lens)
    m = machine_info()
    print("machine: %s, %d cores, fluidlite %s, BLAS %s; %d sequences, %d rows (padded: %d x %d = %d), %d channels; "
          "median of %d x %d calls" % (m["cpu_model"], m["cpu_usable"], m["fluidlite"], m["blas"].get("config", "?"),
                                      args.batch, rows, args.batch, longest, args.batch * longest, CHANNELS,
                                      args.repeat, args.runs))
    frameworks = ["fluidlite"] + (["torch"] if torch else [])
    print("%-7s %8s" % ("window", "GFLOP") + "".join("  %24s" % (fw + " fwd/bwd ms (GFLOP/s)") for fw in frameworks))
    rs = np.random.RandomState(1)
    totals = {fw: 0.0 for fw in frameworks}
    useful_total = 0.0
    for k in WINDOWS:
        x = rs.standard_normal((rows, CHANNELS)).astype("float32")
        w = (rs.standard_normal((k * CHANNELS, CHANNELS)) * 0.05).astype("float32")
        dout = rs.standard_normal((rows, CHANNELS)).astype("float32")
        useful = 2.0 * rows * k * CHANNELS * CHANNELS  # forward; backward is 2x
        useful_total += 3 * useful
        work = {"fluidlite": useful, "torch": useful * args.batch * longest / rows}
        runners = {}
        (ffwd, fbwd), ((fout,), (fdx, fdw)) = fluidlite_runners(x, lens, w, dout, k)
        runners["fluidlite"] = (ffwd, fbwd)
        if torch:
            tf, tb = torch_runners(torch, x, lens, w, dout, k)
            np.testing.assert_allclose(fout, unpadded(tf().numpy(), lens), rtol=1e-3, atol=1e-3)
            tdx, tdw, _ = tb()
            tdx = tdx.numpy()[:, :, k // 2:k // 2 + longest]  # the padded input's gradient, padding cut off
            np.testing.assert_allclose(fdx, unpadded(tdx, lens), rtol=1e-3, atol=1e-3)
            np.testing.assert_allclose(fdw, tdw.numpy().transpose(2, 1, 0).reshape(w.shape), rtol=1e-3, atol=2e-3)
            runners["torch"] = (tf, tb)
        line = "%-7s %8.3f" % ("%d rows" % k, useful / 1e9)
        for fw in frameworks:
            t = [seconds_per_call(fn, args.runs, args.repeat, warmup=2)[0] for fn in runners[fw]]
            totals[fw] += sum(t)
            line += "  %7.2f/%7.2f (%4.0f/%4.0f)" % (t[0] * 1e3, t[1] * 1e3, work[fw] / t[0] / 1e9,
                                                    2 * work[fw] / t[1] / 1e9)
        print(line)
    for fw in frameworks:
        print("%-10s fwd+bwd of both windows %7.2f ms, %6.1f useful GFLOP/s" % (fw, totals[fw] * 1e3,
                                                                             useful_total / totals[fw] / 1e9))
    if torch:
        print("fluidlite speedup over torch's padded Conv1d: %.2fx" % (totals["torch"] / totals["fluidlite"]))


if __name__ == "__main__":
    main()
