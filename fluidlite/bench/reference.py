"""Reference frameworks for ``--compare``: availability, shared implementations, and the lookup.

A model module provides its reference implementations as functions named ``reference_<framework>``::

    def reference_numpy(params, feed): ...   # -> object with step() -> loss (or the model's output)
    def reference_torch(params, feed): ...
    def reference_paddle(params, feed): ...  # paddle.static (Paddle 3.x), usually a PaddleStatic below

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
    if name == "paddle":
        return _import_paddle()
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


def torch_to_device(impl, device):
    """Move a torch reference implementation to `device` ("cuda") in place: its modules (their parameters move in
    place, so an optimizer built over them keeps working), its tensors, and lists, tuples and dicts of them. A
    leaf tensor that requires grad moves through .data (an optimizer may hold it). Returns `impl`."""
    import torch

    def moved(v):
        if isinstance(v, torch.nn.Module):
            return v.to(device)
        if isinstance(v, torch.Tensor):
            if v.is_leaf and v.requires_grad:
                v.data = v.data.to(device)
                return v
            return v.to(device)
        if type(v).__module__.startswith("torch") and callable(getattr(v, "to", None)):
            return v.to(device)  # torch's containers that move themselves (a PackedSequence)
        if isinstance(v, (list, tuple)):
            return type(v)(moved(x) for x in v)
        if isinstance(v, dict):
            return {k: moved(x) for k, x in v.items()}
        return v

    for name, value in list(vars(impl).items()):
        setattr(impl, name, moved(value))
    return impl


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
        return loss.detach().cpu().numpy()


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
        return loss.detach().cpu().numpy()


# ---------------------------------------------------------------------------------------------------
# Paddle 3.x static graphs (paddle.static: Fluid's successor) holding fluidlite's weights.

PADDLE_LOG_LEVEL_ENV = "GLOG_minloglevel"


def _import_paddle():
    """paddle, imported quietly: its glog INFO/WARNING lines ("New Executor is Running ...") are turned off unless
    GLOG_minloglevel is set already (paddle reads it once, at import; fluidlite's own logging does not read it), and
    the UserWarning its import raises about ccache (a C++-extension build cache, unused here) is dropped."""
    import os
    import sys
    import warnings
    if sys.modules.get("paddle", False) is None:
        raise ImportError("paddle is hidden")
    os.environ.setdefault(PADDLE_LOG_LEVEL_ENV, "2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = importlib.import_module("paddle")
    return mod


def set_paddle_threads(threads):
    """paddle's CPU math library threads (MKL / OpenBLAS and OpenMP: ``paddle.base.core.set_num_threads``)."""
    _import_paddle().base.core.set_num_threads(int(threads))


class PaddleStatic:
    """One step of a ``paddle.static`` program, what a Paddle 3.x user writes for static-graph training: the
    program built under ``program_guard`` from ``paddle.static.data`` inputs and ``paddle.nn`` layers / functions,
    the optimizer's ``minimize``, the startup program run once in a Scope of its own, then
    ``Executor.run(main, feed, fetch_list, use_program_cache=True)`` per step.

    ``build(pb)`` runs inside the program guard (``pb`` is this object) and returns the variable each step fetches;
    it declares each input with ``pb.data(name, array)`` (the array is fed every step) and gives every parameter
    fluidlite's initial value with ``pb.assign(param, array)`` (copied into the scope after the startup program).
    A trainable parameter left unassigned would start from paddle's own random values: that is an error here.
    ``note``: where the program computes the model differently from fluidlite's (shown under the bench's table).
    """

    def __init__(self, build, optimizer=None, note=None):
        import logging
        import warnings
        paddle = _import_paddle()
        paddle.enable_static()  # process-wide; the other frameworks do not look at it
        self.paddle, self.note = paddle, note
        self.feed, self.values = {}, {}
        self.main, self.startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(self.main, self.startup), paddle.utils.unique_name.guard(), \
                warnings.catch_warnings():
            # paddle's own ops (full_like in some gradients) ask a PIR value for its place and warn that it has none
            warnings.filterwarnings("ignore", message="Tensor do not have 'place' interface")
            # BatchNorm2D in training mode says that it updates the running statistics (as Fluid's does)
            warnings.filterwarnings("ignore", message="When training, we now always track global mean")
            # and its backward logs a warning (root logger) for nn.LSTM's flattened-weights parameter, which no op
            # reads ("input provided by inputs has no use")
            disabled = logging.root.manager.disable
            logging.disable(logging.WARNING)
            try:
                self.fetch = build(self)
                if optimizer is not None:
                    optimizer().minimize(self.fetch)
            finally:
                logging.disable(disabled)
        self.place = paddle.CPUPlace()
        self.scope = paddle.static.Scope()
        self.exe = paddle.static.Executor(self.place)
        self.exe.run(self.startup, scope=self.scope)
        for name, value in self.values.items():
            var = self.scope.find_var(name)
            if var is None:
                raise RuntimeError("paddle reference: parameter %s is not in the scope after the startup program"
                                   % name)
            t = var.get_tensor()
            if tuple(t.shape()) != value.shape:
                raise RuntimeError("paddle reference: parameter %s has shape %s in paddle, fluidlite's value %s"
                                   % (name, list(t.shape()), list(value.shape)))
            t.set(value, self.place)
        # (a parameter no op reads is not a weight: nn.LSTM declares one for its flattened weights, which
        # coalesce_tensor fills from the real ones every step)
        missing = [v.name for v in self.main.global_block().all_parameters()
                   if not v.stop_gradient and not v.use_empty() and v.name not in self.values]
        if missing:
            raise RuntimeError("paddle reference: no fluidlite value for parameter(s) %s" % ", ".join(missing))

    def data(self, name, array):
        """A static input of `array`'s shape and dtype, fed `array` every step."""
        a = np.ascontiguousarray(array)
        self.feed[name] = a
        return self.paddle.static.data(name, list(a.shape), str(a.dtype))

    def param(self, name, array):
        """A parameter named `name` (paddle.static.create_parameter) starting from `array`."""
        a = np.asarray(array)
        return self.assign(self.paddle.static.create_parameter(list(a.shape), "float32", name=name), a)

    def assign(self, param, array):
        """Start `param` (a parameter, or a layer's buffer such as batch norm's moving mean) from `array`."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        if tuple(param.shape) != a.shape:
            raise ValueError("paddle reference: %s has shape %s, the value given %s" % (
                param.name, list(param.shape), list(a.shape)))
        self.values[param.name] = a
        return param

    def step(self):
        return self.exe.run(self.main, feed=self.feed, fetch_list=[self.fetch], scope=self.scope,
                            use_program_cache=True)[0]


def paddle_linear(pb, params, prefix):
    """paddle.nn.Linear with fluidlite's fc ``<prefix>.w_0`` [in, out] (paddle's layout too) and ``.b_0``."""
    nn = pb.paddle.nn
    w, b = params[prefix + ".w_0"], params.get(prefix + ".b_0")
    lin = nn.Linear(w.shape[0], w.shape[1], bias_attr=None if b is not None else False)
    pb.assign(lin.weight, w)
    if b is not None:
        pb.assign(lin.bias, b.reshape(-1))
    return lin


def paddle_conv2d(pb, w, b=None, stride=1, padding=0, groups=1):
    """paddle.nn.Conv2D with filter `w` [out, in / groups, kh, kw] (the same layout in all three frameworks)."""
    conv = pb.paddle.nn.Conv2D(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]), stride=stride, padding=padding,
                               groups=groups, bias_attr=None if b is not None else False)
    pb.assign(conv.weight, w)
    if b is not None:
        pb.assign(conv.bias, b)
    return conv


class PaddleLayers:
    """The torch TorchLayers' counterpart: paddle layers from fluidlite's parameters in the order the fluidlite
    model created them (conv2d_N, depthwise_conv2d_N, batch_norm_N, fc_N). Paddle's BatchNorm2D momentum is
    Fluid's (running = momentum * running + (1 - momentum) * batch)."""

    def __init__(self, pb, params, bn_momentum=0.9, bn_epsilon=1e-5):
        self.pb, self.params, self.bn_momentum, self.bn_epsilon = pb, params, bn_momentum, bn_epsilon
        self.counts = {"conv2d": 0, "depthwise_conv2d": 0, "batch_norm": 0, "fc": 0}

    def _next(self, kind):
        n = self.counts[kind]
        self.counts[kind] += 1
        return "%s_%d" % (kind, n)

    def conv(self, stride=1, padding=0, groups=1):
        name = self._next("conv2d" if groups == 1 else "depthwise_conv2d")
        return paddle_conv2d(self.pb, self.params[name + ".w_0"], self.params.get(name + ".b_0"), stride, padding,
                             groups)

    def bn(self):
        p, name = self.params, self._next("batch_norm")
        bn = self.pb.paddle.nn.BatchNorm2D(p[name + ".w_0"].shape[0], momentum=self.bn_momentum,
                                           epsilon=self.bn_epsilon)
        for dst, suffix in ((bn.weight, ".w_0"), (bn.bias, ".b_0"), (bn._mean, ".w_1"), (bn._variance, ".w_2")):
            self.pb.assign(dst, p[name + suffix])
        return bn

    def conv_bn(self, stride=1, padding=0, relu=True, groups=1):
        """Sequential(conv, batch norm[, ReLU])."""
        nn = self.pb.paddle.nn
        return nn.Sequential(self.conv(stride, padding, groups), self.bn(), *([nn.ReLU()] if relu else []))

    def fc(self):
        return paddle_linear(self.pb, self.params, self._next("fc"))


def paddle_softmax_ce(pb, logits, label):
    """Softmax cross-entropy of logits [N, C] against int64 label [N, 1], averaged over the batch."""
    return pb.paddle.nn.functional.cross_entropy(logits, label)  # softmax, then the mean over the batch


def paddle_optimizer(kind, lr, **kw):
    """A factory of paddle.optimizer.<kind>(lr, **kw) (made inside the program guard)."""
    return lambda: getattr(_import_paddle().optimizer, kind)(learning_rate=lr, **kw)


def paddle_dense(params, x, label, loss, lr):
    """The fc stack of NumpyDense / TorchDense (ReLU between layers; "mse" or "softmax_ce") with paddle's SGD."""
    def build(pb):
        paddle = pb.paddle
        h = pb.data("x", x)
        y = pb.data("label", label)
        n = len(fc_layers(params))
        for i in range(n):
            h = paddle_linear(pb, params, "fc_%d" % i)(h)
            if i < n - 1:
                h = paddle.nn.functional.relu(h)
        if loss == "mse":
            return paddle.mean(paddle.nn.functional.square_error_cost(h, y))
        return paddle_softmax_ce(pb, h, y)
    return PaddleStatic(build, paddle_optimizer("SGD", lr))


def paddle_classifier(network, x, label, lr, momentum=0.0):
    """One training step of a paddle classifier `network(pb, img) -> logits` (layers in training mode): softmax
    cross-entropy averaged over the batch, SGD or Momentum (Fluid's: v = mu * v + g; p -= lr * v)."""
    def build(pb):
        return paddle_softmax_ce(pb, network(pb, pb.data("img", x)), pb.data("label", label))
    opt = paddle_optimizer("Momentum", lr, momentum=momentum) if momentum else paddle_optimizer("SGD", lr)
    return PaddleStatic(build, opt)
