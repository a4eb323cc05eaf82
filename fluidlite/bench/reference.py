"""Reference frameworks for ``--compare``: availability, shared implementations, and the lookup.

A model module provides its reference implementations as functions named ``reference_<framework>``::

    def reference_numpy(params, feed): ...   # -> object with step() -> loss (or the model's output)
    def reference_torch(params, feed): ...

``params`` maps fluidlite's parameter names to numpy arrays read from the scope right after the startup
program ran (so every framework starts from the same weights), ``feed`` is the batch fluidlite is fed: numpy
arrays, and for LoD inputs ``(array, recursive_seq_lens)`` pairs (``plain_feed``).
``step()`` runs one training (or inference) step and returns what fluidlite's first fetch returns, so
the first step of each framework can be checked against fluidlite's before anything is timed. A model
may set ``TOLERANCE = {"rtol": ..., "atol": ...}`` for that check (default below).

A framework with no ``reference_<name>`` in the model is skipped with a reason; a framework that is
not installed is skipped as "not installed". Neither is an error.
"""
import importlib

import numpy as np

FRAMEWORKS = ("torch", "paddle", "numpy")
DEFAULT_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

# Test hook: FLUIDLITE_BENCH_TEST_PERTURB=<framework> scales that reference's weights and float inputs
# by this factor, so the agreement check must fail (see tests/test_bench_cli.py).
PERTURB_ENV = "FLUIDLITE_BENCH_TEST_PERTURB"
PERTURB_FACTOR = 1.05


def import_framework(name):
    """The framework's module, or raise ImportError (also when the module is hidden as None)."""
    if name == "numpy":
        return np
    mod = importlib.import_module(name)
    if mod is None:  # sys.modules[name] = None
        raise ImportError("%s is hidden" % name)
    return mod


def availability(name):
    """None when `name` can be used, else the reason it is skipped."""
    try:
        import_framework(name)
    except ImportError:
        return "not installed"
    except Exception as e:  # a broken install is a skip, not a crash
        return "cannot import: %s: %s" % (type(e).__name__, " ".join(str(e).split()))
    return None


def version(name):
    try:
        return getattr(import_framework(name), "__version__", None)
    except ImportError:
        return None


def factory(model_module, framework):
    """The model's ``reference_<framework>`` function, or None."""
    return getattr(model_module, "reference_" + framework, None)


def tolerance(model_module):
    return dict(getattr(model_module, "TOLERANCE", DEFAULT_TOLERANCE))


def plain_feed(feed):
    """A model's feed as the references take it: copies of its arrays, and each LoD input (a LoDTensor with a LoD,
    or an ``(array, recursive_seq_lens)`` pair) as an ``(array, recursive_seq_lens)`` pair, so that a reference can
    pad or pack the sequences."""
    out = {}
    for k, v in feed.items():
        lens = v[1] if isinstance(v, tuple) else getattr(v, "recursive_sequence_lengths", lambda: None)()
        a = np.array(v[0] if isinstance(v, tuple) else v, copy=True)
        out[k] = (a, [list(level) for level in lens]) if lens else a
    return out


def perturbed(params, feed, factor=PERTURB_FACTOR):
    """Copies of params and feed with every float array scaled by `factor` (test hook); a feed's LoD pairs keep
    their lengths."""
    def scale(a):
        if isinstance(a, tuple):
            return scale(a[0]), a[1]
        a = np.asarray(a)
        return a * a.dtype.type(factor) if a.dtype.kind == "f" else a.copy()
    return {k: scale(v) for k, v in params.items()}, {k: scale(v) for k, v in feed.items()}


def set_torch_threads(threads):
    import torch
    torch.set_num_threads(int(threads))


_NUMPY_BLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                       "openblas_set_num_threads64_", "openblas_set_num_threads")


def set_numpy_threads(threads):
    """Give numpy's own BLAS (the OpenBLAS bundled in numpy's wheel, not fluidlite's) `threads` threads,
    so a comparison runs both with the same count. Best effort: returns the library's path, or None
    where no OpenBLAS loaded by numpy could be found."""
    import ctypes
    import re
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*numpy[^/]*\.libs/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _NUMPY_BLAS_SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                fn(int(threads))
                return path
    return None


# ---------------------------------------------------------------------------------------------------
# Shared implementations: a stack of fc layers (fluidlite's fc_N.w_0 / fc_N.b_0), SGD.

def fc_layers(params):
    """[(w, b)] in layer order from fluidlite's ``fc_N.w_0`` / ``fc_N.b_0`` parameters (copies)."""
    n = len([k for k in params if k.startswith("fc_") and k.endswith(".w_0")])
    return [(np.array(params["fc_%d.w_0" % i], copy=True), np.array(params["fc_%d.b_0" % i], copy=True))
            for i in range(n)]


class NumpyDense:
    """fc stack (ReLU between layers) + loss + SGD in numpy, forward and backward written out.

    loss: "mse" (mean of squared error, label a float [N, 1]) or "softmax_ce" (softmax cross-entropy
    with an int64 label [N, 1], averaged over the batch)."""

    def __init__(self, params, x, label, loss, lr):
        self.layers = fc_layers(params)
        self.x, self.loss, self.lr = x, loss, np.float32(lr)
        self.label = label[:, 0] if loss == "softmax_ce" else label

    def step(self):
        acts = [self.x]
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0) if i < last else z)
        out = acts[-1]
        n = out.shape[0]
        if self.loss == "mse":
            diff = out - self.label
            loss = np.mean(diff * diff)
            d = diff * np.float32(2.0 / diff.size)
        else:
            e = np.exp(out - out.max(1, keepdims=True))
            p = e / e.sum(1, keepdims=True)
            rows = np.arange(n)
            loss = -np.log(p[rows, self.label]).mean()
            d = p
            d[rows, self.label] -= 1
            d /= n
        for i in range(last, -1, -1):
            w, b = self.layers[i]
            a = acts[i]
            gw, gb = a.T @ d, d.sum(0)
            if i:
                d = (d @ w.T) * (a > 0)
            w -= self.lr * gw
            b -= self.lr * gb
        return loss


class TorchDense:
    """The same network in PyTorch eager: nn.Linear stack, MSELoss / CrossEntropyLoss, optim.SGD."""

    def __init__(self, params, x, label, loss, lr):
        import torch
        mods = []
        layers = fc_layers(params)
        for i, (w, b) in enumerate(layers):
            lin = torch.nn.Linear(w.shape[0], w.shape[1])
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
                lin.bias.copy_(torch.from_numpy(b))
            mods.append(lin)
            if i < len(layers) - 1:
                mods.append(torch.nn.ReLU())
        self.model = torch.nn.Sequential(*mods)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.x = torch.from_numpy(x)
        if loss == "mse":
            self.y, self.loss_fn = torch.from_numpy(label), torch.nn.MSELoss()
        else:
            self.y, self.loss_fn = torch.from_numpy(label[:, 0]), torch.nn.CrossEntropyLoss()

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().numpy()


# ---------------------------------------------------------------------------------------------------
# PyTorch modules holding fluidlite's parameters (conv nets): conv2d_N.w_0/b_0, fc_N.w_0/b_0 and
# batch_norm's scale, bias, moving mean and variance.

def _torch_copy(dst, src):
    import torch
    with torch.no_grad():
        dst.copy_(torch.from_numpy(np.ascontiguousarray(src)))


def torch_conv2d(params, prefix, stride=1, padding=0):
    """nn.Conv2d with fluidlite's filter ``<prefix>.w_0`` [out, in, kh, kw] (same layout as torch) and
    bias ``<prefix>.b_0`` when the layer has one."""
    import torch
    w = params[prefix + ".w_0"]
    b = params.get(prefix + ".b_0")
    conv = torch.nn.Conv2d(w.shape[1], w.shape[0], tuple(w.shape[2:]), stride=stride, padding=padding,
                           bias=b is not None)
    _torch_copy(conv.weight, w)
    if b is not None:
        _torch_copy(conv.bias, b)
    return conv


def torch_linear(params, prefix):
    """nn.Linear from fluidlite's fc ``<prefix>.w_0`` [in, out] (transposed: torch keeps [out, in])."""
    import torch
    w, b = params[prefix + ".w_0"], params.get(prefix + ".b_0")
    lin = torch.nn.Linear(w.shape[0], w.shape[1], bias=b is not None)
    _torch_copy(lin.weight, w.T)
    if b is not None:
        _torch_copy(lin.bias, b)
    return lin


def torch_batch_norm(scale, bias, mean, variance, momentum=0.9, epsilon=1e-5):
    """nn.BatchNorm2d with fluidlite's scale, bias, moving mean and variance. Fluid's ``momentum`` weighs
    the old running value (running = momentum * running + (1 - momentum) * batch); torch's weighs the
    batch, so torch gets 1 - momentum."""
    import torch
    bn = torch.nn.BatchNorm2d(scale.shape[0], eps=epsilon, momentum=1.0 - momentum)
    for dst, src in ((bn.weight, scale), (bn.bias, bias), (bn.running_mean, mean), (bn.running_var, variance)):
        _torch_copy(dst, src)
    return bn


class TorchLayers:
    """Creates torch layers from fluidlite's parameters in the order the fluidlite model created its
    layers, so the N-th ``conv_bn`` call gets ``conv2d_N`` and ``batch_norm_N`` (build the fluidlite
    model under ``fluid.unique_name.guard()`` so its names start at 0)."""

    def __init__(self, params, bn_momentum=0.9, bn_epsilon=1e-5):
        self.params, self.bn_momentum, self.bn_epsilon = params, bn_momentum, bn_epsilon
        self.counts = {"conv2d": 0, "batch_norm": 0, "fc": 0}

    def _next(self, kind):
        n = self.counts[kind]
        self.counts[kind] += 1
        return "%s_%d" % (kind, n)

    def conv(self, stride=1, padding=0):
        return torch_conv2d(self.params, self._next("conv2d"), stride=stride, padding=padding)

    def bn(self):
        p, name = self.params, self._next("batch_norm")
        return torch_batch_norm(p[name + ".w_0"], p[name + ".b_0"], p[name + ".w_1"], p[name + ".w_2"],
                                momentum=self.bn_momentum, epsilon=self.bn_epsilon)

    def conv_bn(self, stride=1, padding=0, relu=True):
        """Sequential(conv (fluidlite's conv2d_N), batch norm (batch_norm_N)[, ReLU])."""
        import torch
        mods = [self.conv(stride, padding), self.bn()] + ([torch.nn.ReLU(inplace=True)] if relu else [])
        return torch.nn.Sequential(*mods)

    def fc(self):
        return torch_linear(self.params, self._next("fc"))


class TorchClassifier:
    """One training step of a torch classifier in training mode: CrossEntropyLoss (softmax cross-entropy
    averaged over the batch) and SGD; momentum as Fluid's Momentum (v = mu * v + g; p -= lr * v), which is
    torch's SGD(momentum=mu) without dampening. step() returns the loss before the update."""

    def __init__(self, model, x, label, lr, momentum=0.0):
        import torch
        self.model = model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.x = torch.from_numpy(np.ascontiguousarray(x))
        self.y = torch.from_numpy(np.ascontiguousarray(np.asarray(label).reshape(-1)))

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().numpy()
