"""What every recorded event carries for the tune loop (csrc/profiler.h, docs/profiling.md "What an event
carries"): op events name their variables, creation site and place in the program; copies name their cause, op
and variables (also in the memory::Copy log line); thread CPU time from the sampler; the allocator's bytes in use
and peak; thread-pool jobs and parts; loop steps; OpDetail children; and the work between ops kept out of the op
events (the parent's self time)."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import profiler

L = fluid.layers


def _args(e):
    return json.loads("{" + e["args"] + "}") if e["args"] else {}


def _profile(fn, **kw):
    kw.setdefault("profile_path", None)
    kw.setdefault("print_report", False)
    with profiler.profiler("CPU", **kw):
        fn()
    return profiler.events()


def _mlp(width=64):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 32])
        h = L.fc(x, width, act="relu")
        loss = L.reduce_mean(L.sigmoid(h))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, x, loss


def test_op_events_name_variables_site_and_position(monkeypatch):
    # Positions are those of the program as prepared: with no IR pass rewriting it (elementwise fusion turns the
    # relu and sigmoid into one op), they are the user's program's.
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "all")
    main, exe, x, loss = _mlp()
    feed = {"x": np.ones((4, 32), "float32")}
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]))
    ops = main.global_block().ops
    seen = 0
    for e in evs:
        a = _args(e)
        if e["category"] != "Operator" or "input_vars" not in a:
            continue
        if "index" not in a:  # the executor's own feed and fetch ops are not in the user's program
            assert e["name"] in ("feed", "fetch")
            continue
        op = ops[a["index"]]
        assert a["block"] == 0 and op.type == e["name"]
        assert a["input_vars"] == {slot: op.input(slot) for slot in op.input_names if op.input(slot)}
        assert a["output_vars"] == {slot: op.output(slot) for slot in op.output_names if op.output(slot)}
        if e["name"] in ("mul", "relu", "sigmoid"):  # built on lines of this file
            assert a["site"].startswith(__file__ + ":")
        seen += 1
    assert seen == len(ops)  # the feed and fetch ops the executor adds have no index
    mul = next(e for e in evs if e["name"] == "mul")
    assert _args(mul)["input_vars"]["X"] == ["x"] and _args(mul)["inputs"] == "X[4, 32], Y[32, 64]"


def test_copies_name_their_cause_op_and_variables():
    main, exe, x, loss = _mlp()
    feed = {"x": np.ones((4, 32), "float32")}
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]))
    copies = [_args(e) | {"bytes": e["bytes"], "parent": evs[e["parent"]]["name"]} for e in evs
              if e["category"] == "Memcpy"]
    assert {"cause": "feed", "op": "feed", "src": "feed", "dst": "x", "bytes": 4 * 32 * 4, "parent": "feed"} in copies
    assert {"cause": "fetch", "op": "fetch", "src": loss.name, "dst": "fetch", "bytes": 4,
            "parent": "fetch"} in copies


def _rnn(seq=3, batch=2, width=4):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [seq, batch, width])
        rnn = L.StaticRNN()
        with rnn.step():
            xt = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, width], batch_ref=xt)
            h = L.elementwise_add(xt, h_prev)
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        out = rnn()
        loss = L.reduce_mean(out)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, loss, {"x": np.ones((seq, batch, width), "float32")}


def test_recurrent_steps_and_step_output_copies_carry_the_step():
    main, exe, loss, feed = _rnn()
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]))
    steps = [_args(e) for e in evs if e["name"] == "recurrent::step"]
    assert steps == [{"step": 0}, {"step": 1}, {"step": 2}]
    outs = [_args(e) for e in evs if e["category"] == "Memcpy" and _args(e)["cause"] == "step_output"]
    assert [c["step"] for c in outs] == [0, 1, 2]
    assert all(c["op"] == "recurrent" and c["src"] == c["dst"] != "" for c in outs)
    for e in evs:  # each step-output copy is recorded inside its step
        if e["category"] == "Memcpy" and _args(e)["cause"] == "step_output":
            assert evs[e["parent"]]["name"] == "recurrent::step"


def test_memory_copy_log_line_names_the_cause():
    code = ("import numpy as np, fluidlite as fluid\n"
            "main, startup = fluid.Program(), fluid.Program()\n"
            "with fluid.program_guard(main, startup):\n"
            "    x = fluid.data('x', [2, 3])\n"
            "    y = fluid.layers.scale(x, 2.0)\n"
            "exe = fluid.Executor(fluid.CPUPlace())\n"
            "exe.run(main, feed={'x': np.ones((2, 3), 'float32')}, fetch_list=[y])\n")
    env = dict(os.environ, GLOG_v="4")
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stderr
    lines = [line for line in err.splitlines() if "memory::Copy" in line]
    assert any(line.endswith("memory::Copy 24 Bytes from CPUPlace to CPUPlace for feed feed -> x (op feed)")
               for line in lines), lines
    assert any(line.endswith("memory::Copy 24 Bytes from CPUPlace to CPUPlace for fetch scale_0.tmp_0 -> fetch "
                             "(op fetch)") for line in lines), lines


def test_cpu_time_from_the_sampler_flags_a_sleeping_range():
    def work():
        with profiler.RecordEvent("sleeping"):
            time.sleep(0.05)
        with profiler.RecordEvent("short"):
            pass
    evs = _profile(work)
    sleeping = next(e for e in evs if e["name"] == "sleeping")
    assert 0 <= sleeping["cpu_ns"] < 0.2 * sleeping["dur_ns"]  # off the CPU for most of it
    assert next(e for e in evs if e["name"] == "short")["cpu_ns"] == -1  # no two samples inside


def test_memory_fields_track_the_allocator_and_its_peak():
    main, exe, x, loss = _mlp(width=4096)
    feed = {"x": np.ones((64, 32), "float32")}
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]))  # the first run allocates
    ops = [e for e in evs if e["category"] == "Operator"]
    assert all(e["mem_in_use"] >= 0 and e["mem_peak"] >= e["mem_in_use"] for e in ops)
    by_end = sorted(ops, key=lambda e: e["end_ns"])
    assert all(a["mem_peak"] <= b["mem_peak"] for a, b in zip(by_end, by_end[1:]))  # a running maximum
    # mul allocates its [64, 4096] output (1 MiB) while the fed x is live: the peak rises by at least that.
    feed_op, mul = (next(e for e in ops if e["name"] == n) for n in ("feed", "mul"))
    assert mul["mem_peak"] - feed_op["mem_peak"] >= 64 * 4096 * 4
    assert mul["mem_in_use"] - feed_op["mem_in_use"] >= 64 * 4096 * 4


def test_thread_pool_jobs_and_parts_are_linked():
    old = fluid.core.get_num_threads()
    fluid.core.set_num_threads(2)
    options = fluid.core.thread_pool_options(chunks_per_thread=4, backoff=0)  # parallel however busy the machine
    try:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 1024])
            y = L.relu(x)
        exe = fluid.Executor(fluid.CPUPlace())
        feed = {"x": np.ones((256, 1024), "float32")}  # 256k elements: 8 chunks of 32K (4 per thread)
        evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[y]))
    finally:
        fluid.core.thread_pool_options(chunks_per_thread=options["chunks_per_thread"], backoff=options["backoff"])
        fluid.core.set_num_threads(old)
    jobs = [e for e in evs if e["name"] == "ThreadPool::job"]
    assert jobs and all(evs[j["parent"]]["name"] == "relu" for j in jobs)
    job = jobs[0]
    assert _args(job) == {"parts": 8, "threads": 2}
    parts = [e for e in evs if e["name"] == "ThreadPool::part" and e["value"] == job["value"]]
    assert len(parts) == 8
    # a part the caller ran nests in its job; a worker's is a root of the worker's thread (which chunks each took
    # depends on scheduling: under load one thread may take them all)
    for p in parts:
        assert (p["thread"] == job["thread"] and evs[p["parent"]] is job) or (p["thread"] != job["thread"]
                                                                              and p["parent"] < 0), p


def test_op_detail_adds_infer_shape_and_compute_children():
    main, exe, x, loss = _mlp()
    feed = {"x": np.ones((4, 32), "float32")}
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]), tracer_option="OpDetail")
    mul = next(i for i, e in enumerate(evs) if e["name"] == "mul")
    kids = [e["name"] for e in evs if e["parent"] == mul]
    assert kids == ["mul/infer_shape", "mul/compute"]
    assert all(e["category"] == "OperatorInner" for e in evs if e["name"].startswith("mul/"))
    evs = _profile(lambda: exe.run(main, feed=feed, fetch_list=[loss]))  # Default: none
    assert not any(e["category"] == "OperatorInner" for e in evs)


def test_work_between_ops_is_outside_the_op_events():
    main, exe, x, loss = _mlp()
    feed = {"x": np.ones((4, 32), "float32")}
    evs = _profile(lambda: [exe.run(main, feed=feed, fetch_list=[loss]) for _ in range(5)])
    for i, run in enumerate(evs):
        if run["name"] != "Executor::run":
            continue
        ops = [e for e in evs if e["parent"] == i and e["category"] == "Operator"]
        assert all(a["end_ns"] <= b["start_ns"] for a, b in zip(ops, ops[1:]))
        # The clock is read again before each op: the gaps are the run's self time, not hidden in op events.
        assert run["dur_ns"] - sum(e["dur_ns"] for e in evs if e["parent"] == i) > 0


def test_tracer_option_is_validated():
    with pytest.raises(ValueError, match="tracer option must be 'Default', 'OpDetail', 'AllOpDetail'."):
        profiler.start_profiler("CPU", tracer_option="Everything")
