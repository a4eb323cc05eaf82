"""``python -m fluidlite.bench``: time a model's training or inference step and describe the machine.

The runner is deliberately plain: build the model's programs, run the startup program, run ``warmup``
untimed steps, then ``repeat`` timed repetitions of ``iterations`` steps each. Each repetition gives one
ms/step figure; the summary reports their median and min-max. Models live in ``fluidlite.bench.models``.
"""
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from . import models

__all__ = ["run_model", "machine_info", "format_summary"]


def _place(device):
    import fluidlite as fluid
    if device == "cpu":
        return fluid.CPUPlace()
    if device == "gpu":
        return fluid.CUDAPlace(0)
    raise ValueError("device must be 'cpu' or 'gpu', got %r" % (device,))


def gpu_unavailable_reason():
    """None when a CUDA device can be used, else a short reason."""
    from fluidlite import core
    if not core.is_compiled_with_cuda():
        return "this fluidlite build has no CUDA support (nvcc was not found when it was built)"
    if core.get_cuda_device_count() == 0:
        return "fluidlite was built with CUDA but no CUDA device is visible"
    return None


def run_model(name, batch_size=None, iterations=None, warmup=None, repeat=None, threads=None, seed=0,
              device="cpu"):
    """Benchmark model `name`; arguments left as None take the model's DEFAULTS. Returns a dict of figures.

    A KeyboardInterrupt during the timed repetitions stops early: the figures then cover the completed
    repetitions and ``interrupted`` is True (no completed repetition re-raises it).
    """
    import fluidlite as fluid
    from fluidlite import core

    mod = models.load(name)
    cfg = dict(mod.DEFAULTS)
    for key, value in (("batch_size", batch_size), ("iterations", iterations), ("warmup", warmup),
                       ("repeat", repeat)):
        if value is not None:
            cfg[key] = value
    if threads is not None:
        core.set_num_threads(threads)
    place = _place(device)

    np.random.seed(seed)
    t0 = time.perf_counter()
    built = mod.build(cfg["batch_size"], seed)
    build_s = time.perf_counter() - t0

    exe = fluid.Executor(place)
    scope = fluid.Scope()
    per_step_s = []
    interrupted = False
    with fluid.scope_guard(scope):
        exe.run(built.startup)
        feed = built.feed()
        core.reset_peak_memory(place)
        for _ in range(cfg["warmup"]):
            exe.run(built.main, feed=feed, fetch_list=built.fetch_list)
        try:
            for _ in range(cfg["repeat"]):
                n = cfg["iterations"]
                t0 = time.perf_counter()
                for _ in range(n):
                    exe.run(built.main, feed=feed, fetch_list=built.fetch_list)
                per_step_s.append((time.perf_counter() - t0) / n)
        except KeyboardInterrupt:
            if not per_step_s:
                raise
            interrupted = True
    mem = core.memory_stats(place)

    ms = [s * 1e3 for s in per_step_s]
    med_ms = statistics.median(ms)
    num_ops = len(built.main.global_block().ops)
    return {
        "model": name,
        "description": mod.DESCRIPTION,
        "device": device,
        "batch_size": cfg["batch_size"],
        "threads": core.get_num_threads(),
        "iterations": cfg["iterations"],
        "warmup": cfg["warmup"],
        "repeat": len(ms),
        "seed": seed,
        "ops_per_step": num_ops,
        "build_s": build_s,
        "ms_per_step": {"median": med_ms, "min": min(ms), "max": max(ms), "all": ms},
        "steps_per_s": {"median": 1e3 / med_ms, "min": 1e3 / max(ms), "max": 1e3 / min(ms)},
        "samples_per_s": cfg["batch_size"] * 1e3 / med_ms,
        "us_per_op": med_ms * 1e3 / num_ops if num_ops else None,
        "peak_tensor_bytes": mem["peak_bytes"],
        "interrupted": interrupted,
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit():
    """HEAD of the checkout fluidlite is imported from, with '-dirty' if it has local edits; else None."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info():
    """CPU, cores, library versions, BLAS and git commit, for reports and --json."""
    import fluidlite
    from fluidlite import core
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "fluidlite": fluidlite.__version__,
        "blas": core.blas_info(),
        "cuda": core.is_compiled_with_cuda(),
        "git_commit": _git_commit(),
    }


def _micro_sign():
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\u00b5".encode(enc)
        return "\u00b5"
    except (UnicodeEncodeError, LookupError):
        return "u"


MICRO = _micro_sign()


def _fmt(x):
    if x >= 100:
        return "{:,.0f}".format(x)
    if x >= 1:
        return "%.2f" % x
    return "%.3g" % x


def format_summary(result, machine):
    """A short human-readable block for one model's result."""
    ms, sps = result["ms_per_step"], result["steps_per_s"]
    blas = machine["blas"]
    blas_name = " ".join(blas.get("config", "").split()[:2]) or blas.get("library", "BLAS")
    lines = [
        "fluidlite %s on %s (%d cores), %s (%s), numpy %s, python %s" % (
            machine["fluidlite"], machine["cpu_model"], machine["cpu_usable"], blas_name,
            blas.get("corename", "?"), machine["numpy"], machine["python"]),
        "model       %s: %s" % (result["model"], result["description"]),
        "device      %s" % result["device"],
        "batch size  %d" % result["batch_size"],
        "threads     %d" % result["threads"],
        "steps/s     %s  (min %s, max %s)" % (_fmt(sps["median"]), _fmt(sps["min"]), _fmt(sps["max"])),
        "ms/step     %s  (min %s, max %s; median of %d repeats x %d iterations after %d warm-up)" % (
            _fmt(ms["median"]), _fmt(ms["min"]), _fmt(ms["max"]), result["repeat"], result["iterations"],
            result["warmup"]),
        "samples/s   %s" % _fmt(result["samples_per_s"]),
    ]
    if result["us_per_op"] is not None:
        lines.append(MICRO + "s/op       %s  (%d ops per step)" % (_fmt(result["us_per_op"]), result["ops_per_step"]))
    lines.append("peak memory %s bytes in tensors" % "{:,}".format(result["peak_tensor_bytes"]))
    if result["interrupted"]:
        lines.append("(interrupted: figures cover the completed repetitions only)")
    return "\n".join(lines)
