"""The profiler's communication view: communication_summary(), the report's Communication section and the
advisor's exposed_communication finding, on a hand-built profile (exact figures) and on a real one-rank ring
(the collectives the rewrite inserted, their bytes = the model's gradient bytes)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, profiler
from fluidlite.bench.models import mlp
from fluidlite.distributed import collective
from fluidlite.profiler._session import Event

MS = 1_000_000


def _ev(name, category, start_ms, end_ms, thread=0, parent=-1, nbytes=0):
    return Event(name=name, category=category, start_ns=int(start_ms * MS), end_ns=int(end_ms * MS),
                 dur_ns=int((end_ms - start_ms) * MS), thread=thread, tid=100 + thread, depth=0 if parent < 0 else 1,
                 parent=parent, bytes=nbytes, args="", cpu_ns=-1, mem_in_use=-1, mem_peak=-1, value=-1)


def _step(exposed_ms):
    """One 10 ms step: the main thread (0) runs the executor and waits `exposed_ms` at its end for the comm stream
    (thread 1), which ran two allreduces (3 MB in 3 ms, 1 MB in 3 ms) and a broadcast (4000 bytes in 0.5 ms)."""
    return [_ev("Executor::run", "Executor", 0, 10),
            _ev("c_sync_comm_stream/wait", "Communication", 10 - exposed_ms, 10, parent=0),
            _ev("c_allreduce_sum", "Communication", 2, 5, thread=1, nbytes=3_000_000),
            _ev("c_allreduce_sum", "Communication", 5, 8, thread=1, nbytes=1_000_000),
            _ev("c_broadcast", "Communication", 8.5, 9, thread=1, nbytes=4000)]


def test_summary_per_op_and_overlap():
    s = profiler.communication_summary(_step(2.0))
    assert s["ops"] == [
        {"op": "c_allreduce_sum", "calls": 2, "bytes": 4_000_000, "total_ms": 6.0, "gb_per_s": 4_000_000 / 6e6},
        {"op": "c_broadcast", "calls": 1, "bytes": 4000, "total_ms": 0.5, "gb_per_s": 4000 / 0.5e6}]
    assert s["comm_ms"] == 6.5 and s["exposed_ms"] == 2.0 and s["hidden_ms"] == 4.5 and s["waits"] == 1
    assert s["overlap"] == pytest.approx(4.5 / 6.5)


def test_exposed_wait_is_capped_at_the_stream_time():
    s = profiler.communication_summary(_step(2.0)[:2] + [_ev("c_allreduce_sum", "Communication", 8.5, 9, thread=1,
                                                             nbytes=8)])
    assert s["exposed_ms"] == 0.5 and s["hidden_ms"] == 0.0 and s["overlap"] == 0.0


def test_no_collectives_no_section():
    evs = [_ev("Executor::run", "Executor", 0, 10)]
    assert profiler.communication_summary(evs) == {"ops": [], "comm_ms": 0.0, "waits": 0, "exposed_ms": 0.0,
                                                   "hidden_ms": 0.0, "overlap": None}
    assert "Communication" not in profiler.report(event_list=evs)


def test_report_section_lines():
    text = profiler.report(event_list=_step(2.0))
    lines = text.splitlines()
    i = lines.index("------------------------->     Communication     <-------------------------")
    assert lines[i + 1:i + 6] == [
        "",
        "Op                      Calls       Bytes           Time(ms)    GB/s",
        "c_allreduce_sum         2           4000000         6           0.667",
        "c_broadcast             1           4000            0.5         0.008",
        "Overlap: 6.5 ms of communication on the comm stream, 4.5 ms hidden behind compute, 2 ms exposed (1 waits in "
        "c_sync_comm_stream): 69.2 % overlapped"]
    # after the memcpy summary, before the scopes
    assert lines.index("------------------------->     Memcpy Summary     <-------------------------") < i
    assert i < lines.index("------------------------->     Scope Summary      <-------------------------")


def _comm_findings(evs):
    return [f for f in profiler.advise(programs=[], events=evs, print_report=False)
            if f.kind == "exposed_communication"]


def test_advisor_finds_exposed_communication_with_the_fix():
    evs = _step(2.0)  # 2 ms of a 10 ms step: 20 %
    (f,) = _comm_findings(evs)
    assert f.title == "the step waits 2.000 ms for the comm stream (31% of its communication exposed)"
    assert f.share == pytest.approx(0.2) and f.estimated_saving_ms == pytest.approx(2.0)
    assert f.evidence["collectives_per_step"] == 2 and f.evidence["bytes_per_step"] == 4_000_000
    assert f.evidence["overlap"] == round(4.5 / 6.5, 3)
    assert "link's bandwidth is the limit" in f.fix and "fuse_grad_size_in_MB" in f.fix


def test_advisor_one_bucket_says_make_buckets_smaller():
    evs = _step(3.0)[:3]  # one allreduce per step, 3 ms of it waited for
    (f,) = _comm_findings(evs)
    assert "one bucket" in f.fix and "DEFAULT_FUSE_GRAD_SIZE_MB" in f.fix and "2.86 MB" in f.fix


def test_advisor_many_small_collectives_says_fuse():
    evs = [_ev("Executor::run", "Executor", 0, 10), _ev("c_sync_comm_stream/wait", "Communication", 7, 10, parent=0)]
    evs += [_ev("c_allreduce_sum", "Communication", 2 + 0.5 * k, 2.5 + 0.5 * k, thread=1, nbytes=4096)
            for k in range(10)]
    (f,) = _comm_findings(evs)
    assert f.fix.startswith("10 collectives per step of 4 KB on average") and "fuse_all_reduce_ops" in f.fix


def test_advisor_small_exposure_no_finding():
    assert _comm_findings(_step(0.5)) == []  # 5 % of the step


def test_one_rank_ring_profile_counts_the_model_gradients():
    built = mlp.build(8, 0)
    core.comm_init_ring(0, 0, 1, 30.0)
    try:
        buckets = collective.transpile(built.main, built.startup, 1, fuse_grad_size_mb=1.0)
        block = built.main.global_block()
        grad_bytes = [sum(collective._nbytes(block.var(n)) for n in b) for b in buckets]
        param_bytes = sum(collective._nbytes(p) for p in block.all_parameters())
        assert sum(grad_bytes) == param_bytes and len(buckets) == 2  # 784x512 floats alone pass 1 MB
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(built.startup, scope=scope)
        feed = built.feed()
        with profiler.profiler("CPU", profile_path=None, print_report=False):
            for _ in range(3):
                exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
        s = profiler.communication_summary()
    finally:
        core.comm_destroy_ring(0)
    (row,) = s["ops"]
    assert row["op"] == "c_allreduce_sum" and row["calls"] == 3 * len(buckets) and row["bytes"] == 3 * param_bytes
    assert s["waits"] >= 0 and 0.0 <= s["overlap"] <= 1.0
    assert np.isclose(s["hidden_ms"] + s["exposed_ms"], s["comm_ms"])
