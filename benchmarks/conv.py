"""Convolution throughput per layer: fluidlite conv2d / conv2d_grad vs torch (oneDNN on and off), float32.

    python benchmarks/conv.py [--model resnet_small|lenet|vgg_small] [--batch 32] [--repeat 7] [--runs 3]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.
For OpenBLAS's own kernel choice on this machine, run under `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`.

One row per distinct conv shape of the model (count = how often it occurs), forward and backward (dx and
dW) timed separately, in ms per call (median of --repeat repetitions of --runs calls) and GFLOP/s.
fluidlite runs a 1-op program on tensors already in the scope (the op itself, as torch's calls are
timed). torch's CPU convolution is oneDNN (mkldnn) when torch.backends.mkldnn is enabled, its own
im2col + GEMM (slow_conv2d) when disabled: the "torch -dnn" columns. Results are checked against torch
before timing. The last line sums count x time over the model's layers. The layers are read from the
conv2d ops of the fluidlite.bench model's program.
"""
import argparse
from collections import Counter

import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench import machine_info, models, seconds_per_call

CONV_MODELS = ("lenet", "resnet_small", "vgg_small")  # the fluidlite.bench models with convolutions


def conv_layers(model):
    """(C_in, C_out, H=W, kernel, stride, padding) of every conv2d of the fluidlite.bench model, in order."""
    block = models.load(model).build(1, seed=1).main.global_block()
    layers = []
    for op in block.ops:
        if op.type != "conv2d":
            continue
        _, cin, h, w = block.var(op.input("Input")[0]).shape
        cout, _, kh, kw = block.var(op.input("Filter")[0]).shape
        (sh, sw), (ph, pw) = op.attr("strides"), op.attr("paddings")
        if (h, kh, sh, ph) != (w, kw, sw, pw) or op.attr("groups") != 1 or list(op.attr("dilations")) != [1, 1]:
            raise ValueError("%s: conv %s is not square, or is grouped or dilated: not timed here"
                             % (model, op.output("Output")[0]))
        layers.append((cin, cout, h, kh, sh, ph))
    return layers


def out_size(h, k, s, p):
    return (h + 2 * p - k) // s + 1


def fluidlite_runners(x, w, dout, stride, pad):
    """(forward, backward) 1-op programs over persistable tensors, and their first results."""
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.Scope()
    attrs = {"strides": [stride, stride], "paddings": [pad, pad], "dilations": [1, 1], "groups": 1}
    progs = []
    for grad in (False, True):
        prog = fluid.Program()
        block = prog.global_block()
        names = {"Input": ("cx", x), "Filter": ("cw", w)}
        if grad:
            names["Output@GRAD"] = ("cdout", dout)
        vars_ = {k: block.create_var(name=n, shape=list(a.shape), dtype="float32", persistable=True)
                 for k, (n, a) in names.items()}
        if grad:
            outs = {"Input@GRAD": block.create_var(name="cdx", shape=list(x.shape), dtype="float32"),
                    "Filter@GRAD": block.create_var(name="cdw", shape=list(w.shape), dtype="float32")}
        else:
            outs = {"Output": block.create_var(name="cout", shape=list(dout.shape), dtype="float32")}
        block.append_op(type="conv2d_grad" if grad else "conv2d", inputs={k: [v] for k, v in vars_.items()},
                        outputs={k: [v] for k, v in outs.items()}, attrs=attrs)
        progs.append((prog, list(outs.values())))
    for n, a in (("cx", x), ("cw", w), ("cdout", dout)):
        scope.var(n).get_tensor().set(a, place)
    results = [exe.run(p, fetch_list=f, scope=scope) for p, f in progs]
    return [lambda p=p: exe.run(p, scope=scope) for p, _ in progs], results


def torch_runners(torch, x, w, dout, stride, pad):
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = torch.from_numpy(w).requires_grad_(True)
    tdout = torch.from_numpy(dout)
    F = torch.nn.functional

    def fwd():
        with torch.no_grad():
            return F.conv2d(tx, tw, stride=stride, padding=pad)

    def bwd():
        # Only the backward: conv2d's derivative as autograd computes it (dx and dW).
        return torch.ops.aten.convolution_backward(tdout, tx, tw, None, [stride] * 2, [pad] * 2, [1, 1], False,
                                                   [0, 0], 1, [True, True, False])
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=CONV_MODELS, default="resnet_small")
    ap.add_argument("--batch", type=int, default=None, help="default: the model's fluidlite.bench batch size "
                    "(32 for resnet_small and vgg_small, 64 for lenet)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no_torch", action="store_true")
    args = ap.parse_args()
    batch = args.batch or models.load(args.model).DEFAULTS["batch_size"]
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
    m = machine_info()
    print("machine: %s, %d cores, fluidlite %s, BLAS %s; %s batch %d, median of %d x %d calls" % (
        m["cpu_model"], m["cpu_usable"], m["fluidlite"], m["blas"].get("config", "?"), args.model, batch,
        args.repeat, args.runs))
    frameworks = ["fluidlite"] + (["torch", "torch -dnn"] if torch else [])
    head = "%-26s %3s %7s" % ("layer (Cin>Cout HxW k/s)", "n", "GFLOP")
    for fw in frameworks:
        head += "  %16s" % (fw + " fwd/bwd ms")
    print(head)
    totals = {fw: [0.0, 0.0] for fw in frameworks}
    total_flop = 0.0
    rs = np.random.RandomState(0)
    for shape, count in Counter(conv_layers(args.model)).items():
        cin, cout, hw, k, s, p = shape
        ho = out_size(hw, k, s, p)
        x = rs.standard_normal((batch, cin, hw, hw)).astype("float32")
        w = (rs.standard_normal((cout, cin, k, k)) * 0.1).astype("float32")
        dout = rs.standard_normal((batch, cout, ho, ho)).astype("float32")
        flop = 2.0 * batch * cout * cin * k * k * ho * ho  # forward; backward is 2x
        total_flop += 3 * flop * count
        runners = {}
        (ffwd, fbwd), ((fout,), (fdx, fdw)) = fluidlite_runners(x, w, dout, s, p)
        runners["fluidlite"] = (ffwd, fbwd)
        if torch:
            tf, tb = torch_runners(torch, x, w, dout, s, p)
            np.testing.assert_allclose(fout, tf().numpy(), rtol=1e-3, atol=1e-3)
            tdx, tdw, _ = tb()
            np.testing.assert_allclose(fdx, tdx.detach().numpy(), rtol=1e-3, atol=1e-3)
            np.testing.assert_allclose(fdw, tdw.detach().numpy(), rtol=1e-3, atol=2e-3)
            runners["torch"] = (tf, tb)
        line = "%-26s %3d %7.3f" % ("%d>%d %dx%d %d/%d" % (cin, cout, hw, hw, k, s), count, flop / 1e9)
        for fw in frameworks:
            times = []
            for i, fn in enumerate(runners["torch" if fw == "torch -dnn" else fw]):
                if fw.startswith("torch"):
                    with torch.backends.mkldnn.flags(enabled=(fw == "torch")):
                        t = seconds_per_call(fn, args.runs, args.repeat, warmup=2)[0]
                else:
                    t = seconds_per_call(fn, args.runs, args.repeat, warmup=2)[0]
                times.append(t)
                totals[fw][i] += t * count
            line += "  %7.3f/%8.3f" % (times[0] * 1e3, times[1] * 1e3)
        print(line)
    line = "%-26s %3s %7.3f" % ("total (count x time)", "", total_flop / 1e9)
    for fw in frameworks:
        f, b = totals[fw]
        line += "  %7.2f/%8.2f" % (f * 1e3, b * 1e3)
    print(line)
    for fw in frameworks:
        f, b = totals[fw]
        print("%-10s fwd+bwd %7.2f ms  %6.1f GFLOP/s" % (fw, (f + b) * 1e3, total_flop / (f + b) / 1e9))


if __name__ == "__main__":
    main()
