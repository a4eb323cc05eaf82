"""python -m fluidlite.distributed.launch (the environment each rank gets, --log_dir, the report of a failed job)
and fluidlite.distributed.shard_reader (each rank's share of the samples)."""
import json
import os
import sys

import pytest

from fluidlite.distributed import launch, shard_reader
from mpi_jobs import requires_mpi, run, worker

ENV_SCRIPT = """
import json, os, sys
from fluidlite.incubate.fleet.base import role_maker
from fluidlite.incubate.fleet.collective import fleet
fleet.init(role_maker.PaddleCloudRoleMaker())
keys = ["PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
        "FLUIDLITE_NUM_THREADS"]
print(json.dumps(dict({k: os.environ.get(k) for k in keys}, index=fleet.worker_index(), args=sys.argv[1:])))
fleet.barrier_worker()
"""


@requires_mpi
def test_launch_sets_paddles_environment_and_writes_logs(tmp_path):
    script = tmp_path / "show_env.py"
    script.write_text(ENV_SCRIPT)
    logs = tmp_path / "logs"
    rc, out, _ = run([sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                      str(logs), "--threads_per_rank", "3", str(script), "a", "--b"], timeout=60)
    assert rc == 0, out
    for r in range(2):
        lines = (logs / ("workerlog.%d" % r)).read_text().splitlines()
        got = json.loads(lines[-1])
        assert got == {"PADDLE_TRAINER_ID": str(r), "PADDLE_TRAINERS_NUM": "2",
                       "PADDLE_TRAINER_ENDPOINTS": "127.0.0.1:6170,127.0.0.1:6171",
                       "PADDLE_CURRENT_ENDPOINT": "127.0.0.1:%d" % (6170 + r), "FLUIDLITE_NUM_THREADS": "3",
                       "index": r, "args": ["a", "--b"]}
    assert "PADDLE_TRAINER_ID" not in out  # the ranks' output went to the logs


@requires_mpi
def _json_objects(text):
    """Every JSON object in `text`, wherever it starts (two ranks' lines can arrive joined into one)."""
    decoder, found, i = json.JSONDecoder(), [], text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
            found.append(obj)
        except ValueError:
            end = i + 1
        i = text.find("{", end)
    return found


def test_launch_divides_the_cores_among_the_ranks(tmp_path):
    script = tmp_path / "show_env.py"
    script.write_text(ENV_SCRIPT)
    rc, out, _ = run([sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node", "2", str(script)],
                     timeout=60, FLUIDLITE_NUM_THREADS=None)
    assert rc == 0, out
    threads = {obj["FLUIDLITE_NUM_THREADS"] for obj in _json_objects(out)}  # mpiexec may join the ranks' lines
    assert threads == {str(max(1, len(os.sched_getaffinity(0)) // 2))}, out


def test_launch_without_mpiexec_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"mpiexec not found .*pip install 'fluidlite\[mpi\]'"):
        launch.find_mpiexec()


def test_launch_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        launch.main(["--nproc_per_node", "0", "train.py"])
    assert "--nproc_per_node must be >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        launch.main(["--nproc_per_node", "2", str(tmp_path / "missing.py")])
    assert "training script %s does not exist" % (tmp_path / "missing.py") in capsys.readouterr().err


def test_the_report_names_the_rank_that_failed_first(tmp_path):
    d = str(tmp_path)
    launch.write_record(d, "rank", 0, pid=100)
    launch.write_record(d, "rank", 1, pid=101)
    assert launch.describe_failure(d, 1) == ("fluidlite.distributed.launch: mpiexec failed with exit code 1 and no "
                                             "rank recorded why (it may have failed before joining the job; see "
                                             "the output above)")
    launch.write_record(d, "exit", 0, pid=100, returncode=-15, time=20.0)  # stopped because rank 1 was gone
    launch.write_record(d, "exit", 1, pid=101, returncode=-9, time=10.0)
    assert launch.describe_failure(d, 9) == ("fluidlite.distributed.launch: rank 1 (pid 101) was killed by signal 9 "
                                             "(SIGKILL); the job was stopped")
    launch.write_record(d, "exit", 1, pid=101, returncode=3, time=10.0)
    assert launch.describe_failure(d, 3) == ("fluidlite.distributed.launch: rank 1 (pid 101) exited with code 3; "
                                             "the job was stopped")


def test_the_report_names_a_rank_that_left_early(tmp_path):
    d = str(tmp_path)
    launch.write_record(d, "rank", 0, pid=100)
    launch.write_record(d, "rank", 1, pid=101)
    launch.write_record(d, "finish", 1, pid=101, time=10.0)
    launch.write_record(d, "abort", 0, pid=100, message="rank 0 of 2 raised EnforceNotMet: timeout", time=15.0)
    launch.write_record(d, "exit", 1, pid=101, returncode=0, time=16.0)
    assert launch.describe_failure(d, 1) == (
        "fluidlite.distributed.launch: rank 0 (pid 100) aborted the job: rank 0 of 2 raised EnforceNotMet: timeout "
        "(before that, rank 1 (pid 101) had finished the training script and was exiting while the others still "
        "ran)")


def test_shard_reader_gives_every_nranks_th_sample():
    def reader():
        return iter(range(7))
    assert [list(shard_reader(reader, r, 3)()) for r in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    # drop_last: the incomplete last round (sample 6) goes to nobody, so every rank runs the same number of steps
    assert [list(shard_reader(reader, r, 3, drop_last=True)()) for r in range(3)] == [[0, 3], [1, 4], [2, 5]]
    assert list(shard_reader(reader, 0, 1)()) == list(range(7))


def test_shard_reader_checks_its_arguments():
    with pytest.raises(TypeError, match="shard_reader: reader must be a callable"):
        shard_reader([1, 2])
    with pytest.raises(ValueError, match="shard_reader: rank 2 is not below nranks 2"):
        shard_reader(lambda: iter([]), 2, 2)
    with pytest.raises(ValueError, match="shard_reader: nranks must be an int >= 1, got 0"):
        shard_reader(lambda: iter([]), 0, 0)


@requires_mpi
def test_two_ranks_see_disjoint_samples_covering_the_data(tmp_path):
    out = tmp_path / "seen.json"
    rc, text, _ = run([sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node", "2",
                       worker("shard_worker.py"), "13", "2", str(out)], timeout=60)
    assert rc == 0, text
    seen = json.loads(out.read_text())
    assert seen == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]  # sample 12, the incomplete last round, is dropped
