"""Training-step time of fit_a_line and the MLP: fluidlite vs hand-written numpy vs PyTorch, same run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/train_step.py [--model fit_a_line|mlp|both]

(The two variables force OpenBLAS's Haswell kernels on this machine; numpy and fluidlite both use
OpenBLAS, so unset them for the benchmark, as the machine notes advise. PyTorch uses its own BLAS.)

All three start from the same weights and data; one step's loss is checked to agree before timing, so
the comparison never times different computations. Frameworks are timed interleaved (round robin over
repetitions) so machine noise hits each equally. Goals (issue 3): fit_a_line <= 1.5x the numpy step
time; MLP >= 1.1x PyTorch's steps/s.
"""
import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench.models import fit_a_line, mlp

try:
    import torch
except ImportError:  # reported as skipped
    torch = None


def _scope_array(scope, name):
    return np.array(scope.find_var(name).get_tensor())


class Fluidlite:
    name = "fluidlite"

    def __init__(self, module, batch, seed):
        built = module.build(batch, seed)
        self.main, self.feed, self.fetch = built.main, built.feed(), built.fetch_list
        self.exe = fluid.Executor(fluid.CPUPlace())
        self.scope = fluid.Scope()
        self.exe.run(built.startup, scope=self.scope)

    def params(self):
        names = sorted(p.name for p in self.main.global_block().all_parameters())
        return {n: _scope_array(self.scope, n) for n in names}

    def step(self):
        return self.exe.run(self.main, feed=self.feed, fetch_list=self.fetch, scope=self.scope)[0]


def _layers(params):
    """[(w, b)] in layer order from fluidlite's fc_N.w_0 / fc_N.b_0 names."""
    n = len([k for k in params if k.endswith(".w_0")])
    return [(params["fc_%d.w_0" % i].copy(), params["fc_%d.b_0" % i].copy()) for i in range(n)]


class NumpyFitALine:
    name = "numpy"

    def __init__(self, params, feed, lr=0.001):
        (self.w, self.b), = _layers(params)
        self.x, self.y, self.lr = feed["x"], feed["y"], np.float32(lr)

    def step(self):
        pred = self.x @ self.w + self.b
        diff = pred - self.y
        loss = np.mean(diff * diff)
        d = diff * np.float32(2.0 / diff.size)
        self.w -= self.lr * (self.x.T @ d)
        self.b -= self.lr * d.sum(0)
        return loss


class NumpyMLP:
    name = "numpy"

    def __init__(self, params, feed, lr=0.01):
        self.layers = _layers(params)
        self.x, self.label, self.lr = feed["img"], feed["label"][:, 0], np.float32(lr)

    def step(self):
        acts = [self.x]
        for i, (w, b) in enumerate(self.layers):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0) if i < len(self.layers) - 1 else z)
        logits = acts[-1]
        m = logits.max(1, keepdims=True)
        e = np.exp(logits - m)
        p = e / e.sum(1, keepdims=True)
        n = logits.shape[0]
        loss = -np.log(p[np.arange(n), self.label]).mean()
        d = p
        d[np.arange(n), self.label] -= 1
        d /= n
        for i in range(len(self.layers) - 1, -1, -1):
            w, b = self.layers[i]
            a = acts[i]
            gw, gb = a.T @ d, d.sum(0)
            if i:
                d = (d @ w.T) * (a > 0)
            w -= self.lr * gw
            b -= self.lr * gb
        return loss


class Torch:
    name = "torch"

    def __init__(self, params, feed, kind, lr):
        torch.set_num_threads(fluid.core.get_num_threads())
        mods = []
        layers = _layers(params)
        for i, (w, b) in enumerate(layers):
            lin = torch.nn.Linear(w.shape[0], w.shape[1])
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(w.T.copy()))
                lin.bias.copy_(torch.from_numpy(b))
            mods.append(lin)
            if kind == "mlp" and i < len(layers) - 1:
                mods.append(torch.nn.ReLU())
        self.model = torch.nn.Sequential(*mods)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.kind = kind
        if kind == "mlp":
            self.x, self.y = torch.from_numpy(feed["img"]), torch.from_numpy(feed["label"][:, 0])
            self.loss_fn = torch.nn.CrossEntropyLoss()
        else:
            self.x, self.y = torch.from_numpy(feed["x"]), torch.from_numpy(feed["y"])
            self.loss_fn = torch.nn.MSELoss()

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach()


def run(kind, repeat, batch):
    module = fit_a_line if kind == "fit_a_line" else mlp
    batch = batch or module.DEFAULTS["batch_size"]
    iters = 2000 if kind == "fit_a_line" else 40
    fl = Fluidlite(module, batch, seed=1)
    params = fl.params()
    ref = [NumpyFitALine(params, fl.feed) if kind == "fit_a_line" else NumpyMLP(params, fl.feed)]
    if torch is not None:
        ref.append(Torch(params, fl.feed, kind, 0.001 if kind == "fit_a_line" else 0.01))
    # agreement: the first step's loss (same weights, same batch) must match
    l0 = float(np.asarray(fl.step()).ravel()[0])
    for r in ref:
        lr_ = float(r.step())
        if abs(lr_ - l0) > 1e-4 * max(1.0, abs(l0)):
            raise SystemExit("%s: loss %.6g differs from fluidlite's %.6g: not the same computation" % (r.name, lr_, l0))
    frameworks = [fl] + ref
    times = {f.name: [] for f in frameworks}
    for f in frameworks:  # warm-up
        for _ in range(iters // 10 + 1):
            f.step()
    for _ in range(repeat):
        for f in frameworks:
            t = time.perf_counter()
            for _ in range(iters):
                f.step()
            times[f.name].append((time.perf_counter() - t) / iters)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("%s (batch %d, %d threads, median of %d x %d steps; first-step loss %.6g agrees)"
          % (kind, batch, fluid.core.get_num_threads(), repeat, iters, l0))
    for name in times:
        print("  %-10s %10.1f us/step   min %10.1f   steps/s %9.0f   fluidlite speedup %.2fx"
              % (name, med[name] * 1e6, min(times[name]) * 1e6, 1 / med[name], med[name] / med["fluidlite"]))
    if torch is None:
        print("  torch      skipped: not installed")
    if kind == "fit_a_line":
        r = med["fluidlite"] / med["numpy"]
        print("  goal fit_a_line <= 1.5x numpy step time: %.2fx  %s" % (r, "PASS" if r <= 1.5 else "MISS"))
    elif torch is not None:
        r = med["torch"] / med["fluidlite"]
        print("  goal MLP >= 1.1x PyTorch steps/s: %.2fx  %s" % (r, "PASS" if r >= 1.1 else "MISS"))
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["fit_a_line", "mlp", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--batch_size", type=int, default=None)
    args = ap.parse_args()
    for kind in (["fit_a_line", "mlp"] if args.model == "both" else [args.model]):
        run(kind, args.repeat, args.batch_size)


if __name__ == "__main__":
    main()
