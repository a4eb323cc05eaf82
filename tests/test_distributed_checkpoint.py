"""Checkpoint and resume of a data-parallel job: 2 ranks train 10 steps and save (fleet.save_checkpoint: rank 0
writes), a new 2-rank job loads the checkpoint on every rank (fleet.load_checkpoint) and trains 10 more; the
parameters equal those of one uninterrupted 20-step 2-rank job. The optimizers keep state (momentum's velocity,
Adam's moments and beta powers), which the checkpoint must carry."""
import json

import numpy as np
import pytest

from mpi_jobs import mpiexec, requires_mpi, worker

pytestmark = requires_mpi

TRAIN = worker("train_worker.py")


def _train(out, steps, *extra):
    rc, text, _ = mpiexec(2, TRAIN, "mlp", str(steps), "16", str(out), "--fleet", *extra, timeout=120)
    assert rc == 0, text
    return dict(np.load(out))


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_resume_matches_an_uninterrupted_run(tmp_path, optimizer):
    opt = ["--optimizer", optimizer]
    ckpt = tmp_path / "ckpt"
    whole = _train(tmp_path / "whole.npz", 20, *opt)
    first = _train(tmp_path / "first.npz", 10, *opt, "--save", str(ckpt))
    resumed = _train(tmp_path / "resumed.npz", 10, *opt, "--load", str(ckpt), "--first_step", "10")
    assert json.loads((ckpt / "train_status.json").read_text()) == {"epoch_no": 9}
    state = "velocity" if optimizer == "momentum" else "moment1"
    assert any(state in f.name for f in ckpt.iterdir()), sorted(f.name for f in ckpt.iterdir())
    assert sorted(resumed) == sorted(whole)
    for name in whole:
        np.testing.assert_array_equal(resumed[name], whole[name], err_msg=name)
        assert not np.array_equal(first[name], whole[name]), name  # the last 10 steps did change it
