"""The built-in profiler: report layout, sort orders, nesting and self time, threads, memcpy bytes,
Chrome trace schema, schedule, event cap, reset, and that an off profiler records nothing."""
import json
import re
import threading

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import profiler


@pytest.fixture(autouse=True)
def _programs_as_written(monkeypatch):
    """These tests read profiles of their programs' ops as written: elementwise fusion (on by default) would turn
    their chains into fused_elementwise ops (subprocesses inherit the variable)."""
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")


def _program(n_ops=3):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[16], dtype="float32")
        h = x
        for _ in range(n_ops):
            h = fluid.layers.scale(h, scale=1.5)
    return main, h


def _run(main, fetch, steps=5, batch=4):
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.ones((batch, 16), "float32")
    for _ in range(steps):
        exe.run(main, feed={"x": xv}, fetch_list=[fetch])
    return exe


def _profile(fn, **kw):
    kw.setdefault("profile_path", None)
    kw.setdefault("print_report", False)
    with profiler.profiler("CPU", **kw):
        fn()


ROW = re.compile(r"^(thread\d+::\S+|\S+)\s+(\d+)" + r"\s+(\S+)" * 9 + "$")
HEADER = ["Event", "Calls", "Total", "Min.", "Max.", "Ave.", "Ratio.", "Self.", "Median", "P95", "%", "wall"]


def _parse_report(text):
    lines = text.splitlines()
    assert lines[1] == "------------------------->     Profiling Report     <-------------------------"
    assert "Place: CPU" in lines and "Time unit: ms" in lines
    start = next(i for i, line in enumerate(lines) if line.startswith("Event"))
    header = lines[start].split()
    assert header == HEADER  # Fluid's columns first, in Fluid's order; fluidlite's after them
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        m = ROW.match(line)
        assert m, "unparseable report row: %r" % line
        rows.append((m.group(1), int(m.group(2))) + tuple(float(m.group(i)) for i in range(3, 12)))
    return lines, rows


def test_report_layout_ratios_and_counts(capsys):
    main, h = _program()
    with profiler.profiler("CPU", sorted_key="total", profile_path=None):
        _run(main, h, steps=5)
    out = capsys.readouterr().out
    lines, rows = _parse_report(out)
    assert "Sorted by total time in descending order in the same thread" in lines
    by_name = {r[0]: r for r in rows}
    assert by_name["thread0::scale"][1] == 15 and by_name["thread0::feed"][1] == 5
    assert by_name["thread0::fetch"][1] == 5 and by_name["thread0::Executor::run"][1] == 5
    # Fluid's Ratio.: the thread's event rows sum to 1 (the gap row is not an event)
    assert abs(sum(r[6] for r in rows if not r[0].endswith("/gaps")) - 1.0) < 1e-3
    totals = [r[2] for r in rows]
    assert totals == sorted(totals, reverse=True)
    for _name, _calls, total, mn, mx, ave, _ratio, self_, median, p95, _wall in rows:
        assert mn <= ave <= mx and 0 <= self_ <= total + 1e-9 and mn <= median <= p95 <= mx
    assert "Memcpy Summary" in out and "Scope Summary" in out


@pytest.mark.parametrize("key,col", [("calls", "calls"), ("total", "total_ms"), ("max", "max_ms"),
                                     ("min", "min_ms"), ("ave", "ave_ms")])
def test_every_sort_key_orders_rows(key, col):
    main, h = _program()
    _profile(lambda: _run(main, h))
    rows = profiler.summary(sorted_key=key)
    vals = [r[col] for r in rows]
    assert vals == sorted(vals, reverse=True)
    assert "Sorted by %s" % profiler._SORT_KEYS[key] in profiler.report(key)


def test_bad_state_and_key_name_the_allowed_values():
    with pytest.raises(ValueError, match="'CPU', 'GPU', 'All'"):
        profiler.start_profiler("TPU")
    with pytest.raises(ValueError, match="'calls', 'total', 'max', 'min' or 'ave'"):
        with profiler.profiler("CPU", sorted_key="median"):
            pass


def test_nesting_and_self_time():
    main, h = _program()
    _profile(lambda: _run(main, h, steps=3))
    evs = profiler.events()
    runs = [i for i, e in enumerate(evs) if e["name"] == "Executor::run"]
    assert len(runs) == 3
    for e in evs:
        if e["category"] == "Operator":
            parent = evs[e["parent"]]
            assert parent["name"] == "Executor::run"
            assert parent["start_ns"] <= e["start_ns"] <= e["end_ns"] <= parent["end_ns"]
            assert e["depth"] == parent["depth"] + 1
        if e["category"] == "Memcpy":
            assert evs[e["parent"]]["name"] in ("feed", "fetch")
    for r in profiler.summary():
        assert r["self_ms"] >= 0
    run = next(r for r in profiler.summary() if r["event"] == "Executor::run")
    ops = sum(r["total_ms"] for r in profiler.summary() if r["category"] == "Operator")
    assert run["self_ms"] == pytest.approx(run["total_ms"] - ops, abs=1e-6)


def test_op_events_carry_shapes():
    main, h = _program(1)
    _profile(lambda: _run(main, h, steps=1, batch=7))
    scale = next(e for e in profiler.events() if e["name"] == "scale")
    assert scale["args"].startswith('"inputs":"X[7, 16]","outputs":"Out[7, 16]",')


def test_memcpy_bytes_for_known_feed_and_fetch():
    main, h = _program()
    _profile(lambda: _run(main, h, steps=2, batch=4))
    (cpu,) = profiler.memcpy_summary()
    assert cpu["direction"] == "CPU->CPU"
    assert cpu["count"] == 4  # per run: one feed copy, one fetch copy
    assert cpu["bytes"] == 4 * 4 * 16 * 4


def test_user_ranges_from_two_threads_and_merged_report():
    def work():
        for _ in range(3):
            with profiler.RecordEvent("worker_range"):
                pass

    @profiler.RecordEvent("decorated")
    def decorated():
        return 42

    def body():
        t = threading.Thread(target=work)
        t.start()
        t.join()
        with profiler.RecordEvent("main_range"):
            assert decorated() == 42

    _profile(body)
    evs = profiler.events()
    assert {e["thread"] for e in evs if e["name"] == "worker_range"} != {e["thread"] for e in evs if
                                                                         e["name"] == "main_range"}
    dec = next(e for e in evs if e["name"] == "decorated")
    assert evs[dec["parent"]]["name"] == "main_range"
    text = profiler.report()
    # Fluid's order: the merged report first, with its banner and note, then the per-thread report with its own
    banner = "------------------------->     Profiling Report     <-------------------------"
    assert text.count(banner) == 2
    note = text.index("Note! This Report merge all thread info into one.")
    assert text.index(banner) < note < text.index(banner, note) < re.search(r"thread\d+::", text).start()
    assert text[text.index(banner) + len(banner):note] == "\n\n"
    merged = profiler.summary(merge_threads=True)
    assert next(r for r in merged if r["event"] == "worker_range")["calls"] == 3


def test_chrome_trace_schema(tmp_path):
    main, h = _program()
    path = str(tmp_path / "trace.json")
    with profiler.profiler("CPU", profile_path=path, print_report=False):
        _run(main, h, steps=2)
    with open(path) as f:
        trace = json.load(f)
    evs = trace["traceEvents"]
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in evs)
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in evs)
    complete = [e for e in evs if e["ph"] == "X"]
    assert complete
    for e in complete:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
    runs = [e for e in complete if e["name"] == "Executor::run"]
    for op in (e for e in complete if e["cat"] == "Operator"):
        assert any(r["ts"] <= op["ts"] and op["ts"] + op["dur"] <= r["ts"] + r["dur"] + 1e-3 for r in runs)


def test_schedule_records_only_active_steps():
    main, h = _program(2)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.ones((2, 16), "float32")
    sched = profiler.make_schedule(wait=1, warmup=1, active=2)
    with profiler.Profiler("CPU", profile_path=None, print_report=False, schedule=sched) as prof:
        for _ in range(6):
            exe.run(main, feed={"x": xv}, fetch_list=[h])
            prof.step()
    runs = [e for e in profiler.events() if e["name"] == "Executor::run"]
    assert len(runs) == 2  # steps 2 and 3; step 0 waited, step 1 warmed up and was discarded


def test_event_cap_drops_and_says_so():
    main, h = _program(10)
    before = fluid.core.profiler_event_cap()
    try:
        with profiler.profiler("CPU", profile_path=None, print_report=False, max_events=50):
            _run(main, h, steps=20)
        assert len(profiler.events()) <= 50
        assert "Warning: the event cap (50 events) dropped" in profiler.report()
        # max_events holds for that profile only: the next one records under the cap in force before
        assert fluid.core.profiler_event_cap() == before
        with profiler.profiler("CPU", profile_path=None, print_report=False):
            _run(main, h, steps=20)
        assert len(profiler.events()) > 50 and "dropped" not in profiler.report()
    finally:
        profiler.set_event_cap(before)


@pytest.mark.parametrize("option", [None, "Default", "OpDetail", "AllOpDetail"])
def test_tracer_option_takes_fluids_values(option):
    main, h = _program()
    with profiler.profiler("CPU", profile_path=None, print_report=False, tracer_option=option):
        _run(main, h, steps=1)
    assert any(e["name"] == "Executor::run" for e in profiler.events())


def test_tracer_option_outside_fluids_values_is_fluids_error():
    with pytest.raises(ValueError, match="^tracer option must be 'Default', 'OpDetail', 'AllOpDetail'.$"):
        profiler.start_profiler("CPU", tracer_option="Everything")
    assert not profiler._state.enabled


def test_reset_and_off_records_nothing():
    main, h = _program()
    exe = _run(main, h, steps=2)  # profiler off
    profiler.start_profiler("CPU")
    profiler.reset_profiler()
    assert profiler.events() == []
    profiler.stop_profiler(profile_path=None, print_report=False)
    assert profiler.events() == []
    before = len(fluid.core.collect_events())
    _run(main, h, steps=2)  # off again: nothing new is recorded
    assert len(fluid.core.collect_events()) == before
    profiler.start_profiler("CPU")
    profiler.stop_profiler(profile_path=None, print_report=False)
    assert profiler.events() == []  # nothing ran while it was on
    del exe


def test_report_for_20k_events_is_fast():
    import time
    main, h = _program(50)
    _profile(lambda: _run(main, h, steps=400))
    assert len(profiler.events()) > 20000
    t = time.perf_counter()
    profiler.report("total")
    assert time.perf_counter() - t < 5.0  # generous bound for a shared CI machine; typically ~0.1 s
