"""Faults of a data-parallel job (docs/distributed.md, "Launching and faults"): a rank that is killed, raises, or
exits early ends the whole job with an error naming the rank, never a hang; ranks that build different models, or a
launcher environment that disagrees with MPI, fail at start-up naming what differs. Every job runs with a hard
timeout (tests/mpi_jobs.py); the launcher's report comes from fluidlite.distributed.launch."""
import re
import sys
import time

import pytest

from mpi_jobs import MPIEXEC, launch, mpiexec, requires_mpi, run, worker

pytestmark = requires_mpi

TRAIN = worker("train_worker.py")
LONG = ["mlp", "300", "16"]  # a job still training when the fault (at step 3) comes


def _fault_time(out):
    m = re.search(r"fault: rank (\d+) pid (\d+) at ([0-9.]+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


def _seconds_after(t_fault):  # from the fault to now, just after the job ended
    return time.time() - t_fault


@pytest.mark.parametrize("via", ["launch", "mpiexec"])
def test_killed_rank_ends_the_job_naming_it(tmp_path, via):
    args = [TRAIN] + LONG + [str(tmp_path / "p.npz"), "--fleet", "--fault", "kill", "--fault_rank", "1"]
    rc, out, _ = (launch if via == "launch" else mpiexec)(2, *args, timeout=60)
    rank, pid, t = _fault_time(out)
    assert _seconds_after(t) < 30, out
    assert rc != 0 and rank == 1
    if via == "launch":
        assert ("fluidlite.distributed.launch: rank 1 (pid %d) was killed by signal 9 (SIGKILL); the job was "
                "stopped" % pid) in out, out
    else:
        # hydra names a pid, not a rank (and when it has already stopped the others, possibly one of theirs).
        assert "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in out, out
        assert re.search(r"PID \d+ RUNNING AT", out) and "EXIT CODE: 9" in out, out
        assert "Killed (signal 9)" in out, out


@pytest.mark.parametrize("via", ["launch", "mpiexec"])
def test_rank_that_raises_aborts_the_job(tmp_path, via):
    args = [TRAIN] + LONG + [str(tmp_path / "p.npz"), "--fleet", "--fault", "raise", "--fault_rank", "1"]
    rc, out, _ = (launch if via == "launch" else mpiexec)(2, *args, timeout=60)
    _, pid, t = _fault_time(out)
    assert _seconds_after(t) < 30, out
    assert rc != 0
    assert "ValueError: an injected fault on rank 1" in out
    assert ("fluidlite.distributed: rank 1 of 2 raised ValueError: an injected fault on rank 1; aborting the job"
            in out), out
    if via == "mpiexec":  # through the launcher MPICH's own line may be cut off when hydra stops the watchers
        assert "MPI_Abort(MPI_COMM_WORLD, 1) - process 1" in out, out
    if via == "launch":
        assert ("fluidlite.distributed.launch: rank 1 (pid %d) aborted the job: rank 1 of 2 raised ValueError: an "
                "injected fault on rank 1" % pid) in out, out


# csrc/comm.cc's error when the other rank never joins the gradient allreduce (a regular expression).
TIMEOUT_RE = (re.escape("c_sync_comm_stream: c_allreduce_sum (ring 0, rank 0 of 2): the other ranks did not join the "
                        "allreduce of ") + r"\d+ tensors \('fc_[^)]*\)" +
              re.escape(" within 3 s: a rank died, exited early, or runs a different program (FLUIDLITE_COMM_TIMEOUT "
                        "sets the limit)"))


def test_rank_that_exits_early_makes_the_other_time_out(tmp_path):
    args = [TRAIN] + LONG + [str(tmp_path / "p.npz"), "--fleet", "--fault", "exit", "--fault_rank", "1"]
    rc, out, _ = launch(2, *args, timeout=60, FLUIDLITE_COMM_TIMEOUT=3)
    _, pid, t = _fault_time(out)
    assert _seconds_after(t) < 30, out
    assert rc != 0
    assert re.search(r"fluidlite\.distributed: rank 0 of 2 raised EnforceNotMet: " + TIMEOUT_RE, out), out
    report = [line for line in out.splitlines() if line.startswith("fluidlite.distributed.launch:")]
    assert len(report) == 1, out
    assert re.match(r"fluidlite\.distributed\.launch: rank 0 \(pid \d+\) aborted the job: rank 0 of 2 raised "
                    r"EnforceNotMet: " + TIMEOUT_RE, report[0]), report
    assert report[0].endswith("(before that, rank 1 (pid %d) had finished the training script and was exiting while "
                              "the others still ran)" % pid), report


def test_a_caught_ring_failure_still_lets_the_process_exit(tmp_path):
    # The failed allreduce leaves an MPI request behind; MPI_Finalize at exit must not wait for it forever.
    args = [TRAIN] + LONG + [str(tmp_path / "p.npz"), "--fleet", "--fault", "exit", "--fault_rank", "1", "--catch"]
    rc, out, _ = mpiexec(2, *args, timeout=60, FLUIDLITE_COMM_TIMEOUT=3)
    _, _, t = _fault_time(out)
    assert _seconds_after(t) < 30, out
    assert rc == 3, out
    assert re.search(r"caught on rank 0: " + TIMEOUT_RE, out), out


def test_ranks_that_build_different_models_fail_at_start_up(tmp_path):
    p = str(tmp_path / "p.npz")
    rank_args = [[TRAIN, "mlp", "5", "16", p, "--fleet", "--hidden", h] for h in ("64", "32")]
    cmd = [MPIEXEC, "-n", "1", sys.executable] + rank_args[0] + [":", "-n", "1", sys.executable] + rank_args[1]
    rc, out, _ = run(cmd, timeout=60)
    assert rc != 0
    assert ("fleet: the ranks build different models: parameter 'fc_0.b_0' of the main program is shape [64], "
            "float32 on rank 0 but shape [32], float32 on rank 1") in out, out
    assert not (tmp_path / "p.npz").exists()


def test_launcher_variables_that_disagree_with_mpi_fail_at_fleet_init(tmp_path):
    args = [TRAIN, "mlp", "5", "16", str(tmp_path / "p.npz"), "--fleet", "--role", "paddlecloud"]
    rc, out, _ = mpiexec(2, *args, timeout=60, PADDLE_TRAINERS_NUM=3)
    assert rc != 0
    assert ("PaddleCloudRoleMaker: the job has 3 trainers (PADDLE_TRAINER_ID=None, PADDLE_TRAINERS_NUM=3) but MPI "
            "started 2 ranks: launch with mpiexec -n 3 (or python -m fluidlite.distributed.launch --nproc_per_node "
            "3)") in out, out
    assert not (tmp_path / "p.npz").exists()
