"""``python -m fluidlite.bench --mode infer``: inference latency of the image models against ONNX Runtime.

For a model that defines ``network(img, label) -> (logits, loss)``, ``IMAGE_SHAPE`` and ``torch_network(params)``
(lenet, resnet_small, mobilenet_v2, vgg_small), the inference program is made the way users make it: the
forward program is saved with ``fluid.io.save_inference_model`` (pruned to the logits, batch norm in test mode)
and loaded back with ``fluid.io.load_inference_model``, so the executor applies the inference passes
(``BuildStrategy.inference_optimize``: batch_norm folding, fc and conv + bias + activation fusion). The batch
norms' running statistics, scale and bias are drawn at random first, so folding them is not a no-op.

The reference is the model's PyTorch network built from the same weights (``torch_network``), in eval mode,
exported with ``torch.onnx.export`` and run by ONNX Runtime's CPU execution provider with the same number of
intra-op threads as fluidlite. Before timing, both run the same batch and their logits must agree within the
model's ``TOLERANCE`` (AgreementError otherwise). Latency is timed per batch size (1 and 32 by default) in
interleaved repetitions (fluidlite, ONNX Runtime, fluidlite, ...); ``speedup`` = ONNX Runtime ms / fluidlite ms
(> 1: fluidlite is faster).
"""
import os
import statistics
import tempfile
import time

import numpy as np

from . import AgreementError, SETTLE_SECONDS, _agree, _show, models, reference

BATCH_SIZES = (1, 32)
DEFAULTS = {"iterations": 20, "warmup": 5, "repeat": 5}
REFERENCE = "onnxruntime"


def supported(name):
    """Whether model `name` has an inference mode (an image classifier with a torch network)."""
    mod = models.load(name)
    return all(hasattr(mod, a) for a in ("network", "IMAGE_SHAPE", "torch_network"))


def infer_models():
    return [n for n in models.MODELS if supported(n)]


def availability():
    """None when ONNX Runtime, onnx and torch (for the export) can be used, else why the reference is skipped."""
    for fw in ("onnxruntime", "onnx", "torch"):
        reason = reference.availability(fw)
        if reason is not None:
            return "%s %s (pip install \".[compare]\")" % (fw, reason)
    return None


def _randomize_batch_norms(program, scope, rng):
    """Random scale, bias, running mean and variance for every batch_norm of `program` (in `scope`)."""
    for op in program.global_block().ops:
        if op.type != "batch_norm":
            continue
        for slot, lo, hi in (("Scale", 0.5, 1.5), ("Bias", -0.5, 0.5), ("Mean", -0.5, 0.5), ("Variance", 0.5, 2.0)):
            t = scope.find_var(op.input(slot)[0]).get_tensor()
            shape = np.array(t).shape
            t.set(rng.uniform(lo, hi, size=shape).astype("float32"))


class FluidliteInfer:
    """The model's inference program as load_inference_model gives it, in its own scope."""
    name = "fluidlite"

    def __init__(self, mod, seed, place, dirname, build_strategy=None):
        import fluidlite as fluid
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = seed
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            img = fluid.layers.data(name="img", shape=list(mod.IMAGE_SHAPE), dtype="float32")
            label = fluid.layers.data(name="label", shape=[1], dtype="int64")
            logits, _ = mod.network(img, label)
        self.exe = fluid.Executor(place)
        train_scope = fluid.Scope()
        self.exe.run(startup, scope=train_scope)
        _randomize_batch_norms(main, train_scope, np.random.RandomState(seed))
        names = sorted(p.name for p in main.global_block().all_parameters())
        self.params = {n: np.array(train_scope.find_var(n).get_tensor()) for n in names}
        with fluid.scope_guard(train_scope):
            fluid.io.save_inference_model(dirname, ["img"], [logits], self.exe, main)
        self.scope = fluid.Scope()
        with fluid.scope_guard(self.scope):
            self.program, self.feed_names, self.fetch = fluid.io.load_inference_model(dirname, self.exe)
        self.target = self.program
        if build_strategy is not None:
            self.target = fluid.CompiledProgram(self.program, build_strategy=build_strategy)
        self.x = None

    def set_batch(self, x):
        self.x = x

    def step(self):
        return self.exe.run(self.target, feed={self.feed_names[0]: self.x}, fetch_list=self.fetch,
                            scope=self.scope)[0]

    def prepared(self):
        """The prepared program (with the pass log) for the current batch."""
        return self.exe.prepared_program(self.target, feed=self.feed_names, fetch_list=self.fetch, scope=self.scope)


class OrtInfer:
    """The torch network exported to ONNX, run by ONNX Runtime (CPU EP) with `threads` intra-op threads."""
    name = REFERENCE

    def __init__(self, mod, params, dirname, threads, image_shape):
        import onnxruntime as ort
        import torch
        net = mod.torch_network(params).eval()
        path = os.path.join(dirname, "model.onnx")
        example = torch.zeros((1,) + tuple(image_shape), dtype=torch.float32)
        with torch.no_grad():
            torch.onnx.export(net, (example,), path, input_names=["img"], output_names=["logits"],
                              dynamic_axes={"img": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.x = None

    def set_batch(self, x):
        self.x = x

    def step(self):
        return self.session.run(None, {"img": self.x})[0]


def _figures(seconds):
    ms = [s * 1e3 for s in seconds]
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": ms}


def run_infer(name, batch_sizes=BATCH_SIZES, iterations=None, warmup=None, repeat=None, threads=None, seed=0,
              device="cpu", reference_on=True, build_strategy=None):
    """Inference latency of model `name` at each batch size, with ONNX Runtime beside it when installed.
    Returns {"model", "threads", "batches": [{"batch_size", "fluidlite": figures, "onnxruntime": figures or None,
    "speedup", "agreement"}], "reference": {"status", "reason", "version"}, "passes": [summaries]}."""
    from fluidlite import core

    from . import _place
    if not supported(name):
        raise ValueError("model %s has no inference mode (the image models do: %s)" % (name, ", ".join(
            infer_models())))
    mod = models.load(name)
    if threads is not None:
        core.set_num_threads(threads)
    threads = core.get_num_threads()
    iterations = iterations or DEFAULTS["iterations"]
    warmup = DEFAULTS["warmup"] if warmup is None else warmup
    repeat = repeat or DEFAULTS["repeat"]
    tol = reference.tolerance(mod)
    rng = np.random.RandomState(seed)
    with tempfile.TemporaryDirectory(prefix="fluidlite-infer-") as d:
        fl = FluidliteInfer(mod, seed, _place(device), os.path.join(d, "fluid"), build_strategy)
        reason = availability() if reference_on else "not requested"
        ort = None
        if reason is None:
            params = fl.params
            if os.environ.get(reference.PERTURB_ENV) == REFERENCE:  # test hook: the agreement check must fail
                params = reference.perturbed(params, {})[0]
            ort = OrtInfer(mod, params, d, threads, mod.IMAGE_SHAPE)
        ref_doc = {"framework": REFERENCE, "status": "ok" if ort else "skipped", "reason": reason,
                   "version": reference.version(REFERENCE) if ort else None}
        runners = [fl] + ([ort] if ort else [])
        batches, passes = [], None
        for bs in batch_sizes:
            x = rng.standard_normal((bs,) + tuple(mod.IMAGE_SHAPE)).astype("float32")
            for r in runners:
                r.set_batch(x)
            first = {r.name: np.array(r.step()) for r in runners}
            if passes is None:
                passes = [p["summary"] for p in fl.prepared().pass_results]
            agreement = None
            if ort:
                agreement = {"tolerance": tol, "first": {k: _show(v) for k, v in first.items()}}
                if not _agree(first[fl.name], first[REFERENCE], tol):
                    err = np.abs(first[fl.name].astype(np.float64) - first[REFERENCE]).max()
                    raise AgreementError("%s inference (batch %d): ONNX Runtime's logits differ from fluidlite's "
                                         "beyond rtol %g, atol %g (max abs difference %.3g): %s" % (
                                             name, bs, tol["rtol"], tol["atol"], err, "; ".join(
                                                 "%s %s" % kv for kv in agreement["first"].items())))
            times = {r.name: [] for r in runners}
            for r in runners:
                for _ in range(warmup):
                    r.step()
            for _ in range(repeat):
                for r in runners:
                    if len(runners) > 1:
                        time.sleep(SETTLE_SECONDS)
                    step = r.step
                    t0 = time.perf_counter()
                    for _ in range(iterations):
                        step()
                    times[r.name].append((time.perf_counter() - t0) / iterations)
            entry = {"batch_size": bs, "fluidlite": _figures(times[fl.name]), REFERENCE: None, "speedup": None,
                     "agreement": agreement}
            if ort:
                entry[REFERENCE] = _figures(times[REFERENCE])
                entry["speedup"] = entry[REFERENCE]["median"] / entry["fluidlite"]["median"]
            batches.append(entry)
    return {"model": name, "description": mod.DESCRIPTION, "mode": "infer", "device": device, "threads": threads,
            "iterations": iterations, "warmup": warmup, "repeat": repeat, "seed": seed, "batches": batches,
            "reference": ref_doc, "passes": passes}


def format_infer(result, machine=None):
    from . import _fmt, machine_line
    lines = [machine_line(machine)] if machine else []
    lines += ["model       %s (inference): %s" % (result["model"], result["description"]),
              "threads     %d" % result["threads"],
              "passes      %s" % ("; ".join(result["passes"]) or "none")]
    ref = result["reference"]
    if ref["status"] != "ok":
        lines.append("reference   onnxruntime skipped: %s" % ref["reason"])
    else:
        tol = result["batches"][0]["agreement"]["tolerance"]
        lines.append("reference   onnxruntime %s (CPU EP, %d intra-op threads), the torch network exported with "
                     "torch.onnx.export; logits agree within rtol %g, atol %g" % (
                         ref["version"], result["threads"], tol["rtol"], tol["atol"]))
    lines.append("  %-6s %-32s %-32s %8s" % ("batch", "fluidlite ms median (min - max)",
                                            "onnxruntime ms median (min - max)", "speedup"))
    for b in result["batches"]:
        f, o = b["fluidlite"], b[REFERENCE]
        lines.append(("  %-6d %-32s %-32s %8s" % (
            b["batch_size"], "%s (%s - %s)" % (_fmt(f["median"]), _fmt(f["min"]), _fmt(f["max"])),
            "%s (%s - %s)" % (_fmt(o["median"]), _fmt(o["min"]), _fmt(o["max"])) if o else "-",
            "%.2fx" % b["speedup"] if b["speedup"] else "-")).rstrip())
    lines.append("            median of %d repeats x %d iterations after %d warm-up, interleaved; speedup = "
                 "onnxruntime ms / fluidlite ms (> 1: fluidlite is faster)" % (
                     result["repeat"], result["iterations"], result["warmup"]))
    return "\n".join(lines)
