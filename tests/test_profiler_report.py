"""The profiler report beyond Fluid's columns: Median/P95/% wall, gap rows and coverage, framework vs kernel time,
the thread pool, memory, preempted samples; the trace's worker names, preempted args and memory counter; and the
Fluid-compatibility fixes (CPU-only places, profiler() yielding None, the Profiler handle, argument checks).
Real profiles where the recorder records the figure today; hand-built Event lists for the fields it adds."""
import importlib
import json
import math
import re
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import profiler


@pytest.fixture(autouse=True)
def _programs_as_written(monkeypatch):
    """These tests read profiles of their programs' ops as written: elementwise fusion (on by default) would turn
    their chains into fused_elementwise ops (subprocesses inherit the variable)."""
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")


report_mod = importlib.import_module("fluidlite.profiler.report")  # the package's `report` is the function


def _mlp():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[16], dtype="float32")
        h = fluid.layers.fc(x, 32, act="relu")
        loss = fluid.layers.mean(fluid.layers.fc(h, 1))
        fluid.optimizer.SGD(0.01).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe, main, loss


def _rnn(steps=4):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[steps, 2, 8], dtype="float32", append_batch_size=False)
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, 8], batch_ref=x_t)
            h = fluid.layers.tanh(fluid.layers.elementwise_add(fluid.layers.fc(x_t, 8), h_prev))
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        loss = fluid.layers.mean(rnn())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe, main, loss, {"x": np.ones((steps, 2, 8), "float32")}


def _profile_mlp(runs=5, **kw):
    exe, main, loss = _mlp()
    feed = {"x": np.ones((4, 16), "float32")}
    exe.run(main, feed=feed, fetch_list=[loss])
    kw.setdefault("profile_path", None)
    kw.setdefault("print_report", False)
    with profiler.profiler("CPU", **kw):
        for _ in range(runs):
            exe.run(main, feed=feed, fetch_list=[loss])
    return profiler.events()


def _ev(name, cat, start, end, thread=0, parent=-1, depth=0, cpu=-1, args=None, value=-1, mem_in_use=-1,
        mem_peak=-1, nbytes=-1):
    """An Event as the recorder makes it (EVENTS17's fields included)."""
    return profiler.Event(name=name, category=cat, start_ns=start, end_ns=end, dur_ns=end - start, thread=thread,
                          tid=1000 + thread, depth=depth, parent=parent, bytes=nbytes, args=args, cpu_ns=cpu,
                          mem_in_use=mem_in_use, mem_peak=mem_peak, value=value)


def _rows(rows, thread=0):
    return {r["event"]: r for r in rows if r["thread"] == thread}


# ---- columns: Median, P95, % wall, and Fluid's Ratio beside them

def test_median_p95_and_wall_ratio_match_the_events():
    evs = _profile_mlp(runs=7)
    wall = profiler._state.stop_ns - profiler._state.start_ns
    assert 0 < wall
    rows = _rows(profiler.summary())
    durs = {}
    for e in evs:
        durs.setdefault(e["name"], []).append(e["dur_ns"])
    for name, ds in durs.items():
        ds.sort()
        r = rows[name]
        n = len(ds)
        median = ds[n // 2] if n % 2 else (ds[n // 2 - 1] + ds[n // 2]) / 2
        assert r["median_ms"] == pytest.approx(median / 1e6)
        assert r["p95_ms"] == pytest.approx(ds[math.ceil(0.95 * n) - 1] / 1e6)  # nearest rank
        assert r["wall_ratio"] == pytest.approx(sum(ds) / wall)
        assert r["min_ms"] <= r["median_ms"] <= r["p95_ms"] <= r["max_ms"]
    run = rows["Executor::run"]
    assert run["calls"] == 7 and run["wall_ratio"] <= 1.0
    # Fluid's Ratio. counts nested time twice (an op in Executor::run is in both totals): % wall does not
    grand = sum(sum(ds) for ds in durs.values())
    assert run["ratio"] == pytest.approx(sum(durs["Executor::run"]) / grand)


def test_report_prints_the_new_columns_after_fluids():
    _profile_mlp(runs=3)
    text = profiler.report("total")
    header = next(line for line in text.splitlines() if line.startswith("Event"))
    assert header.split() == ["Event", "Calls", "Total", "Min.", "Max.", "Ave.", "Ratio.", "Self.", "Median", "P95",
                              "%", "wall"]
    rows = _rows(profiler.summary("total"))
    line = next(ln for ln in text.splitlines() if ln.startswith("thread0::Executor::run "))
    cols = line.split()
    r = rows["Executor::run"]
    assert cols[8:] == ["%g" % r["median_ms"], "%g" % r["p95_ms"], "%.2f" % (100 * r["wall_ratio"])]
    wall_ms = (profiler._state.stop_ns - profiler._state.start_ns) / 1e6
    assert "Wall time: %g ms (start_profiler to stop_profiler;" % wall_ms in text


# ---- gaps and coverage

def test_gap_rows_are_the_parents_self_time():
    evs = _profile_mlp(runs=4)
    selfs = report_mod.self_times(evs)
    runs = [i for i, e in enumerate(evs) if e["name"] == "Executor::run"]
    rows = _rows(profiler.summary())
    gap = rows["Executor::run/gaps"]
    assert gap["category"] == "Gap" and gap["calls"] == len(runs) == 4
    assert gap["total_ms"] == pytest.approx(sum(selfs[i] for i in runs) / 1e6)
    assert gap["total_ms"] == pytest.approx(rows["Executor::run"]["self_ms"])
    assert gap["max_ms"] == pytest.approx(max(selfs[i] for i in runs) / 1e6)
    # sorted by first end time: right after its parent
    names = [r["event"] for r in profiler.summary()]
    assert names.index("Executor::run/gaps") == names.index("Executor::run") + 1
    assert re.search(r"^thread0::Executor::run/gaps\s+4\s", profiler.report(), re.M)


def test_loop_steps_get_gap_rows_and_coverage_counts_them():
    exe, main, loss, feed = _rnn(steps=4)
    exe.run(main, feed=feed, fetch_list=[loss])
    with profiler.profiler("CPU", profile_path=None, print_report=False):
        for _ in range(3):
            exe.run(main, feed=feed, fetch_list=[loss])
    evs = profiler.events()
    selfs = report_mod.self_times(evs)
    rows = _rows(profiler.summary())
    step = rows["recurrent::step/gaps"]
    assert step["calls"] == 12 and step["category"] == "Gap"
    cov = profiler.coverage()
    run_ns = sum(e["dur_ns"] for e in evs if e["name"] == "Executor::run")
    gap_ns = sum(s for e, s in zip(evs, selfs) if e["name"] in ("Executor::run", "recurrent::step"))
    assert cov["runs"] == 3
    assert cov["exe_run_ms"] == pytest.approx(run_ns / 1e6)
    assert cov["unexplained_ms"] == pytest.approx(gap_ns / 1e6)
    assert cov["coverage"] == pytest.approx((run_ns - gap_ns) / run_ns)
    assert cov["unexplained_ms"] == pytest.approx(sum(r["total_ms"] for r in rows.values() if r["category"] == "Gap"))
    line = next(ln for ln in profiler.report().splitlines() if ln.startswith("Coverage:"))
    assert line == ("Coverage: events explain %.2f %% of Executor::run wall time (%g of %g ms; gaps between events: "
                    "%g ms, the /gaps rows)" % (100 * cov["coverage"], cov["exe_run_ms"] - cov["unexplained_ms"],
                                                cov["exe_run_ms"], cov["unexplained_ms"]))


def test_framework_line_without_op_detail_is_the_gaps():
    _profile_mlp(runs=2)
    fw = profiler.framework_summary()
    cov = profiler.coverage()
    assert not fw["op_detail"] and fw["ops"] == [] and fw["op_framework_ms"] == 0
    assert fw["framework_ms"] == pytest.approx(cov["unexplained_ms"])
    assert fw["share"] == pytest.approx(cov["unexplained_ms"] / cov["exe_run_ms"])
    text = profiler.report()
    assert ("Framework time: %g ms (%.2f %% of exe.run): executor gaps %g ms + per-op framework time: profile with "
            "tracer_option='OpDetail'" % (fw["framework_ms"], 100 * fw["share"], fw["gaps_ms"])) in text
    assert "Framework vs Kernel" not in text


def _op_detail_events():
    # Executor::run [0, 100us): mul [10, 60) with infer_shape [12, 15) and compute [16, 56); relu [62, 90) with
    # compute [70, 88) and no infer_shape child; gaps: 100 - 50 - 28 = 22 us
    us = 1000
    return [
        _ev("mul/infer_shape", "OperatorInner", 12 * us, 15 * us, parent=2, depth=2),
        _ev("mul/compute", "OperatorInner", 16 * us, 56 * us, parent=2, depth=2),
        _ev("mul", "Operator", 10 * us, 60 * us, parent=5, depth=1),
        _ev("relu/compute", "OperatorInner", 70 * us, 88 * us, parent=4, depth=2),
        _ev("relu", "Operator", 62 * us, 90 * us, parent=5, depth=1),
        _ev("Executor::run", "Executor", 0, 100 * us),
    ]


def test_framework_vs_kernel_from_op_detail_children():
    evs = _op_detail_events()
    fw = profiler.framework_summary(evs)
    assert fw["op_detail"]
    mul, relu = fw["ops"]
    assert mul == {"op": "mul", "calls": 1, "total_ms": 0.05, "kernel_ms": 0.04, "infer_shape_ms": 0.003,
                   "framework_ms": pytest.approx(0.007)}
    assert relu["kernel_ms"] == 0.018 and relu["infer_shape_ms"] == 0 and relu["framework_ms"] == 0.01
    assert fw["gaps_ms"] == pytest.approx(0.022) and fw["op_framework_ms"] == pytest.approx(0.017)
    assert fw["framework_ms"] == pytest.approx(0.039) and fw["share"] == pytest.approx(0.39)
    text = profiler.report(event_list=evs, wall_ns=200_000)
    assert "Framework time: 0.039 ms (39.00 % of exe.run): executor gaps 0.022 ms + per-op framework time 0.017 ms" \
        in text
    section = text[text.index("Framework vs Kernel"):]
    assert re.search(r"^mul\s+1\s+0\.05\s+0\.04\s+0\.003\s+0\.007\s+14\.00$", section, re.M)
    assert re.search(r"^relu\s+1\s+0\.028\s+0\.018\s+0\s+0\.01\s+35\.71$", section, re.M)
    assert _rows(profiler.summary(event_list=evs, wall_ns=200_000))["Executor::run"]["wall_ratio"] == 0.5


@pytest.mark.parametrize("option", ["OpDetail", "AllOpDetail"])
def test_tracer_option_is_recorded_in_the_session(option):
    _profile_mlp(runs=1, tracer_option=option)
    assert profiler._state.tracer_option == option


# ---- preempted samples

def test_preempted_rule():
    ms = 1_000_000
    assert profiler.preempted(_ev("mul", "Operator", 0, 4 * ms, cpu=30_000))  # a 4 ms mul with 30 us of CPU
    assert not profiler.preempted(_ev("mul", "Operator", 0, 4 * ms, cpu=3 * ms))  # busy the whole time
    assert not profiler.preempted(_ev("mul", "Operator", 0, 300_000, cpu=120_000))  # < half, but lost < 200 us
    assert not profiler.preempted(_ev("mul", "Operator", 0, 4 * ms))  # not measured
    assert not profiler.preempted({"dur_ns": 4 * ms})  # a profile from before cpu_ns existed


def test_preempted_rows_are_marked_and_counted(tmp_path):
    ms = 1_000_000
    evs = [_ev("mul", "Operator", 0, 20_000, parent=3, depth=1),
           _ev("mul", "Operator", 30_000, 30_000 + 4 * ms, parent=3, depth=1, cpu=30_000),
           _ev("relu", "Operator", 5 * ms, 6 * ms, parent=3, depth=1, cpu=900_000),
           _ev("Executor::run", "Executor", 0, 7 * ms, cpu=2 * ms)]
    rows = _rows(profiler.summary(event_list=evs))
    assert rows["mul"]["preempted"] == 1 and rows["mul"]["cpu_samples"] == 1
    assert rows["mul"]["cpu_ms"] == 0.03
    assert rows["relu"]["preempted"] == 0 and rows["relu"]["cpu_ms"] == 0.9
    assert rows["Executor::run"]["preempted"] == 1
    text = profiler.report(event_list=evs)
    assert re.search(r"^thread0::mul\*\s+2\s", text, re.M) and re.search(r"^thread0::relu\s+1\s", text, re.M)
    assert "* 2 samples preempted (wall >> thread CPU time): rerun on a quiet machine\n" in text
    assert "preempted" not in profiler.report(event_list=[_ev("relu", "Operator", 0, ms, cpu=900_000)])
    path = profiler.export_chrome_trace(str(tmp_path / "t.json"), event_list=evs)
    xs = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    assert [e["args"].get("preempted") for e in xs] == [None, True, None, True]
    assert xs[1]["args"]["cpu_us"] == 30.0 and "cpu_us" not in xs[2]["args"]


# ---- thread pool

def _pool_events():
    # mul [0, 1000) issues job 7 on 2 threads [100, 900): the caller's part [100, 800) and a worker's [150, 550);
    # relu issues job 8 on 2 threads [1100, 1500): parts [1100, 1500) and [1100, 1500) (fully parallel)
    return [
        _ev("ThreadPool::part", "ThreadPool", 100, 800, parent=1, depth=3, value=7),
        _ev("ThreadPool::job", "ThreadPool", 100, 900, parent=2, depth=2, value=7, args='"parts":2,"threads":2'),
        _ev("mul", "Operator", 0, 1000, parent=6, depth=1, args='"inputs":"X[4, 4]"'),
        _ev("ThreadPool::part", "ThreadPool", 150, 550, thread=1, value=7),
        _ev("ThreadPool::part", "ThreadPool", 1100, 1500, parent=5, depth=2, value=8),
        _ev("ThreadPool::job", "ThreadPool", 1100, 1500, parent=7, depth=1, value=8, args='"parts":2,"threads":2'),
        _ev("Executor::run", "Executor", 0, 2000),
        _ev("relu", "Operator", 1050, 1600, parent=6, depth=1),
        _ev("ThreadPool::part", "ThreadPool", 1100, 1500, thread=1, value=8),
    ]


def test_thread_pool_efficiency_and_idle_time(tmp_path):
    evs = _pool_events()
    pool = profiler.thread_pool_summary(evs)
    by_op = {r["op"]: r for r in pool["ops"]}
    mul, relu = by_op["mul"], by_op["relu"]
    assert (mul["jobs"], mul["threads"]) == (1, 2)
    assert mul["core_ms"] == pytest.approx(1600 / 1e6) and mul["busy_ms"] == pytest.approx(1100 / 1e6)
    assert mul["efficiency"] == pytest.approx(1100 / 1600) and mul["idle_core_ms"] == pytest.approx(500 / 1e6)
    assert relu["efficiency"] == pytest.approx(1.0) and relu["idle_core_ms"] == 0
    assert [r["op"] for r in pool["ops"]] == ["mul", "relu"]  # most idle core time first
    assert pool["workers"] == [1] and pool["worker_busy_ms"] == pytest.approx(800 / 1e6)
    assert pool["utilisation"] == pytest.approx(800 / 2000)
    text = profiler.report(event_list=evs)
    section = text[text.index("Thread Pool Summary"):]
    assert re.search(r"^mul\s+1\s+2\s+0\.0008\s+0\.0011\s+0\.688\s+0\.0005$", section, re.M)
    assert "Pool workers (1 thread): busy 0.0008 ms over 0.002 ms of exe.run: 40.0 % utilised" in section
    assert "Thread Pool" not in profiler.report(event_list=_op_detail_events())
    trace = json.load(open(profiler.export_chrome_trace(str(tmp_path / "t.json"), event_list=evs)))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert names == {1000: "thread0", 1001: "pool worker 1"}


def test_waiting_for_the_pool_is_not_preemption(tmp_path):
    us = 1000
    # mul [0, 1000us) on 1 ms of wall has 350 us of CPU: its job [100, 900us) ran the caller's part [100, 300us),
    # so the caller waited 600 us for the worker: 400 us on the CPU by design, 350 measured: not preempted
    evs = [_ev("ThreadPool::part", "ThreadPool", 100 * us, 300 * us, parent=1, depth=3, value=1),
           _ev("ThreadPool::job", "ThreadPool", 100 * us, 900 * us, parent=2, depth=2, value=1,
               args='"parts":2,"threads":2'),
           _ev("mul", "Operator", 0, 1000 * us, parent=3, depth=1, cpu=350 * us),
           _ev("Executor::run", "Executor", 0, 1100 * us, cpu=440 * us),
           _ev("ThreadPool::part", "ThreadPool", 100 * us, 890 * us, thread=1, value=1)]
    assert profiler.pool_wait_ns(evs) == [0, 600 * us, 600 * us, 600 * us, 0]
    assert profiler.preempted(evs[2]) and not profiler.preempted(evs[2], 600 * us)
    assert all(r["preempted"] == 0 for r in profiler.summary(event_list=evs))
    xs = json.load(open(profiler.export_chrome_trace(str(tmp_path / "t.json"), event_list=evs)))["traceEvents"]
    assert not any(e.get("args", {}).get("preempted") for e in xs)
    evs[2]["cpu_ns"] = 100 * us  # now it did lose the CPU: 100 of 400 us
    assert _rows(profiler.summary(event_list=evs))["mul"]["preempted"] == 1


# ---- memory

def _memory_events():
    # the nested op (close order first) reaches the peak before its parent, which closes with the same mem_peak
    return [
        _ev("feed", "Operator", 0, 10, parent=4, depth=1, mem_in_use=100, mem_peak=100),
        _ev("sum", "Operator", 20, 30, parent=2, depth=2, mem_in_use=500, mem_peak=900,
            args='"inputs":"X[2]"'),  # a kernel's sub-range: no variables
        _ev("recurrent", "Operator", 12, 60, parent=4, depth=1, mem_in_use=300, mem_peak=900,
            args='"output_vars":{"Out":["h"]},"block":0,"index":1,"site":"train.py:7"'),
        _ev("fetch", "Operator", 70, 80, parent=4, depth=1, mem_in_use=200, mem_peak=900),
        _ev("Executor::run", "Executor", 0, 100, mem_in_use=200, mem_peak=900),
    ]


def test_memory_peak_and_the_op_at_it(tmp_path):
    evs = _memory_events()
    mem = profiler.memory_summary(evs)
    assert mem == {"peak_bytes": 900, "event": 1, "op": "sum", "block": None, "index": None, "outputs": [],
                   "site": None}
    evs[1]["mem_peak"] = 800  # now the recurrent op is the first to close at the peak
    mem = profiler.memory_summary(evs)
    assert (mem["op"], mem["block"], mem["index"], mem["outputs"], mem["site"]) == ("recurrent", 0, 1, ["h"],
                                                                                   "train.py:7")
    assert "Memory: peak 900 bytes (0.00 MB) in use in the CPU allocator, at op recurrent (block 0, op 1) writing " \
           "h, created at train.py:7\n" in profiler.report(event_list=evs)
    assert profiler.memory_summary(_pool_events()) is None
    trace = json.load(open(profiler.export_chrome_trace(str(tmp_path / "t.json"), event_list=evs)))["traceEvents"]
    counter = [(e["ts"], e["args"]["bytes_in_use"]) for e in trace if e["ph"] == "C"]
    assert all(e["name"] == "memory" for e in trace if e["ph"] == "C")
    assert counter == [(0.01, 100), (0.03, 500), (0.06, 300), (0.08, 200)]  # op events only, in close order
    evs[3]["mem_in_use"] = 300  # unchanged since the op before: no point of its own
    trace = json.load(open(profiler.export_chrome_trace(str(tmp_path / "t.json"), event_list=evs)))["traceEvents"]
    assert [(e["ts"], e["args"]["bytes_in_use"]) for e in trace if e["ph"] == "C"] == [(0.01, 100), (0.03, 500),
                                                                                         (0.06, 300)]


# ---- the trace keeps the recorded args

def test_trace_args_are_the_recorded_ones(tmp_path):
    evs = _profile_mlp(runs=1)
    path = str(tmp_path / "t.json")
    profiler.export_chrome_trace(path)
    xs = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(evs)
    for x, e in zip(xs, evs):
        expected = json.loads("{" + e["args"] + "}") if e["args"] else {}
        assert {k: v for k, v in x["args"].items() if k not in ("bytes", "GB/s")} == expected
        assert ("bytes" in x["args"]) == (e["bytes"] >= 0)
    op = next(e for e in evs if e["args"])
    assert report_mod.event_args(op) is report_mod.event_args(dict(op))  # parsed once per distinct string


# ---- Fluid compatibility

@pytest.mark.parametrize("state", ["GPU", "All"])
@pytest.mark.skipif(fluid.core.is_compiled_with_cuda(), reason="a CUDA build: its layout is tested below")
def test_gpu_states_on_a_cpu_only_build_print_the_cpu_layout(state, capsys):
    exe, main, loss = _mlp()
    with profiler.profiler(state, profile_path=None):
        exe.run(main, feed={"x": np.ones((4, 16), "float32")}, fetch_list=[loss])
    lines = capsys.readouterr().out.splitlines()
    assert "Place: CPU" in lines and "Place: CUDA" not in lines and "Place: All" not in lines
    note = lines.index(report_mod.NO_GPU_NOTE)
    assert lines[note - 1] == "Place: CPU"
    header = next(line for line in lines if line.startswith("Event"))
    assert "GPU Time" not in header and "CPU Time" not in header
    _profile_mlp(runs=1)
    assert report_mod.NO_GPU_NOTE not in profiler.report()  # state CPU: no note


@pytest.mark.skipif(not fluid.core.is_compiled_with_cuda(), reason="a CPU-only build: its layout is tested above")
def test_all_state_on_a_cuda_build_prints_fluids_gpu_layout_with_the_measured_gpu_time(capsys):
    """A CPU program profiled with 'All' in a CUDA build: Fluid's kAll columns, GPU time 0 (no op ran on a GPU)."""
    exe, main, loss = _mlp()
    with profiler.profiler("All", profile_path=None):
        exe.run(main, feed={"x": np.ones((4, 16), "float32")}, fetch_list=[loss])
    lines = capsys.readouterr().out.splitlines()
    assert "Place: All" in lines and report_mod.NO_GPU_NOTE not in lines
    header = next(line for line in lines if line.startswith("Event"))
    assert header.split()[:9] == ["Event", "Calls", "Total", "CPU", "Time", "(Ratio)", "GPU", "Time", "(Ratio)"]
    row = next(line for line in lines if re.match(r"(thread\d+::)?mul\s", line))
    (cpu_ms, cpu_ratio), gpu_cell = re.findall(r"([0-9.]+) \(([0-9.]+)\)", row)
    assert float(cpu_ms) == pytest.approx(float(row.split()[2]), rel=1e-5) and cpu_ratio == "1.000000"
    assert gpu_cell == ("0.000000", "0.000000")
    assert "GPU Summary" not in "\n".join(lines)


def test_profiler_context_yields_none_as_fluids():
    exe, main, loss = _mlp()
    with profiler.profiler("CPU", profile_path=None, print_report=False) as prof:
        exe.run(main, feed={"x": np.ones((4, 16), "float32")}, fetch_list=[loss])
    assert prof is None
    assert any(e["name"] == "Executor::run" for e in profiler.events())


def test_profiler_class_keeps_its_own_profile(tmp_path, capsys):
    exe, main, loss = _mlp()
    feed = {"x": np.ones((4, 16), "float32")}
    sched = profiler.make_schedule(wait=1, active=2)
    with profiler.Profiler("CPU", sorted_key="total", profile_path=None, schedule=sched) as prof:
        for _ in range(4):
            exe.run(main, feed=feed, fetch_list=[loss])
            prof.step()
        assert prof.step_num == 4
    assert "Sorted by total time" in capsys.readouterr().out
    mine = prof.events()
    assert sum(e["name"] == "Executor::run" for e in mine) == 2  # steps 1 and 2 of the schedule
    _profile_mlp(runs=5)  # a later profile does not change this one's results
    assert prof.events() == mine
    run = _rows(prof.summary())["Executor::run"]
    assert run["calls"] == 2
    # with a schedule the session's clock includes unrecorded steps: % wall is over the recorded events' span
    span = max(e["end_ns"] for e in mine) - min(e["start_ns"] for e in mine)
    assert run["wall_ratio"] == pytest.approx(run["total_ms"] * 1e6 / span)
    assert _rows(profiler.summary())["Executor::run"]["calls"] == 5
    assert re.search(r"^thread0::Executor::run\s+2\s", prof.report(), re.M)
    trace = json.load(open(prof.export(str(tmp_path / "mine.json"))))["traceEvents"]
    assert sum(e.get("name") == "Executor::run" for e in trace) == 2
    # start/stop without `with`
    p = profiler.Profiler("CPU", profile_path=None, print_report=False).start()
    with pytest.raises(RuntimeError, match="a profiler is already running"):
        profiler.Profiler("CPU").start()
    exe.run(main, feed=feed, fetch_list=[loss])
    p.stop()
    assert _rows(p.summary())["Executor::run"]["calls"] == 1


def test_profiler_checks_every_argument_before_starting():
    with pytest.raises(ValueError, match="^tracer option must be 'Default', 'OpDetail', 'AllOpDetail'.$"):
        with profiler.profiler("CPU", tracer_option="Everything"):
            pytest.fail("the body must not run")
    assert not profiler._state.enabled and not fluid.core.is_profiler_enabled()
    with pytest.raises(ValueError, match="^tracer option must be"):
        profiler.Profiler("CPU", tracer_option="default")
    with pytest.raises(TypeError, match="schedule must be a function step -> .* got 3"):
        profiler.Profiler("CPU", schedule=3)
    with pytest.raises(ValueError, match=r"max_events must be an int >= 0 \(0 = unlimited\), got -1"):
        with profiler.profiler("CPU", max_events=-1):
            pass
    with pytest.raises(ValueError, match="max_events must be an int >= 0 .*got '10'"):
        profiler.Profiler("CPU", max_events="10")
    with pytest.raises(ValueError, match="'CPU', 'GPU', 'All'"):
        profiler.Profiler("cpu")
    assert not profiler._state.enabled


def test_summaries_reject_what_is_not_an_event_list():
    with pytest.raises(TypeError, match="event_list must be a list of profiler Event dicts, got str"):
        profiler.summary(event_list="profile.json")
    with pytest.raises(ValueError, match=r"event_list\[1\] is not a profiler event: it lacks 'dur_ns', 'parent'"):
        profiler.report(event_list=[_ev("x", "User", 0, 1), {"name": "y", "category": "User", "start_ns": 0,
                                                          "end_ns": 1, "thread": 0, "tid": 1, "depth": 0,
                                                          "bytes": -1, "args": None}])
    with pytest.raises(ValueError, match=r"event_list\[0\]\['parent'\] = 5 is not an event index \(1 events\)"):
        profiler.summary(event_list=[_ev("x", "User", 0, 1, parent=5)])
    with pytest.raises(ValueError, match="wall_ns must be an int >= 0, got -3"):
        profiler.summary(event_list=[], wall_ns=-3)
    assert profiler.summary(event_list=[]) == [] and profiler.coverage([])["coverage"] is None


# ---- the same figures from real profiles (the recorder's new fields)

def test_op_detail_real_profile_splits_ops_into_kernel_infer_shape_and_framework():
    evs = _profile_mlp(runs=3, tracer_option="OpDetail")
    fw = profiler.framework_summary()
    assert fw["op_detail"]
    by_op = {r["op"]: r for r in fw["ops"]}
    assert {"mul", "relu", "sgd", "mul_grad"} <= set(by_op)
    compute = {}
    for e in evs:
        if e["category"] == "OperatorInner" and e["name"].endswith("/compute"):
            op = evs[e["parent"]]["name"]
            assert e["name"] == op + "/compute"
            compute[op] = compute.get(op, 0) + e["dur_ns"]
    for op, r in by_op.items():
        assert r["kernel_ms"] == pytest.approx(compute.get(op, 0) / 1e6)
        assert r["kernel_ms"] + r["infer_shape_ms"] + r["framework_ms"] == pytest.approx(r["total_ms"])
    assert by_op["mul"]["calls"] == 2 * 3
    assert fw["op_framework_ms"] == pytest.approx(sum(r["framework_ms"] for r in fw["ops"]))
    text = profiler.report()
    assert "Framework vs Kernel" in text and "per-op framework time %g ms" % fw["op_framework_ms"] in text


def test_thread_pool_real_profile():
    before = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    options = fluid.core.thread_pool_options(backoff=0)  # parallel jobs however busy the machine
    try:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.layers.data(name="x", shape=[1 << 17], dtype="float32")
            y = fluid.layers.relu(x)  # 4 x 128K elements: split over the pool (32K elements per thread at least)
        exe = fluid.Executor(fluid.CPUPlace())
        feed = {"x": np.ones((4, 1 << 17), "float32")}
        exe.run(main, feed=feed, fetch_list=[y])
        with profiler.profiler("CPU", profile_path=None, print_report=False):
            for _ in range(3):
                exe.run(main, feed=feed, fetch_list=[y])
    finally:
        fluid.core.thread_pool_options(backoff=options["backoff"])
        fluid.core.set_num_threads(before)
    evs = profiler.events()
    jobs = [e for e in evs if e["name"] == "ThreadPool::job"]
    parts = [e for e in evs if e["name"] == "ThreadPool::part"]
    assert jobs and {p["value"] for p in parts} <= {j["value"] for j in jobs}
    pool = profiler.thread_pool_summary()
    relu = next(r for r in pool["ops"] if r["op"] == "relu")
    relu_jobs = [j for j in jobs if evs[j["parent"]]["name"] == "relu"]
    assert relu["jobs"] == len(relu_jobs) >= 3 and relu["threads"] == 2
    ids = {j["value"] for j in relu_jobs}
    assert relu["busy_ms"] == pytest.approx(sum(p["dur_ns"] for p in parts if p["value"] in ids) / 1e6)
    assert relu["efficiency"] == pytest.approx(relu["busy_ms"] / relu["core_ms"]) and 0 < relu["efficiency"]
    # the workers: the threads that recorded only parts (how many parts a worker gets depends on the machine)
    only_parts = {t for t in {e["thread"] for e in evs}
                  if all(e["name"] == "ThreadPool::part" for e in evs if e["thread"] == t)}
    assert pool["workers"] == sorted(only_parts)
    busy = sum(p["dur_ns"] for p in parts if p["thread"] in only_parts)
    assert pool["worker_busy_ms"] == pytest.approx(busy / 1e6)
    assert "Thread Pool Summary" in profiler.report()


def test_memory_real_profile(tmp_path):
    evs = _profile_mlp(runs=2)
    mem = profiler.memory_summary()
    peak = max(e["mem_peak"] for e in evs)
    assert mem["peak_bytes"] == peak >= max(e["mem_in_use"] for e in evs) > 0
    at = evs[mem["event"]]
    assert at["category"] == "Operator" and at["mem_peak"] == peak and mem["op"] == at["name"]
    earlier = [e for e in evs if e["category"] == "Operator" and e["end_ns"] < at["end_ns"]]
    assert all(e["mem_peak"] < peak for e in earlier)
    assert "Memory: peak %d bytes" % peak in profiler.report()
    trace = json.load(open(profiler.export_chrome_trace(str(tmp_path / "t.json"))))["traceEvents"]
    counter = [e["args"]["bytes_in_use"] for e in trace if e["ph"] == "C"]
    ops = sorted((e for e in evs if e["category"] == "Operator" and e["mem_in_use"] >= 0), key=lambda e: e["end_ns"])
    changes = [e["mem_in_use"] for i, e in enumerate(ops) if i == 0 or e["mem_in_use"] != ops[i - 1]["mem_in_use"]]
    assert counter == changes and counter


def test_a_sleeping_range_is_flagged_like_a_preempted_one():
    def body():
        with profiler.RecordEvent("sleeps"):
            time.sleep(0.02)  # off the CPU for 20 ms: what a preempted sample looks like

    with profiler.profiler("CPU", profile_path=None, print_report=False):
        body()
    evs = {e["name"]: e for e in profiler.events()}
    assert 0 <= evs["sleeps"]["cpu_ns"] and profiler.preempted(evs["sleeps"])
    rows = _rows(profiler.summary())
    assert rows["sleeps"]["preempted"] == 1 and rows["sleeps"]["cpu_samples"] == 1
    assert re.search(r"^thread0::sleeps\*\s+1\s", profiler.report(), re.M)
