"""python -m fluidlite.bench --nproc 2: the data-parallel run's figures (JSON and text), the baseline, DDP, and the
errors. Needs mpiexec and mpi4py (pip install 'fluidlite[mpi]'); --compare torch needs torch."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fluidlite.bench import distributed
from fluidlite.bench.models import mlp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = distributed.find_mpiexec()

try:
    import mpi4py  # noqa: F401
    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False

needs_mpi = pytest.mark.skipif(MPIEXEC is None or not HAVE_MPI4PY,
                               reason="needs mpiexec and mpi4py: pip install 'fluidlite[mpi]'")


def _bench(args, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fluidlite.bench"] + args, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def _mlp_grad_bytes(batch):
    built = mlp.build(batch, 0)
    return sum(4 * int(np.prod(p.shape)) for p in built.main.global_block().all_parameters())


def c_median(ranks):
    return ranks["comm"]["ms_per_step"]["median"]


@pytest.fixture(scope="module")
def nproc_run(tmp_path_factory):
    try:
        import torch  # noqa: F401
        compare = ["--compare", "torch"]
    except ImportError:
        compare = []
    path = str(tmp_path_factory.mktemp("bench") / "out.json")
    r = _bench(["--model", "mlp", "--nproc", "2", "--batch_size", "16", "--iterations", "3", "--warmup", "1",
                "--repeat", "2", "--threads", "1", "--json", path] + compare)
    return r, path, bool(compare)


@needs_mpi
def test_nproc_json_figures(nproc_run):
    r, path, _ = nproc_run
    assert r.returncode == 0, r.stderr
    with open(path) as f:
        doc = json.load(f)
    (res,) = doc["results"]
    ranks = res["ranks"]
    assert res["nproc"] == 2 and res["threads_per_rank"] == 1 and res["global_batch"] == 32
    assert ranks["nranks"] == 2 and ranks["batch_per_rank"] == 16 and ranks["threads"] == 1
    assert ranks["repeat"] == 2 and len(ranks["ms_per_step"]["all"]) == 2 and ranks["ms_per_step"]["min"] > 0
    assert len(ranks["rank_ms_per_step"]) == 2 and len(ranks["rank_comm_ms_per_step"]) == 2
    assert ranks["rank_comm_ms_per_step"][0] == c_median(ranks)
    c = ranks["comm"]
    # 784x512 + 512 + 512x512 + 512 + 512x10 + 10 floats: 2.55 MB, one 4 MB bucket, one allreduce per step
    assert c["bytes_per_step"] == ranks["grad_bytes"] == _mlp_grad_bytes(16) == 2678824
    assert ranks["buckets"] == {"count": 1, "bytes": [2678824], "gradients": [6], "fuse_grad_size_mb": 4.0}
    assert c["collectives_per_step"] == 1
    assert c["ms_per_step"]["median"] > 0 and c["gb_per_s"]["median"] > 0
    for v in c["overlap"]["all"]:
        assert 0.0 <= v <= 1.0
    base = res["baseline"]
    assert base["nranks"] == 1 and base["batch_per_rank"] == 32 and base["threads"] == 2 and "comm" not in base
    assert res["scaling"] == pytest.approx(base["ms_per_step"]["median"] / ranks["ms_per_step"]["median"])
    assert res["rounds"] == [{"ranks_ms": ranks["ms_per_step"]["median"], "baseline_ms": base["ms_per_step"]["median"],
                              "scaling": res["scaling"]} | ({"ddp_ms": res["compare"]["torch"]["ms_per_step"]["median"],
                                                            "vs_ddp": res["vs_ddp"]} if res["vs_ddp"] else {})]


@needs_mpi
def test_nproc_text(nproc_run):
    r, _, compared = nproc_run
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "ranks       2 x 1 thread (mpiexec: " in out
    assert "batch       16 per rank; global batch 2 x 16 = 32" in out
    assert "allreduce   2678824 bytes/step in 1 collectives/step" in out
    assert "buckets     1 (2678824 bytes; fuse_grad_size_in_MB 4)" in out
    assert "1 process   " in out and "at batch 32 x 2 threads; 2 ranks reach " in out
    if compared:
        assert "torch DDP   " in out and "(gloo, 2 ranks x 1 threads, torch " in out


@needs_mpi
def test_nproc_compare_torch_json(nproc_run):
    r, path, compared = nproc_run
    if not compared:
        pytest.skip("torch is not installed")
    with open(path) as f:
        (res,) = json.load(f)["results"]
    ddp = res["compare"]["torch"]
    assert ddp["framework"] == "torch-ddp" and ddp["backend"] == "gloo" and ddp["nranks"] == 2
    assert ddp["batch_per_rank"] == 16 and ddp["threads"] == 1 and ddp["ms_per_step"]["median"] > 0
    assert res["vs_ddp"] == pytest.approx(ddp["ms_per_step"]["median"] / res["ranks"]["ms_per_step"]["median"])


def test_ddp_wrap_skips_a_reference_without_modules():
    pytest.importorskip("torch", reason="the DDP rank imports torch (not in the test extras)")
    from fluidlite.bench._ddp_rank import ddp_wrap

    class NoModules:
        def step(self):
            return 0.0
    assert ddp_wrap(NoModules(), lambda m: m) is None


def test_missing_mpiexec_is_named(monkeypatch):
    monkeypatch.setattr(distributed, "find_mpiexec", lambda: None)
    with pytest.raises(RuntimeError, match=r"mpiexec not found .*pip install 'fluidlite\[mpi\]'"):
        distributed.run_distributed("mlp", 2)


@pytest.mark.parametrize("args, message", [
    (["--nproc", "2", "--advise"], "--advise is not supported with --nproc"),
    (["--nproc", "0"], "argument --nproc: expected an integer >= 1, got 0"),
    (["--fuse-grad-size-mb", "1"], "--fuse-grad-size-mb needs --nproc"),
    (["--nproc", "2", "--fuse-grad-size-mb", "0"], "--fuse-grad-size-mb must be > 0, got 0"),
    (["--nproc", "2", "--mode", "infer"], "--nproc is not supported with --mode infer"),
    (["--rounds", "2"], "--rounds needs --nproc"),
])
def test_bad_arguments(args, message):
    r = _bench(args, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
