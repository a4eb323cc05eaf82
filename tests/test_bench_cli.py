"""`python -m fluidlite.bench`: summary output, --json schema, argument errors and exit codes."""
import json
import subprocess
import sys

import pytest

from fluidlite import core

FAST = ["--iterations", "3", "--warmup", "1", "--repeat", "2"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "fluidlite.bench", *args], capture_output=True, text=True,
                          timeout=120)


def test_default_run_prints_summary():
    r = run_cli(*FAST)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for field in ("model       overhead", "batch size  16", "threads", "steps/s", "ms/step", "samples/s",
                  "s/op", "min", "max", "median of 2 repeats x 3 iterations after 1 warm-up"):
        assert field in out, (field, out)
    assert r.stderr == ""


def test_flags_reach_the_run(tmp_path):
    path = tmp_path / "r.json"
    r = run_cli("--model", "overhead", "--batch_size", "8", "--threads", "1", "--seed", "3", "--device", "cpu",
                "--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    assert "batch size  8" in r.stdout and "threads     1" in r.stdout
    res = json.loads(path.read_text())["results"][0]
    assert (res["batch_size"], res["threads"], res["seed"], res["iterations"], res["warmup"], res["repeat"]) == \
        (8, 1, 3, 3, 1, 2)


def test_json_schema(tmp_path):
    path = tmp_path / "out.json"
    r = run_cli("--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    assert doc["schema"] == 1
    machine = doc["machine"]
    for key in ("cpu_model", "cpu_count", "cpu_usable", "python", "numpy", "fluidlite", "blas", "git_commit"):
        assert key in machine, key
    assert machine["blas"]["library"] == "scipy-openblas32"
    res, = doc["results"]
    for key in ("model", "device", "batch_size", "threads", "iterations", "warmup", "repeat", "seed",
                "ops_per_step", "ms_per_step", "steps_per_s", "samples_per_s", "us_per_op", "peak_tensor_bytes"):
        assert key in res, key
    ms = res["ms_per_step"]
    assert len(ms["all"]) == 2 and ms["min"] <= ms["median"] <= ms["max"]
    assert res["ops_per_step"] == 1000
    assert res["samples_per_s"] == pytest.approx(res["batch_size"] * res["steps_per_s"]["median"])
    assert res["us_per_op"] == pytest.approx(ms["median"] * 1e3 / 1000)


@pytest.mark.parametrize("args, needle", [
    (["--model", "no_such_model"], "invalid choice: 'no_such_model'"),
    (["--iterations", "0"], "--iterations: expected an integer >= 1, got 0"),
    (["--iterations", "abc"], "--iterations: expected an integer >= 1, got 'abc'"),
    (["--batch_size", "-4"], "--batch_size: expected an integer >= 1"),
    (["--warmup", "-1"], "--warmup: expected an integer >= 0"),
    (["--repeat", "1.5"], "--repeat"),
    (["--threads", "0"], "--threads"),
    (["--device", "tpu"], "invalid choice: 'tpu'"),
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


def test_bad_json_path_exits_2(tmp_path):
    r = run_cli("--json", str(tmp_path / "missing_dir" / "x.json"), *FAST)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--json" in r.stderr, r.stderr


def test_help_has_examples_and_models():
    r = run_cli("--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and "python -m fluidlite.bench --model overhead" in r.stdout
    assert "overhead" in r.stdout.split("models:")[1]
