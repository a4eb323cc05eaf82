"""``python -m fluidlite.bench --nproc N``: a model trained data-parallel on N ranks, beside what it is measured
against.

Three runs, one after the other, each a fresh set of processes:

1. fluidlite on N ranks (``mpiexec -n N python -m fluidlite.bench._rank``): each rank trains on the model's batch
   B (the global batch is N x B) with the collective rewrite (gradient buckets allreduced on the comm stream while
   backward runs); reported: step time, communication per step (the comm stream's busy time), exposed
   communication (the main thread's waits for the stream), overlap = 1 - exposed / communication, bytes
   allreduced per step and GB/s, the buckets.
2. the baseline: one process at batch N x B with N x T threads (``_rank --single``, the program as built): the
   same global batch on the same cores; scaling = its step time / the N ranks' step time (1.0: the ranks lose
   nothing to communication).
3. with ``compare=("torch",)``: PyTorch DDP (gloo) on N ranks at batch B with T threads each (``_ddp_rank``);
   speedup = DDP's step time / fluidlite's (> 1: fluidlite is faster).

Each rank's threads: T = ``threads``, else cores // N (what ``comm.init`` gives a rank).
"""
import json
import os
import subprocess
import sys
import tempfile

from ..distributed.launch import mpiexec_path as find_mpiexec
from ..distributed.launch import usable_cores
from . import models, reference

__all__ = ["find_mpiexec", "run_distributed", "format_distributed", "MPIEXEC_MISSING"]

MPIEXEC_MISSING = "mpiexec not found (beside %s or on PATH): pip install 'fluidlite[mpi]' (mpi4py and the mpich wheel)"
# What a run may take before it is killed: a lost rank fails in its collective within FLUIDLITE_COMM_TIMEOUT, this
# is the bound on everything else.
RUN_TIMEOUT_S = 1800


def _env():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("FLUIDLITE_NUM_THREADS", None)  # the ranks' threads are set by --threads alone
    return env


def _launch(cmd, out, what, timeout):
    """Runs `cmd`; returns the JSON rank 0 wrote to `out`. A failure raises RuntimeError with the tail of stderr."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s did not finish within %d s" % (what, timeout)) from None
    if r.returncode != 0 or not os.path.exists(out):
        tail = [line for line in (r.stderr or r.stdout).strip().splitlines() if line.strip()][-6:]
        raise RuntimeError("%s failed (exit code %d): %s" % (what, r.returncode, " | ".join(tail) or "no output"))
    with open(out) as f:
        return json.load(f)


def _common_args(cfg, seed):
    args = []
    for key in ("batch_size", "iterations", "warmup", "repeat"):
        if cfg.get(key) is not None:
            args += ["--" + key, str(cfg[key])]
    return args + ["--seed", str(seed)]


def run_distributed(name, nproc, threads=None, batch_size=None, iterations=None, warmup=None, repeat=None, seed=0,
                    compare=(), profile=False, timeline=None, baseline=True, fuse_grad_size_mb=None, rounds=1,
                    timeout=RUN_TIMEOUT_S):
    """The runs of the module doc for model `name`, `rounds` times in turn (so a busy machine's noise hits each
    alike); returns a dict: ``ranks`` (fluidlite's N-rank result: the last round's, its ms_per_step over every
    round's repetitions), ``baseline`` (one process at N x B, or None), ``compare`` ({"torch": DDP's result or
    {"skipped": reason}}), ``rounds`` (each round's step times and ratios), and the ratios: ``scaling`` (baseline ms /
    ranks ms) and ``vs_ddp`` (DDP ms / fluidlite ms), each the median of the rounds' ratios."""
    if nproc < 1:
        raise ValueError("--nproc must be >= 1, got %d" % nproc)
    if rounds < 1:
        raise ValueError("rounds must be >= 1, got %d" % rounds)
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise RuntimeError(MPIEXEC_MISSING % os.path.dirname(sys.executable))
    mod = models.load(name)
    per_rank = {key: value for key, value in (("batch_size", batch_size), ("iterations", iterations),
                                               ("warmup", warmup), ("repeat", repeat))}
    batch = batch_size or mod.DEFAULTS["batch_size"]
    t = threads or max(1, usable_cores() // nproc)
    out = {"model": name, "description": mod.DESCRIPTION, "nproc": nproc, "threads_per_rank": t,
           "batch_per_rank": batch, "global_batch": nproc * batch, "mpiexec": mpiexec, "compare": {}}
    ddp_reason = None
    if "torch" in (compare or ()):
        ddp_reason = reference.availability("torch")
        if ddp_reason is None and reference.factory(mod, "torch") is None:
            ddp_reason = "no torch reference for this model"
        if ddp_reason is not None:
            out["compare"]["torch"] = {"skipped": ddp_reason}
    for other in compare or ():
        if other != "torch":
            out["compare"][other] = {"skipped": "--nproc compares with PyTorch DDP only"}
    run_ddp = "torch" in (compare or ()) and ddp_reason is None
    runs = {"ranks": [], "baseline": [], "torch": []}
    with tempfile.TemporaryDirectory(prefix="fluidlite-bench-") as tmp:
        for k in range(rounds):
            last = k == rounds - 1
            path = os.path.join(tmp, "ranks.json")
            cmd = [mpiexec, "-n", str(nproc), sys.executable, "-m", "fluidlite.bench._rank", name, path,
                   "--threads", str(t)] + _common_args(per_rank, seed)
            if fuse_grad_size_mb is not None:
                cmd += ["--fuse_grad_size_mb", str(fuse_grad_size_mb)]
            if profile and last:
                cmd.append("--profile")
            if timeline and last:
                cmd += ["--timeline", os.path.abspath(timeline)]
            runs["ranks"].append(_launch(cmd, path, "fluidlite on %d ranks" % nproc, timeout))
            if baseline:
                path = os.path.join(tmp, "single.json")
                cmd = [sys.executable, "-m", "fluidlite.bench._rank", name, path, "--single",
                       "--threads", str(nproc * t)] + _common_args(dict(per_rank, batch_size=nproc * batch), seed)
                runs["baseline"].append(_launch(cmd, path, "the 1-process baseline", timeout))
            if run_ddp:
                path = os.path.join(tmp, "ddp.json")
                cmd = [mpiexec, "-n", str(nproc), sys.executable, "-m", "fluidlite.bench._ddp_rank", name, path,
                       os.path.join(tmp, "ddp%d.store" % k), "--threads", str(t)] + _common_args(per_rank, seed)
                runs["torch"].append(_launch(cmd, path, "PyTorch DDP on %d ranks" % nproc, timeout))
    out["ranks"] = _merged(runs["ranks"])
    out["baseline"] = _merged(runs["baseline"]) if runs["baseline"] else None
    if run_ddp:
        out["compare"]["torch"] = _merged(runs["torch"])
    out["rounds"] = []
    for k in range(rounds):
        r = {"ranks_ms": runs["ranks"][k]["ms_per_step"]["median"]}
        if runs["baseline"]:
            r["baseline_ms"] = runs["baseline"][k]["ms_per_step"]["median"]
            r["scaling"] = r["baseline_ms"] / r["ranks_ms"]
        if runs["torch"] and "ms_per_step" in runs["torch"][k]:
            r["ddp_ms"] = runs["torch"][k]["ms_per_step"]["median"]
            r["vs_ddp"] = r["ddp_ms"] / r["ranks_ms"]
        out["rounds"].append(r)
    out["scaling"] = _median_of(out["rounds"], "scaling")
    out["vs_ddp"] = _median_of(out["rounds"], "vs_ddp")
    return out


def _median_of(rounds, key):
    import statistics
    values = [r[key] for r in rounds if key in r]
    return statistics.median(values) if values else None


def _merged(results):
    """The last round's result with ms_per_step over every round's repetitions."""
    from ._rank import spread
    out = dict(results[-1])
    if "ms_per_step" in out:
        out["ms_per_step"] = spread([x for r in results for x in r["ms_per_step"]["all"]])
        out["repeat"] = len(out["ms_per_step"]["all"])
    return out


def _fmt(x):
    return "%.3g" % x if abs(x) < 100 else "%.0f" % x


def _ms(s):
    return "%s (%s - %s)" % (_fmt(s["median"]), _fmt(s["min"]), _fmt(s["max"]))


def _per_round(result, key, scale, unit):
    values = [r[key] for r in result["rounds"] if key in r]
    if len(values) < 2:
        return ""
    return " (median of %d rounds: %s)" % (len(values), ", ".join(("%.1f" if scale == 100 else "%.2f") % (scale * v)
                                                                 + unit.replace("%%", "%") for v in values))


def format_distributed(result, machine_line=None):
    """The human-readable block of one model's --nproc run."""
    r, n, t = result["ranks"], result["nproc"], result["threads_per_rank"]
    lines = [machine_line] if machine_line else []
    lines += [
        "model       %s: %s" % (result["model"], result["description"]),
        "ranks       %d x %d thread%s (mpiexec: %s)" % (n, t, "" if t == 1 else "s", result["mpiexec"]),
        "batch       %d per rank; global batch %d x %d = %d" % (result["batch_per_rank"], n, result["batch_per_rank"],
                                                               result["global_batch"]),
        "ms/step     %s  (median (min - max) of %d repeats x %d iterations after %d warm-up%s; rank medians %s)" % (
            _ms(r["ms_per_step"]), r["repeat"], r["iterations"], r["warmup"],
            ", in %d rounds alternating with the runs below" % len(result["rounds"]) if len(result["rounds"]) > 1
            else "",
            ", ".join(_fmt(x) for x in r.get("rank_ms_per_step", []))),
        "samples/s   %s (global)" % _fmt(result["global_batch"] * 1e3 / r["ms_per_step"]["median"]),
    ]
    c, b = r["comm"], r["buckets"]
    lines += [
        "comm        %s ms/step on the comm stream; exposed (main thread waiting) %s ms/step = %.1f %% of the step"
        % (_ms(c["ms_per_step"]), _ms(c["exposed_ms_per_step"]), 100 * c["exposed_share"]["median"]),
        "            per rank %s ms/step (a stream's time includes waiting for the last rank to join: the smallest is "
        "nearest the transfer, the rest is skew)" % ", ".join(_fmt(x) for x in r.get("rank_comm_ms_per_step", [])),
        "overlap     %.3f  (min %.3f, max %.3f; 1 - exposed / comm)" % (
            c["overlap"]["median"], c["overlap"]["min"], c["overlap"]["max"]),
        "allreduce   %d bytes/step in %g collectives/step, %s GB/s (payload / comm time)" % (
            c["bytes_per_step"], c["collectives_per_step"], _ms(c["gb_per_s"])),
        "buckets     %d (%s bytes; fuse_grad_size_in_MB %g)" % (b["count"], ", ".join(str(x) for x in b["bytes"]),
                                                               b["fuse_grad_size_mb"]),
    ]
    base = result.get("baseline")
    if base:
        lines.append("1 process   %s ms/step at batch %d x %d threads; %d ranks reach %.1f %% of its throughput%s" % (
            _ms(base["ms_per_step"]), base["batch_per_rank"], base["threads"], n, 100 * result["scaling"],
            _per_round(result, "scaling", 100, " %%")))
    for fw, e in sorted(result.get("compare", {}).items()):
        if "skipped" in e:
            lines.append("%-11s skipped: %s" % (fw, e["skipped"]))
        else:
            lines.append("torch DDP   %s ms/step (gloo, %d ranks x %d threads, torch %s); speedup %.2fx "
                         "(DDP ms / fluidlite ms, > 1: fluidlite is faster)" % (
                             _ms(e["ms_per_step"]), e["nranks"], e["threads"], e["torch"], result["vs_ddp"])
                         + _per_round(result, "vs_ddp", 1, "x"))
    prof = r.get("profile")
    if prof and prof.get("timeline"):
        lines.append("timeline    %s (rank 0's profiled repetition)" % prof["timeline"])
    return "\n".join(lines)
