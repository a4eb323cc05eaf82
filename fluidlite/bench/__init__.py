"""``python -m fluidlite.bench``: time a model's training or inference step and describe the machine.

The runner is deliberately plain: build the model's programs, run the startup program, run ``warmup``
untimed steps, then ``repeat`` timed repetitions of ``iterations`` steps each. Each repetition gives one
ms/step figure; the summary reports their median and min-max. Models live in ``fluidlite.bench.models``,
reference implementations for ``--compare`` next to them (see ``fluidlite.bench.reference``).

Also measured: program construction (time, and the Program/Block/Variable/Operator objects created,
with ``append_backward`` separately; see ``_measure``), the allocator's peak tensor bytes, and the peak
RSS growth during the timed steps. With ``compare``, references run interleaved with fluidlite (round
robin over repetitions, so machine noise hits each alike, with a short pause before each repetition so
one framework's idle-spinning threads do not slow the next) after their first step was checked against
fluidlite's, and each framework's memory footprint is measured in a fresh subprocess (``_memprobe``).
"""
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from . import _measure, models, reference
from ._measure import seconds_per_call

__all__ = ["run_model", "machine_info", "format_summary", "format_compare", "format_bytes", "seconds_per_call",
           "AgreementError", "measure_footprint"]


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


class AgreementError(RuntimeError):
    """A reference framework's first step disagrees with fluidlite's: the comparison would time a
    different computation."""


class _Fluidlite:
    """fluidlite's side of a run: the model's programs built (construction counted), startup run."""
    name = "fluidlite"

    def __init__(self, mod, batch_size, seed, place):
        import fluidlite as fluid
        with _measure.count_construction() as construction:
            t0 = time.perf_counter()
            built = mod.build(batch_size, seed)
            build_s = time.perf_counter() - t0
        self.built, self.feed_dict, self.fetch_list = built, built.feed(), built.fetch_list
        self.exe = fluid.Executor(place)
        self.scope = fluid.Scope()
        t0 = time.perf_counter()
        self.exe.run(built.startup, scope=self.scope)
        startup_s = time.perf_counter() - t0
        ab = construction["append_backward"]
        self.construction = {
            "build_ms": build_s * 1e3,
            "append_backward_ms": ab["s"] * 1e3,
            "forward_and_optimizer_ms": (build_s - ab["s"]) * 1e3,
            "append_backward_calls": ab["calls"],
            "created": construction["created"],
            "created_by_append_backward": ab["created"],
            "in_programs": _measure.program_counts([built.main, built.startup]),
            "startup_run_ms": startup_s * 1e3,
        }

    def params(self):
        names = sorted(p.name for p in self.built.main.global_block().all_parameters())
        return {n: np.array(self.scope.find_var(n).get_tensor()) for n in names}

    def step(self):
        return self.exe.run(self.built.main, feed=self.feed_dict, fetch_list=self.fetch_list, scope=self.scope)[0]


def _first(value):
    return np.asarray(value, dtype=np.float64).ravel()


def _agree(ours, theirs, tol):
    a, b = _first(ours), _first(theirs)
    return a.shape == b.shape and bool(np.allclose(b, a, rtol=tol["rtol"], atol=tol["atol"]))


def _show(value):
    v = _first(value)
    return ("%.7g" % v[0]) if v.size == 1 else "[%s%s] (%d values)" % (
        ", ".join("%.7g" % x for x in v[:3]), ", ..." if v.size > 3 else "", v.size)


def _references(mod, fl, frameworks, threads, device="cpu"):
    """[(name, runner or None, skip reason or None)] for the requested frameworks, in the order given. With device
    "gpu" only torch runs there (its implementation moved to CUDA); the others are CPU frameworks and are skipped."""
    out = []
    params = feed = None
    perturb = os.environ.get(reference.PERTURB_ENV, "")
    for fw in frameworks:
        reason = reference.availability(fw)
        make = reference.factory(mod, fw)
        if reason is None and make is None:
            reason = "no %s reference for this model" % fw
        if reason is None and device == "gpu" and fw != "torch":
            reason = "%s runs on the CPU only (--device gpu compares with torch on CUDA)" % fw
        if reason is None and device == "gpu":
            import torch
            if not torch.cuda.is_available():
                reason = "this torch cannot use CUDA (torch.cuda.is_available() is False)"
            else:  # the same arithmetic as fluidlite's: FP32 products and convolutions, no TF32
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
        if reason is not None:
            out.append((fw, None, reason))
            continue
        if params is None:
            params, feed = fl.params(), reference.plain_feed(fl.feed_dict)
        p, f = reference.perturbed(params, feed) if fw == perturb else (params, feed)
        if fw == "torch":
            reference.set_torch_threads(threads)
        elif fw == "numpy":
            reference.set_numpy_threads(threads)
        elif fw == "paddle":
            reference.set_paddle_threads(threads)
        impl = make(p, f)
        if device == "gpu":
            impl = _SyncedTorch(reference.torch_to_device(impl, "cuda"))
        out.append((fw, _Reference(fw, impl), None))
    return out


class _SyncedTorch:
    """A torch implementation on CUDA whose step returns after the GPU finished it (torch queues kernels; the
    step's loss copy to the host waits for them, but a step that returns nothing would not)."""

    def __init__(self, impl):
        import torch
        self.impl, self._sync = impl, torch.cuda.synchronize
        self.note = getattr(impl, "note", None)

    def step(self):
        out = self.impl.step()
        self._sync()
        return out


class _Reference:
    """A reference implementation under its framework's name (``step`` is the implementation's; ``note``, if the
    implementation has one, says where it computes the model differently, e.g. padded instead of LoD)."""

    def __init__(self, name, impl):
        self.name, self.impl, self.step = name, impl, impl.step
        self.note = getattr(impl, "note", None)


def _progress(total, desc, enabled):
    """A tqdm bar on stderr (shown after 2 s, only on a terminal), or a no-op."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, delay=2.0, leave=False, dynamic_ncols=True)


# Pause before each framework's timed repetition when several are compared: a BLAS or OpenMP runtime
# keeps its threads spinning for a while after its last call (OpenBLAS for ~0.1 s), which would take
# cores from whichever framework runs next.
SETTLE_SECONDS = 0.25


def run_model(name, batch_size=None, iterations=None, warmup=None, repeat=None, threads=None, seed=0,
              device="cpu", compare=(), profile=False, sorted_key=None, timeline=None, cprofile=None,
              progress=True, footprint=None, record=False, advise=False):
    """Benchmark model `name`; arguments left as None take the model's DEFAULTS. Returns a dict of figures.

    compare: reference frameworks ("torch", "paddle", "numpy") timed interleaved with fluidlite after
    their first step's result was checked against fluidlite's (AgreementError if it differs).
    profile / timeline: fluidlite's profiler records the timed steps; the report goes to
    result["profile"]["report"], the Chrome trace to `timeline`. record: profile the timed steps without a
    report (for save_profile / diff: the events stay in fluid.profiler.events()). When profiling, each
    fluidlite step is also timed alone: result["profile"]["step_ms"]. cprofile: path of a pstats file covering
    the model's whole run (construction, append_backward, startup, warm-up, timed steps).
    advise: profile the timed steps and put fluid.profiler.advise()'s findings in result["advice"] (dicts) and
    its text in result["advice_text"].
    footprint: measure each framework's peak RSS growth in a fresh subprocess (default: when comparing).

    A KeyboardInterrupt during the timed repetitions stops early: the figures then cover the completed
    repetitions and ``interrupted`` is True (no completed fluidlite repetition re-raises it).
    """
    from fluidlite import core
    from fluidlite import profiler as fl_profiler

    mod = models.load(name)
    cfg = dict(mod.DEFAULTS)
    for key, value in (("batch_size", batch_size), ("iterations", iterations), ("warmup", warmup),
                       ("repeat", repeat)):
        if value is not None:
            cfg[key] = value
    if threads is not None:
        core.set_num_threads(threads)
    place = _place(device)
    compare = list(compare or ())
    if footprint is None:
        footprint = bool(compare)

    prof = None
    if cprofile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    try:
        np.random.seed(seed)
        fl = _Fluidlite(mod, cfg["batch_size"], seed, place)
        refs = _references(mod, fl, compare, core.get_num_threads(), device)
        runners = [fl] + [r for _, r, _ in refs if r is not None]

        agreement = None
        if len(runners) > 1:
            tol = reference.tolerance(mod)
            first = {fl.name: fl.step()}
            for r in runners[1:]:
                first[r.name] = r.step()
            agreement = {"tolerance": tol, "first_step": {k: _first(v).tolist() for k, v in first.items()}}
            bad = [r.name for r in runners[1:] if not _agree(first[fl.name], first[r.name], tol)]
            if bad:
                raise AgreementError("first-step result of %s differs from fluidlite's beyond rtol %g, atol %g "
                                     "(%s): not the same computation, nothing was timed" % (
                                         ", ".join(bad), tol["rtol"], tol["atol"],
                                         "; ".join("%s %s" % (k, _show(v)) for k, v in first.items())))

        total = len(runners) * (cfg["warmup"] + cfg["repeat"] * cfg["iterations"])
        bar = _progress(total, name, progress)
        times = {r.name: [] for r in runners}
        rss_timed = {r.name: None for r in runners}
        peak = _measure.PeakRSS()
        interrupted = False
        profiling = bool(profile or timeline or record or advise)
        step_s = []  # per-step times of fluidlite's profiled steps: a profile diff's noise band
        try:
            core.reset_peak_memory(place)
            for r in runners:
                for _ in range(cfg["warmup"]):
                    r.step()
                if bar is not None:
                    bar.update(cfg["warmup"])
            if profiling:
                fl_profiler.start_profiler("All" if device == "gpu" else "CPU")
            try:
                n = cfg["iterations"]
                for _ in range(cfg["repeat"]):
                    for r in runners:
                        step = r.step
                        if len(runners) > 1:
                            time.sleep(SETTLE_SECONDS)
                        peak.start()
                        t0 = time.perf_counter()
                        if profiling and r is fl:
                            for _ in range(n):
                                s0 = time.perf_counter()
                                step()
                                step_s.append(time.perf_counter() - s0)
                        else:
                            for _ in range(n):
                                step()
                        dt = time.perf_counter() - t0
                        grown = peak.stop()
                        times[r.name].append(dt / n)
                        if grown is not None:
                            rss_timed[r.name] = max(grown, rss_timed[r.name] or 0)
                        if bar is not None:
                            bar.update(n)
            except KeyboardInterrupt:
                if not times[fl.name]:
                    raise
                interrupted = True
        finally:
            if bar is not None:
                bar.close()
            profile_doc = None
            if profiling:
                fl_profiler.stop_profiler(sorted_key, profile_path=None, print_report=False)
                profile_doc = {"sorted_key": sorted_key, "timeline": timeline,
                               "report": fl_profiler.report(sorted_key) if profile else None,
                               "rows": fl_profiler.summary(sorted_key), "step_ms": [s * 1e3 for s in step_s]}
                if timeline:
                    fl_profiler.export_chrome_trace(timeline)
                if advise:
                    advice = fl_profiler.advise(print_report=False)
                    profile_doc["advice"] = [f.to_dict() for f in advice]
                    profile_doc["advice_text"] = fl_profiler.advisor.format_findings(advice)
    finally:
        if prof is not None:
            prof.disable()
    mem = core.memory_stats(place)

    cprofile_doc = None
    if prof is not None:
        cprofile_doc = _write_cprofile(prof, cprofile)

    def figures(ms):
        med_ms = statistics.median(ms)
        return {"ms_per_step": {"median": med_ms, "min": min(ms), "max": max(ms), "all": ms},
                "steps_per_s": {"median": 1e3 / med_ms, "min": 1e3 / max(ms), "max": 1e3 / min(ms)},
                "samples_per_s": cfg["batch_size"] * 1e3 / med_ms}

    ms = [s * 1e3 for s in times[fl.name]]
    num_ops = len(fl.built.main.global_block().ops)
    result = {
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
        "build_s": fl.construction["build_ms"] / 1e3,
        "construction": fl.construction,
    }
    result.update(figures(ms))
    result["us_per_op"] = result["ms_per_step"]["median"] * 1e3 / num_ops if num_ops else None
    result["peak_tensor_bytes"] = mem["peak_bytes"]
    result["memory"] = {"peak_tensor_bytes": mem["peak_bytes"], "rss_timed_growth_bytes": rss_timed[fl.name],
                        "rss_method": peak.method}
    if compare:
        import fluidlite
        fws = [{"framework": "fluidlite", "status": "ok", "version": fluidlite.__version__}]
        for fw, runner, reason in refs:
            fws.append({"framework": fw, "status": "skipped" if runner is None else "ok", "reason": reason,
                        "version": reference.version(fw) if runner is not None else None})
            if runner is not None and runner.note:
                fws[-1]["note"] = runner.note
        med = result["ms_per_step"]["median"]
        for entry in fws:
            t = times.get(entry["framework"]) if entry["status"] == "ok" else None
            if t:
                entry.update(figures([s * 1e3 for s in t]))
                entry["repeat"] = len(t)
                entry["fluidlite_speedup"] = entry["ms_per_step"]["median"] / med
                entry["rss_timed_growth_bytes"] = rss_timed[entry["framework"]]
        if footprint and not interrupted:  # after Ctrl-C, report what was measured and stop
            for entry in fws:
                if entry["status"] == "ok":
                    entry["rss_footprint"] = measure_footprint(name, entry["framework"], cfg["batch_size"], seed,
                                                               core.get_num_threads())
        result["compare"] = {"frameworks": fws, "agreement": agreement}
    if profile_doc is not None:
        if advise:
            result["advice"], result["advice_text"] = profile_doc.pop("advice"), profile_doc.pop("advice_text")
        result["profile"] = profile_doc
    if cprofile_doc is not None:
        result["cprofile"] = cprofile_doc
    result["interrupted"] = interrupted
    return result


FOOTPRINT_STEPS = 5


def measure_footprint(model, framework, batch_size, seed, threads, steps=FOOTPRINT_STEPS, timeout=300):
    """Peak RSS growth of building `model` in `framework` and running `steps` steps, measured in a fresh
    subprocess (``python -m fluidlite.bench._memprobe``) so no other framework's memory is in the figure.
    Returns {"bytes", "method", "steps"} or {"error"}."""
    cmd = [sys.executable, "-m", "fluidlite.bench._memprobe", model, framework, str(batch_size), str(seed),
           str(threads), str(steps)]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["exit code %d" % r.returncode])[-1]
        return {"error": tail}
    import json
    return json.loads(lines[-1])


CPROFILE_TOP = 15


def _write_cprofile(prof, path):
    import io
    import pstats
    prof.dump_stats(path)
    buf = io.StringIO()
    stats = pstats.Stats(path, stream=buf)
    stats.sort_stats("cumulative").print_stats(CPROFILE_TOP)
    top = []
    slowest = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:CPROFILE_TOP]
    for (filename, line, func), (_cc, nc, tt, ct, _) in slowest:
        top.append({"function": "%s:%d(%s)" % (filename, line, func), "calls": nc, "tottime_s": tt, "cumtime_s": ct})
    return {"path": path, "text": buf.getvalue(), "top": top}


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


def machine_line(machine):
    blas = machine["blas"]
    blas_name = " ".join(blas.get("config", "").split()[:2]) or blas.get("library", "BLAS")
    line = "fluidlite %s on %s (%d cores), %s (%s), numpy %s, python %s" % (
        machine["fluidlite"], machine["cpu_model"], machine["cpu_usable"], blas_name,
        blas.get("corename", "?"), machine["numpy"], machine["python"])
    load = machine.get("background_load")
    return line + (", with %d busy background process%s (--background-load)" % (load, "" if load == 1 else "es")
                   if load else "")


def format_summary(result, machine=None):
    """A short human-readable block for one model's result (headed by the machine line if given)."""
    ms, sps = result["ms_per_step"], result["steps_per_s"]
    lines = [machine_line(machine)] if machine else []
    lines += [
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
    c = result["construction"]
    cr, ab = c["created"], c["created_by_append_backward"]
    lines.append("build       %s ms: %d programs, %d blocks, %d variables, %d operators created" % (
        _fmt(c["build_ms"]), cr["programs"], cr["blocks"], cr["variables"], cr["operators"]))
    lines.append("            append_backward %s ms (%d variables, %d operators of those); forward + optimizer %s ms;"
                 " startup run %s ms" % (_fmt(c["append_backward_ms"]), ab["variables"], ab["operators"],
                                         _fmt(c["forward_and_optimizer_ms"]), _fmt(c["startup_run_ms"])))
    m = result["memory"]
    lines.append("memory      peak %s in tensors (allocator); peak RSS growth during the timed steps %s" % (
        format_bytes(m["peak_tensor_bytes"]), format_bytes(m["rss_timed_growth_bytes"])))
    if result.get("compare"):
        lines.append(format_compare(result))
    if result.get("cprofile"):
        lines.append("cprofile    %s (top %d by cumulative time above)" % (result["cprofile"]["path"], CPROFILE_TOP))
    if result.get("profile") and result["profile"]["timeline"]:
        lines.append("timeline    %s (open in https://ui.perfetto.dev or chrome://tracing)"
                     % result["profile"]["timeline"])
    if result["interrupted"]:
        lines.append("(interrupted: figures cover the completed repetitions only)")
    return "\n".join(lines)


def format_bytes(n):
    """n bytes as "1.5 MiB" etc.; "n/a" for None."""
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return "%.1f %s" % (n / size, unit)
    return "%d B" % n


def format_compare(result):
    """The side-by-side table of a --compare run."""
    comp = result["compare"]
    agreement = comp["agreement"]
    lines = []
    if agreement:
        tol = agreement["tolerance"]
        lines.append("compare     same weights and batch; first-step result agrees within rtol %g, atol %g: %s" % (
            tol["rtol"], tol["atol"], ", ".join("%s %s" % (k, _show(v)) for k, v in agreement["first_step"].items())))
    else:
        lines.append("compare     (no reference framework available)")
    fp = any("rss_footprint" in e for e in comp["frameworks"])
    header = "  %-10s %-30s %10s %10s %18s" % ("framework", "ms/step median (min - max)", "steps/s", "speedup",
                                                 "RSS growth timed")
    if fp:
        header += " %16s" % "RSS footprint"
    lines += [header]
    for e in comp["frameworks"]:
        if e["status"] != "ok":
            lines.append("  %-10s skipped: %s" % (e["framework"], e["reason"]))
            continue
        if "ms_per_step" not in e:
            lines.append("  %-10s (interrupted before a timed repetition)" % e["framework"])
            continue
        ms = e["ms_per_step"]
        line = "  %-10s %-30s %10s %9.2fx %18s" % (
            e["framework"], "%s (%s - %s)" % (_fmt(ms["median"]), _fmt(ms["min"]), _fmt(ms["max"])),
            _fmt(e["steps_per_s"]["median"]), e["fluidlite_speedup"], format_bytes(e["rss_timed_growth_bytes"]))
        if fp:
            f = e.get("rss_footprint") or {}
            line += " %16s" % (format_bytes(f["bytes"]) if f.get("bytes") is not None else "error")
        lines.append(line.rstrip())
    for e in comp["frameworks"]:
        if e.get("note"):
            lines.append("  %-10s note: %s" % (e["framework"], e["note"]))
    lines.append("            speedup = framework ms/step / fluidlite ms/step (> 1: fluidlite is faster); "
                 "RSS footprint: peak RSS growth of building the model and running %d steps in a fresh process"
                 % FOOTPRINT_STEPS if fp else
                 "            speedup = framework ms/step / fluidlite ms/step (> 1: fluidlite is faster)")
    return "\n".join(lines)
