"""`python -m fluidlite.bench`: summary, flags, --json schema, --compare (agreement, missing references),
instrumentation (--profile, --timeline, --cprofile, --glog_v), memory figures, Ctrl-C, errors and exit codes."""
import json
import os
import pstats
import re
import signal
import subprocess
import sys
import time

import pytest

import numpy as np

from fluidlite import bench, core
from fluidlite.bench import _measure, models, reference, run_model

FAST = ["--iterations", "3", "--warmup", "1", "--repeat", "2"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAS_TORCH = reference.availability("torch") is None
HAS_PADDLE = reference.availability("paddle") is None


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def run_cli(*args, hide=(), env=None, timeout=120):
    """Run the CLI in a subprocess; `hide` lists modules made unimportable (sys.modules[name] = None)."""
    if hide:
        code = ("import runpy, sys\nfor m in %r: sys.modules[m] = None\nsys.argv = ['fluidlite.bench'] + %r\n"
                "runpy.run_module('fluidlite.bench', run_name='__main__', alter_sys=True)" % (list(hide), list(args)))
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, "-m", "fluidlite.bench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(**(env or {})))


def test_default_run_is_the_mlp_and_prints_summary():
    r = run_cli(*FAST)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for field in ("model       mlp", "batch size  64", "threads", "steps/s", "ms/step", "samples/s",
                  "s/op", "min", "max", "median of 2 repeats x 3 iterations after 1 warm-up",
                  "append_backward", "peak RSS growth during the timed steps"):
        assert field in out, (field, out)
    m = re.search(r"build +[\d.]+ ms: (\d+) programs, (\d+) blocks, (\d+) variables, (\d+) operators created", out)
    assert m and int(m.group(1)) >= 2 and int(m.group(4)) > 10, out
    assert r.stderr == ""  # no progress bar: stderr is not a terminal


def test_flags_reach_the_run(tmp_path):
    path = tmp_path / "r.json"
    r = run_cli("--model", "overhead", "--batch_size", "8", "--threads", "1", "--seed", "3", "--device", "cpu",
                "--json", str(path), "--no_progress", *FAST)
    assert r.returncode == 0, r.stderr
    assert "batch size  8" in r.stdout and "threads     1" in r.stdout
    res = json.loads(path.read_text())["results"][0]
    assert (res["model"], res["batch_size"], res["threads"], res["seed"], res["iterations"], res["warmup"],
            res["repeat"]) == ("overhead", 8, 1, 3, 3, 1, 2)


def test_json_schema(tmp_path):
    path = tmp_path / "out.json"
    r = run_cli("--model", "overhead", "--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    assert doc["schema"] == 2 and doc["exit_code"] == 0
    machine = doc["machine"]
    for key in ("cpu_model", "cpu_count", "cpu_usable", "python", "numpy", "fluidlite", "blas", "git_commit"):
        assert key in machine, key
    assert machine["blas"]["library"] == "scipy-openblas32"
    res, = doc["results"]
    for key in ("model", "device", "batch_size", "threads", "iterations", "warmup", "repeat", "seed",
                "ops_per_step", "ms_per_step", "steps_per_s", "samples_per_s", "us_per_op", "peak_tensor_bytes",
                "construction", "memory", "interrupted"):
        assert key in res, key
    ms = res["ms_per_step"]
    assert len(ms["all"]) == 2 and ms["min"] <= ms["median"] <= ms["max"]
    assert res["ops_per_step"] == 1000
    assert res["samples_per_s"] == pytest.approx(res["batch_size"] * res["steps_per_s"]["median"])
    assert res["us_per_op"] == pytest.approx(ms["median"] * 1e3 / 1000)
    c = res["construction"]
    assert c["in_programs"]["operators"] == 1000 and c["created"]["operators"] >= 1000
    assert c["append_backward_calls"] == 0 and c["build_ms"] > 0
    mem = res["memory"]
    assert mem["peak_tensor_bytes"] == res["peak_tensor_bytes"] > 0
    assert mem["rss_timed_growth_bytes"] >= 0 and "VmHWM" in mem["rss_method"]
    assert "compare" not in res and "profile" not in res and "cprofile" not in res


def test_model_all_runs_every_model(tmp_path):
    path = tmp_path / "all.json"
    r = run_cli("--model", "all", "--json", str(path), "--iterations", "2", "--warmup", "0", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    assert [res["model"] for res in doc["results"]] == list(models.MODELS)
    assert r.stdout.count("fluidlite %s on" % doc["machine"]["fluidlite"]) == 1  # machine line once
    for name in models.MODELS:
        assert "model       %s:" % name in r.stdout


def _frameworks(res):
    return {e["framework"]: e for e in res["compare"]["frameworks"]}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_compare_torch_paddle_numpy(tmp_path):
    path = tmp_path / "c.json"
    r = run_cli("--model", "mlp", "--batch_size", "16", "--compare", "torch,paddle,numpy", "--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    res, = json.loads(path.read_text())["results"]
    fws = _frameworks(res)
    assert list(fws) == ["fluidlite", "torch", "paddle", "numpy"]
    for name in ("fluidlite", "torch", "numpy"):
        e = fws[name]
        assert e["status"] == "ok" and len(e["ms_per_step"]["all"]) == 2
        assert e["fluidlite_speedup"] == pytest.approx(e["ms_per_step"]["median"] / res["ms_per_step"]["median"])
        assert e["rss_timed_growth_bytes"] >= 0
        assert e["rss_footprint"]["bytes"] > 0, e
    if not HAS_PADDLE:
        assert fws["paddle"] == {"framework": "paddle", "status": "skipped", "reason": "not installed", "version": None}
        assert re.search(r"paddle +skipped: not installed", r.stdout), r.stdout
    assert fws["torch"]["version"].startswith("2.")
    first = res["compare"]["agreement"]["first_step"]
    assert first["torch"] == pytest.approx(first["fluidlite"], rel=1e-4)
    for name in ("torch", "numpy"):
        assert re.search(r"^  %s +[\d.]+ \([\d.]+ - [\d.]+\) +[\d,.]+ +[\d.]+x" % name, r.stdout, re.M), r.stdout
    assert "first-step result agrees" in r.stdout
    # docs/benchmarks.md is rendered from such a file
    doc = json.loads(path.read_text())
    text = _make_table().render(doc, "python -m fluidlite.bench --model mlp --compare torch,paddle,numpy")
    row = re.search(r"^\| `mlp` \| 16 \| \d+ \| ([^|]+)\| ([^|]+)\| ([^|]+)\| ([^|]+)\| ([^|]+)\|", text, re.M)
    assert row, text
    assert row.group(3).strip() == ("not installed" if not HAS_PADDLE else row.group(3).strip())
    assert "**%.2f×**" % fws["torch"]["fluidlite_speedup"] in text
    assert "- PyTorch: %s" % fws["torch"]["version"] in text
    assert "## Memory" in text and "## Program construction" in text and "OPENBLAS_CORETYPE" in text


def _make_table():
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_table", os.path.join(ROOT, "benchmarks", "make_table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compare_with_torch_missing():
    r = run_cli("--model", "fit_a_line", "--compare", "torch,numpy", *FAST, hide=["torch"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"torch +skipped: not installed", r.stdout), r.stdout
    assert re.search(r"^  numpy +[\d.]+", r.stdout, re.M), r.stdout


@pytest.mark.parametrize("model, framework", [("overhead", "numpy"), ("mlp", "numpy")]
                         + ([("fit_a_line", "torch")] if HAS_TORCH else []))
def test_agreement_check_fails_loudly(model, framework, tmp_path):
    path = tmp_path / "never.json"
    r = run_cli("--model", model, "--batch_size", "4", "--compare", framework, "--json", str(path), *FAST,
                env={reference.PERTURB_ENV: framework})
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "AGREEMENT CHECK FAILED for model %s" % model in r.stderr
    assert framework in r.stderr and "nothing was timed" in r.stderr
    assert "steps/s" not in r.stdout and not path.exists()


def test_profile_and_timeline(tmp_path):
    trace_path = tmp_path / "trace.json"
    r = run_cli("--model", "fit_a_line", "--profile", "--sorted_key", "total", "--timeline", str(trace_path), *FAST)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Profiling Report" in out and "Sorted by total time in descending order" in out, out
    rows = [line.split() for line in out.split("Profiling Report")[1].split("Memcpy Summary")[0].splitlines()
            if line.startswith("thread")]
    totals = [float(row[2]) for row in rows]
    assert rows and totals == sorted(totals, reverse=True)
    names = {row[0].split("::", 1)[1] for row in rows}
    # fit_a_line's mean(square_error_cost) runs as one fused_reduce (fuse_reductions, on by default)
    assert {"mul", "sgd", "fused_reduce"} <= names, names
    calls = {row[0].split("::", 1)[1]: int(row[1]) for row in rows}
    assert calls["sgd"] == 2 * 3 * 2  # 2 parameters x 3 iterations x 2 repeats: the timed steps only
    trace = json.loads(trace_path.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert xs and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in xs)
    assert sum(e["name"] == "sgd" for e in xs) == 12
    assert "timeline    %s" % trace_path in out


def test_timeline_alone_prints_no_report(tmp_path):
    trace_path = tmp_path / "t.json"
    r = run_cli("--model", "fit_a_line", "--timeline", str(trace_path), *FAST)
    assert r.returncode == 0, r.stderr
    assert "Profiling Report" not in r.stdout and json.loads(trace_path.read_text())["traceEvents"]


def test_cprofile_file_loads(tmp_path):
    path = tmp_path / "p.pstats"
    r = run_cli("--model", "fit_a_line", "--cprofile", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    stats = pstats.Stats(str(path))
    funcs = {(os.path.basename(f), name) for f, _, name in stats.stats}
    assert ("framework.py", "__init__") in funcs and ("backward.py", "append_backward") in funcs
    assert ("executor.py", "run") in funcs
    assert "cumulative" in r.stdout and "function calls" in r.stdout
    assert "cprofile    %s" % path in r.stdout


def test_glog_v_prints_op_lines():
    r = run_cli("--model", "overhead", "--batch_size", "2", "--iterations", "1", "--warmup", "0", "--repeat", "1",
                "--glog_v", "3")
    assert r.returncode == 0, r.stderr
    # the chain of scale ops runs fused (fuse_elementwise_chains) unless the pass is off
    op_line = r"^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ operator\.cc:\d+\] CPUPlace Op\((scale|fused_elementwise)\)"
    assert re.search(op_line, r.stderr, re.M), r.stderr[:500]


def test_ctrl_c_prints_what_was_measured(tmp_path):
    path = tmp_path / "partial.json"
    p = subprocess.Popen([sys.executable, "-m", "fluidlite.bench", "--model", "overhead", "--iterations", "100",
                          "--warmup", "0", "--repeat", "1000000", "--json", str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env())
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted: figures cover the completed repetitions only" in out and "steps/s" in out
    doc = json.loads(path.read_text())
    assert doc["exit_code"] == 130 and doc["results"][0]["interrupted"] and doc["results"][0]["repeat"] >= 1


def test_interrupt_in_process_keeps_completed_repetitions(monkeypatch):
    import fluidlite.bench as bench
    calls = {"n": 0}
    step = bench._Fluidlite.step

    def interrupting(self):
        calls["n"] += 1
        if calls["n"] == 1 + 3 + 2:  # warm-up 1, first repetition 3, then Ctrl-C inside the second
            raise KeyboardInterrupt
        return step(self)
    monkeypatch.setattr(bench._Fluidlite, "step", interrupting)
    res = run_model("fit_a_line", iterations=3, warmup=1, repeat=5, progress=False)
    assert res["interrupted"] and res["repeat"] == 1 and len(res["ms_per_step"]["all"]) == 1


def test_count_construction_counts_and_restores():
    import fluidlite as fluid
    from fluidlite import framework
    inits = {c: c.__dict__["__init__"] for c in (framework.Program, framework.Block, framework.Variable,
                                                 framework.Operator)}
    ab = fluid.backward.append_backward
    with _measure.count_construction() as stats:
        built = models.load("fit_a_line").build(20, 0)
    assert {c: c.__dict__["__init__"] for c in inits} == inits and fluid.backward.append_backward is ab
    in_programs = _measure.program_counts([built.main, built.startup])
    created = stats["created"]
    assert created["programs"] == 2 and created["operators"] >= in_programs["operators"] > 10
    assert created["variables"] >= in_programs["variables"] > 10
    abs_ = stats["append_backward"]
    assert abs_["calls"] == 1 and abs_["s"] > 0 and abs_["created"]["operators"] > 0


def test_peak_rss_measures_an_allocation():
    import mmap

    import numpy as np
    peak = _measure.PeakRSS()
    peak.start()
    # 64 MiB of fresh pages, touched: an mmap, not malloc, which may serve the request from heap memory an
    # earlier test freed and left resident (then RSS need not grow at all).
    m = mmap.mmap(-1, 64 << 20)
    np.frombuffer(m, dtype=np.uint8)[:] = 1
    m.close()
    grown = peak.stop()
    assert grown >= (60 << 20), (grown, peak.method)


@pytest.mark.parametrize("args, needle", [
    (["--model", "no_such_model"], "invalid choice: 'no_such_model'"),
    (["--iterations", "0"], "--iterations: expected an integer >= 1, got 0"),
    (["--iterations", "abc"], "--iterations: expected an integer >= 1, got 'abc'"),
    (["--batch_size", "-4"], "--batch_size: expected an integer >= 1"),
    (["--warmup", "-1"], "--warmup: expected an integer >= 0"),
    (["--repeat", "1.5"], "--repeat"),
    (["--threads", "0"], "--threads"),
    (["--seed", "-1"], "--seed"),
    (["--device", "tpu"], "invalid choice: 'tpu'"),
    (["--compare", "jax"], "--compare: expected a comma-separated list of torch,paddle,numpy, got 'jax'"),
    (["--compare", ","], "--compare"),
    (["--sorted_key", "total"], "--sorted_key needs --profile"),
    (["--profile", "--sorted_key", "bogus"], "--sorted_key: invalid choice: 'bogus'"),
    (["--glog_v", "-1"], "--glog_v: expected an integer >= 0"),
    (["--timeline", "/nonexistent_dir/t.json"], "--timeline /nonexistent_dir/t.json: directory"),
    (["--cprofile", "/nonexistent_dir/p.pstats"], "--cprofile /nonexistent_dir/p.pstats: directory"),
    (["--json", "/nonexistent_dir/x.json"], "--json /nonexistent_dir/x.json: directory"),
    (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
])
def test_bad_values_exit_2_with_one_line(args, needle):
    r = run_cli(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr
    assert needle in r.stderr, r.stderr
    assert r.stderr.startswith("python -m fluidlite.bench: error:")


@pytest.mark.skipif(core.is_compiled_with_cuda() and core.get_cuda_device_count() > 0,
                    reason="a CUDA device is available")
def test_gpu_without_cuda_exits_2():
    r = run_cli("--device", "gpu", *FAST)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--device gpu" in r.stderr and "CUDA" in r.stderr, r.stderr


def test_help_has_examples_and_models():
    r = run_cli("--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and "python -m fluidlite.bench --model overhead" in r.stdout
    assert "--compare torch,numpy,paddle" in r.stdout and "--profile --sorted_key total" in r.stdout
    listed = r.stdout.split("models:")[1]
    for name in list(models.MODELS) + ["all"]:
        assert re.search(r"^  %s " % name, listed, re.M), name


@pytest.mark.parametrize("name", ["overhead", "fit_a_line", "mlp"])
def test_models_have_numpy_torch_and_paddle_references(name):
    mod = models.load(name)
    assert callable(reference.factory(mod, "numpy")) and callable(reference.factory(mod, "torch"))
    assert callable(reference.factory(mod, "paddle"))  # every model's: tests/test_bench_paddle.py


def _children(pid):
    """The pids of `pid`'s live child processes (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def test_background_load_runs_busy_processes_for_the_run_only(tmp_path):
    from fluidlite.bench._load import background_load
    with background_load(2) as pids:
        assert len(pids) == 2 and set(pids) <= set(_children(os.getpid()))
        time.sleep(0.2)
        for pid in pids:  # spinning: they use CPU
            with open("/proc/%d/stat" % pid) as f:
                utime = int(f.read().rsplit(")", 1)[1].split()[11])
            assert utime > 0
    assert not set(pids) & set(_children(os.getpid()))  # gone when the block ends
    with background_load(0) as none:
        assert none == []
    out = tmp_path / "r.json"
    r = run_cli("--model", "overhead", *FAST, "--background-load", "1", "--json", str(out), "--no_progress")
    assert r.returncode == 0, r.stderr
    assert "with 1 busy background process (--background-load)" in r.stdout
    assert json.loads(out.read_text())["machine"]["background_load"] == 1
    r = run_cli("--background-load", "-1")
    assert r.returncode == 2 and "argument --background-load/--background_load: expected an integer >= 0, got -1" \
        in r.stderr


def test_gpu_comparison_takes_torch_only():
    if bench.gpu_unavailable_reason() is not None:
        r = run_cli("--device", "gpu", "--compare", "numpy", *FAST)
        assert r.returncode == 2 and "CUDA" in r.stderr, r.stderr  # the device is checked first
        return
    r = run_cli("--device", "gpu", "--compare", "numpy", *FAST)
    assert r.returncode == 2 and "--device gpu compares with torch on CUDA only" in r.stderr, r.stderr


def test_torch_references_move_in_place_and_keep_training():
    """--device gpu moves each torch reference to CUDA with reference.torch_to_device; on the CPU ("cpu") the same
    walk must leave every model's reference stepping (modules, tensors, dicts of parameters, PackedSequence)."""
    torch = pytest.importorskip("torch")
    import fluidlite as fluid
    from fluidlite.bench import _Fluidlite
    for name in ("mlp", "text_lstm", "transformer_encoder"):
        mod = models.load(name)
        fl = _Fluidlite(mod, 4, 0, fluid.CPUPlace())
        impl = reference.factory(mod, "torch")(fl.params(), reference.plain_feed(fl.feed_dict))
        first = np.asarray(impl.step())
        params = [p for m in vars(impl).values() if isinstance(m, torch.nn.Module) for p in m.parameters()]
        assert reference.torch_to_device(impl, "cpu") is impl
        assert all(p is q for p, q in zip(params, [p for m in vars(impl).values() if isinstance(m, torch.nn.Module)
                                                  for p in m.parameters()]))  # moved in place: optimizers keep them
        second = np.asarray(impl.step())
        assert np.all(np.isfinite(second)) and not np.array_equal(first, second), name  # it still trains
