"""fluid.profiler.advise(): every finding kind on a small real program built to show it (and absent from one
that does not), shares and evidence checked against the events, the text, and the errors."""
import json
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.profiler import advisor
from fluidlite.profiler._session import Event
from fluidlite.profiler.report import preempted


@pytest.fixture(autouse=True)
def _programs_as_written(monkeypatch):
    """These tests read profiles of their programs' ops as written: elementwise fusion (on by default) would turn
    their chains into fused_elementwise ops (subprocesses inherit the variable)."""
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")


L = fluid.layers


def _run_profiled(build, feed, steps=3, fresh_scope=False, between=None):
    """Build `build()` (returns the fetch list) in a new program, run it twice untimed, then `steps` times under
    the profiler. Returns (main program, events)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fetch = build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    def run():
        s = scope
        if fresh_scope:  # a new Scope per run (parameters copied in): the program is prepared again each time
            s = fluid.Scope()
            for name in main.global_block().vars:
                v = scope.find_var(name)
                if v is not None and main.global_block().vars[name].persistable:
                    s.var(name).get_tensor().set(np.array(v.get_tensor()), fluid.CPUPlace())
        exe.run(main, feed=feed, fetch_list=fetch, scope=s)
    for _ in range(2):
        run()
    with profiler.profiler("CPU", profile_path=None, print_report=False):
        for _ in range(steps):
            run()
            if between:
                between()
    return main, profiler.events()


def _kinds(findings):
    return [f.kind for f in findings]


def _of(findings, kind):
    found = [f for f in findings if f.kind == kind]
    assert found, "no %s finding in %s" % (kind, _kinds(findings))
    return found


def _args(e):
    return json.loads("{" + e["args"] + "}") if e["args"] else {}


def _run_ns(evs):
    return sum(e["dur_ns"] for e in profiler._session.step_events(evs))


# -- 1. fusable chains ---------------------------------------------------------------------------------------


def _primitive_lstm():
    x = fluid.data("x", [3, 2, 4])
    rnn = fluid.layers.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        h_prev = rnn.memory(shape=[-1, 4], batch_ref=x_t)
        c_prev = rnn.memory(shape=[-1, 4], batch_ref=x_t)
        i, f, o, g = fluid.layers.split(fluid.layers.fc(input=[x_t, h_prev], size=16), 4, dim=1)
        i, f, o, g = fluid.layers.sigmoid(i), fluid.layers.sigmoid(f), fluid.layers.sigmoid(o), fluid.layers.tanh(g)
        c = fluid.layers.elementwise_add(fluid.layers.elementwise_mul(f, c_prev), fluid.layers.elementwise_mul(i, g))
        h = fluid.layers.elementwise_mul(o, fluid.layers.tanh(c))
        rnn.update_memory(h_prev, h)
        rnn.update_memory(c_prev, c)
        rnn.step_output(h)
    loss = fluid.layers.mean(rnn())
    fluid.optimizer.SGD(0.1).minimize(loss)
    return [loss]


def test_lstm_cell_chain_estimates_the_part_lstm_unit_replaces():
    main, evs = _run_profiled(_primitive_lstm, {"x": np.ones((3, 2, 4), "float32")}, steps=2)
    f = _of(profiler.advise(programs=main, events=evs, print_report=False), "fusable_chain")[0]
    assert "lstm_unit" in f.fix
    # lstm_unit computes the cell after the split: split, 3 sigmoid, 2 tanh, 3 mul, 1 add forward, and backward the
    # ops writing only their inputs' gradients (3 sigmoid_grad, 2 tanh_grad, 3 mul_grad, 1 add_grad, the split's
    # concat, the sum of the cell state's two gradients); not the fc's bias add nor the sum of h's gradients.
    assert f.evidence["fix_replaces_ops"] == 21
    assert sum(f.evidence["ops"].values()) > 21
    assert f.evidence["whole_chain_saving_ms_per_step"] > 0 and f.estimated_saving_ms > 0


def _chain_program():
    x = L.data(name="x", shape=[64], dtype="float32")
    y = L.data(name="y", shape=[64], dtype="float32")
    a = L.sigmoid(L.scale(x, scale=2.0))
    b = L.tanh(L.elementwise_mul(a, y))
    return [L.elementwise_add(b, x)]


FEED2 = {"x": np.random.RandomState(0).rand(8, 64).astype("float32"),
         "y": np.random.RandomState(1).rand(8, 64).astype("float32")}


def test_fusable_chain_found_with_its_ops_variables_and_share():
    main, evs = _run_profiled(_chain_program, FEED2, steps=4)
    findings = profiler.advise(programs=main, events=evs, print_report=False)
    f = _of(findings, "fusable_chain")[0]
    assert f.evidence["ops"] == {"scale": 1, "sigmoid": 1, "elementwise_mul": 1, "tanh": 1, "elementwise_add": 1}
    assert f.evidence["inputs"] == ["x", "y"]
    assert len(f.evidence["outputs"]) == 1 and f.evidence["intermediates"] == 4
    assert f.evidence["sites"] and all(s.rsplit(":", 1)[0].endswith("test_advisor.py") for s in f.evidence["sites"])
    chain = {"scale", "sigmoid", "elementwise_mul", "tanh", "elementwise_add"}
    chain_ns = sum(e["dur_ns"] for e in evs if e["category"] == "Operator" and e["name"] in chain)
    assert f.share == pytest.approx(chain_ns / _run_ns(evs))
    assert f.evidence["calls_per_step"] == 5
    ev = f.evidence  # the saving: the chain's time less the fused op's, plus the executor's gaps of the removed calls
    assert ev["gaps_saved_ms_per_step"] >= 0 and ev["fused_ms_per_step"] > 0
    assert 0 < f.estimated_saving_ms == pytest.approx(
        ev["chain_ms_per_step"] - ev["fused_ms_per_step"] + ev["gaps_saved_ms_per_step"], rel=1e-3, abs=1e-6)
    assert "BuildStrategy.fuse_elementwise_chains" in f.fix


def test_no_fusable_chain_when_the_intermediate_is_fetched_or_alone():
    def build():
        x = L.data(name="x", shape=[64], dtype="float32")
        r = L.relu(L.fc(x, size=64, bias_attr=False))
        return [L.reduce_sum(r)]  # one elementwise op between two non-elementwise ones: nothing to fuse
    main, evs = _run_profiled(build, {"x": FEED2["x"]})
    assert "fusable_chain" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))

    def fetched():
        x = L.data(name="x", shape=[64], dtype="float32")
        a = L.sigmoid(x)
        return [a, L.tanh(a)]  # a is fetched: it must stay materialised
    main, evs = _run_profiled(fetched, {"x": FEED2["x"]})
    assert "fusable_chain" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 2. duplicate reductions ---------------------------------------------------------------------------------

def _reductions(second_dim):
    def build():
        x = L.data(name="x", shape=[64], dtype="float32")
        s1 = L.reduce_sum(x, dim=[1])
        ident = L.assign(x)
        s2 = L.reduce_sum(L.elementwise_mul(x, ident), dim=[second_dim])
        return [s1, s2]
    return build


def test_duplicate_reductions_over_one_input_and_axes(monkeypatch):
    # With the fuse_reductions pass (on by default) the run has one fused_reduce and nothing to find.
    main, evs = _run_profiled(_reductions(1), {"x": FEED2["x"]})
    names = {e["name"] for e in evs if e["category"] == "Operator"}
    assert "fused_reduce" in names and not names & {"reduce_sum", "assign", "elementwise_mul"}
    assert "duplicate_reduction" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_reductions")
    main, evs = _run_profiled(_reductions(1), {"x": FEED2["x"]})
    f = _of(profiler.advise(programs=main, events=evs, print_report=False), "duplicate_reduction")[0]
    assert f.evidence["input"] == "x" and f.evidence["ops"] == ["reduce_sum", "reduce_sum"]
    assert [c.split(":")[0] for c in f.evidence["copies"]] == ["assign"]
    red = [e["dur_ns"] for e in evs if e["name"] == "reduce_sum"]
    assign = sum(e["dur_ns"] for e in evs if e["name"] == "assign")
    assert f.share == pytest.approx((sum(red) + assign) / _run_ns(evs))
    assert "reduce_sum" in f.fix and "fuse_reductions pass" in f.fix


def test_no_duplicate_reduction_over_other_axes():
    main, evs = _run_profiled(_reductions(0), {"x": FEED2["x"]})
    assert "duplicate_reduction" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 3. gradient sums ----------------------------------------------------------------------------------------

def _rnn(seq=6, batch=4, hidden=16):
    def build():
        x = L.data(name="x", shape=[seq, batch, hidden], dtype="float32", append_batch_size=False)
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
            h = L.tanh(L.fc(input=[x_t, h_prev], size=hidden))
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        loss = L.mean(rnn())
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return [loss]
    return build, {"x": np.random.RandomState(0).rand(seq, batch, hidden).astype("float32")}


def test_gradient_sums_of_a_recurrent_parameter():
    build, feed = _rnn()
    main, evs = _run_profiled(build, feed, steps=2)
    f = [g for g in _of(profiler.advise(programs=main, events=evs, print_report=False), "gradient_sums")
         if g.evidence.get("op") == "recurrent_grad"][0]
    internal = [e for e in evs if e["name"] == "sum" and evs[e["parent"]]["name"] == "recurrent_grad::step"
                and "input_vars" not in _args(e)]
    assert f.evidence["sums_per_step"] == len(internal) / 2
    assert f.evidence["loop_steps_per_run"] == 6
    assert f.share == pytest.approx(sum(e["dur_ns"] for e in internal) / _run_ns(evs))


def test_no_gradient_sums_without_repeated_accumulation():
    def build():
        x = L.data(name="x", shape=[64], dtype="float32")
        loss = L.mean(L.fc(x, size=8))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return [loss]
    main, evs = _run_profiled(build, {"x": FEED2["x"]})
    assert "gradient_sums" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 4. copies by cause --------------------------------------------------------------------------------------

def test_copies_by_cause_with_bytes_and_time():
    main, evs = _run_profiled(_chain_program, FEED2, steps=3)
    copies = {f.evidence["cause"]: f for f in profiler.advise(programs=main, events=evs, top=50, print_report=False)
              if f.kind == "copies"}
    feed_copies = [e for e in evs if e["category"] == "Memcpy" and _args(e).get("cause") == "feed"]
    assert "feed" in copies
    f = copies["feed"]
    assert f.evidence["bytes_per_step"] == sum(e["bytes"] for e in feed_copies) / 3 == FEED2["x"].nbytes * 2
    assert f.evidence["copies_per_step"] == 2
    assert f.share == pytest.approx(sum(e["dur_ns"] for e in feed_copies) / _run_ns(evs))
    assert f.evidence["by_op_per_step"] == {"feed": 2}
    assert f.evidence["by_variable_per_step"] == {"feed -> x": 1, "feed -> y": 1}  # from the feed list


def test_no_copies_without_feed_or_fetch():
    def build():
        c = L.fill_constant(shape=[4], dtype="float32", value=1.0)
        L.scale(c, scale=2.0)
        return []
    main, evs = _run_profiled(build, {})
    assert not any(e["category"] == "Memcpy" for e in evs)
    assert "copies" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 5. per-run setup ----------------------------------------------------------------------------------------

def _mlp():
    x = L.data(name="x", shape=[64], dtype="float32")
    return [L.fc(L.fc(x, size=32, act="relu"), size=4)]


def test_per_run_setup_with_a_new_scope_per_run():
    main, evs = _run_profiled(_mlp, {"x": FEED2["x"]}, steps=4, fresh_scope=True)
    f = _of(profiler.advise(programs=main, events=evs, print_report=False), "per_run_setup")[0]
    prepares = [e for e in evs if e["name"] == "Executor::prepare"]
    assert f.evidence["events_per_step"]["Executor::prepare"] == len(prepares) / 4 == 1
    assert "Scope" in f.fix


def test_no_per_run_setup_when_the_prepared_program_is_reused():
    main, evs = _run_profiled(_mlp, {"x": FEED2["x"]}, steps=4)
    assert "per_run_setup" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 6. dispatch-bound ---------------------------------------------------------------------------------------

def test_dispatch_bound_run_of_tiny_ops():
    def build():
        v = L.data(name="x", shape=[4], dtype="float32", append_batch_size=False)
        for _ in range(60):
            v = L.scale(v, scale=1.0001)
        return [v]
    main, evs = _run_profiled(build, {"x": np.ones(4, "float32")})
    findings = profiler.advise(programs=main, events=evs, print_report=False)
    f = _of(findings, "dispatch_bound")[0]
    ops = [e for e in evs if e["category"] == "Operator" and "input_vars" in _args(e)]
    assert f.evidence["ops_per_step"] == len(ops) / 3 >= 60
    assert f.evidence["sub_microsecond_ops_per_step"] == sum(e["dur_ns"] < 1000 for e in ops) / 3
    ranked = [g for g in findings if g.kind != "preempted"]  # a busy machine's caveat may come first
    if f.share >= advisor.HEADLINE_DISPATCH_SHARE:
        assert ranked[0].kind == "dispatch_bound"
    assert ranked[0].kind != "hotspot"


def test_not_dispatch_bound_with_few_large_ops():
    def build():
        x = L.data(name="x", shape=[256], dtype="float32")
        return [L.fc(x, size=256)]
    main, evs = _run_profiled(build, {"x": np.ones((256, 256), "float32")})
    assert "dispatch_bound" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 7. thread utilisation (synthetic events: a real pool's balance depends on the machine's load) -----------

def _ev(name, category, start, end, parent=-1, depth=0, thread=0, args="", nbytes=-1, cpu=-1, value=-1):
    return Event(name=name, category=category, start_ns=start, end_ns=end, dur_ns=end - start, thread=thread,
                 tid=100 + thread, depth=depth, parent=parent, bytes=nbytes, args=args, cpu_ns=cpu, mem_in_use=-1,
                 mem_peak=-1, value=value)


def _pool_profile(worker_part_ns):
    """One run: a conv2d op issuing one 2-thread job of 1 ms; the caller's part lasts 1 ms, the worker's
    `worker_part_ns`."""
    op_args = '"inputs":"Input[8, 3, 32, 32]","outputs":"Output[8, 16, 32, 32]","input_vars":{"Input":["x"]},' \
              '"output_vars":{"Output":["y"]},"block":0,"index":0'
    return [_ev("Executor::run", "Executor", 0, 2_000_000),
            _ev("conv2d", "Operator", 100_000, 1_900_000, parent=0, depth=1, args=op_args),
            _ev("ThreadPool::job", "ThreadPool", 200_000, 1_200_000, parent=1, depth=2,
                args='"parts":2,"threads":2', value=7),
            _ev("ThreadPool::part", "ThreadPool", 200_000, 1_200_000, parent=2, depth=3, value=7),
            _ev("ThreadPool::part", "ThreadPool", 200_000, 200_000 + worker_part_ns, thread=1, value=7)]


def test_poor_thread_utilisation_names_the_op_and_idle_core_time():
    f = _of(profiler.advise(programs=[], events=_pool_profile(200_000), print_report=False),
            "thread_utilisation")[0]
    assert f.evidence["op"] == "conv2d"
    assert f.evidence["efficiency"] == pytest.approx(1_200_000 / 2_000_000)
    assert f.evidence["idle_core_ms_per_step"] == pytest.approx(0.8)
    assert f.estimated_saving_ms == pytest.approx(0.4)  # the idle core time over the job's threads
    assert f.share == pytest.approx(1_000_000 / 2_000_000)


def test_balanced_pool_is_not_flagged():
    findings = profiler.advise(programs=[], events=_pool_profile(950_000), print_report=False)
    assert "thread_utilisation" not in _kinds(findings)


# -- 8. preempted samples ------------------------------------------------------------------------------------

def _preempted_profile(cpu_of_mul):
    args = '"inputs":"X[32, 128], Y[128, 512]","outputs":"Out[32, 512]","input_vars":{"X":["x"],"Y":["w"]},' \
           '"output_vars":{"Out":["y"]},"block":0,"index":0,"site":"/home/u/train.py:42"'
    return [_ev("Executor::run", "Executor", 0, 5_000_000, cpu=cpu_of_mul + 1_000_000),
            _ev("mul", "Operator", 500_000, 4_500_000, parent=0, depth=1, args=args, cpu=cpu_of_mul)]


def test_preempted_samples_flag_the_innermost_event():
    findings = profiler.advise(programs=[], events=_preempted_profile(30_000), print_report=False)
    f = _of(findings, "preempted")[0]
    assert f.evidence["events"] == {"mul": 1}  # not Executor::run too: it lost the same time
    assert f.evidence["worst"] == {"name": "mul", "dur_ms": 4.0, "cpu_ms": 0.03, "site": "/home/u/train.py:42"}
    assert f.evidence["lost_ms_per_step"] == pytest.approx(3.97)
    assert f.estimated_saving_ms == 0.0  # a caveat on the profile, not a change to the program
    assert f.share == pytest.approx(3.97 / 5.0)
    assert "re-run on a quiet machine or with fewer threads" in f.fix
    assert findings[0].kind == "preempted"  # listed first: every figure after it carries the lost time


def test_not_preempted_when_the_cpu_time_matches():
    assert "preempted" not in _kinds(profiler.advise(programs=[], events=_preempted_profile(3_900_000),
                                                     print_report=False))
    assert not preempted(_preempted_profile(-1)[1])  # not measured


def test_text_format():
    advice = profiler.advise(programs=[], events=_preempted_profile(30_000), print_report=False)
    assert isinstance(advice, profiler.Advice) and advice.steps == 1 and advice.step_ms == 5.0
    text = str(advice)
    assert text.startswith("\n------------------------->     Advisor     <-------------------------\n\n"
                           "Profile: 1 steps (exe.run), 5.000 ms per step, 2 events; findings ranked by estimated "
                           "saving\n\n1. [preempted] 1 preempted samples lost 3.970 ms of CPU: the profile is "
                           "unreliable\n   share 79.4% of the step, estimated saving 0.000 ms per step\n"
                           "   events: mul: 1\n   lost_ms: 3.97\n   lost_ms_per_step: 3.97\n"
                           "   worst: name: mul, dur_ms: 4, cpu_ms: 0.03, site: /home/u/train.py:42\n"
                           "   fix: re-run on a quiet machine")
    assert [f.to_dict()["kind"] for f in advice] == _kinds(advice)


def test_print_report_prints_the_text(capsys):
    advice = profiler.advise(programs=[], events=_preempted_profile(30_000))
    assert capsys.readouterr().out == str(advice)


# -- 9. Python time outside exe.run ---------------------------------------------------------------------------

def test_python_time_between_runs():
    main, _ = _run_profiled(_mlp, {"x": FEED2["x"]}, steps=3, between=lambda: time.sleep(0.02))
    f = _of(profiler.advise(print_report=False), "python_time")[0]
    assert f.evidence["runs"] == 3
    # The sleeps after the first two runs lie between runs (the last one after the last run does not).
    assert f.evidence["outside_ms"] >= 2 * 20
    assert f.evidence["outside_ms"] == pytest.approx(f.evidence["span_ms"] - f.evidence["exe_run_wall_ms"], abs=1e-3)
    # The exe.run calls are the Python-side Executor.run events.
    runs = [e for e in profiler.events() if e["name"] == "Executor.run"]
    assert f.evidence["exe_run_wall_ms"] == pytest.approx(sum(e["dur_ns"] for e in runs) / 1e6, abs=1e-3)
    assert f.evidence["span_ms"] == pytest.approx((runs[-1]["end_ns"] - runs[0]["start_ns"]) / 1e6, abs=1e-3)
    assert f.estimated_saving_ms == pytest.approx(f.evidence["outside_ms"] / 2, abs=1e-3)  # evidence: 0.1 us
    assert f.share == pytest.approx(f.evidence["outside_ms"] / f.evidence["span_ms"], rel=1e-3)


def test_no_python_time_for_explicit_events():
    main, evs = _run_profiled(_mlp, {"x": FEED2["x"]}, steps=3, between=lambda: time.sleep(0.005))
    assert "python_time" not in _kinds(profiler.advise(programs=main, events=evs, print_report=False))


# -- 10. hotspot ---------------------------------------------------------------------------------------------

def test_hotspot_when_nothing_structural():
    def build():
        x = L.data(name="x", shape=[256], dtype="float32")
        return [L.reduce_sum(L.fc(x, size=2048, bias_attr=False))]
    threads = fluid.core.get_num_threads()
    fluid.core.set_num_threads(1)  # one thread: a busy machine must not make the pool's balance the finding
    try:
        main, evs = _run_profiled(build, {"x": np.ones((64, 256), "float32")})
    finally:
        fluid.core.set_num_threads(threads)
    findings = profiler.advise(programs=main, events=evs, print_report=False)
    f = [g for g in findings if g.kind != "preempted"][0]  # a busy machine's preemption caveat may come first
    assert f.kind == "hotspot" and f.evidence["op"] == "mul"
    mul_ns = sum(e["dur_ns"] for e in evs if e["name"] == "mul")
    assert f.share == pytest.approx(mul_ns / _run_ns(evs))
    assert f.evidence["shapes"] == {"X[64, 256], Y[256, 2048]": 3}
    assert f.estimated_saving_ms == 0.0


# -- the API: programs recorded, errors ------------------------------------------------------------------------

def test_programs_recorded_while_profiling():
    main, _ = _run_profiled(_mlp, {"x": FEED2["x"]})
    assert profiler._session._state.programs == [main]
    profiler.start_profiler("CPU")
    profiler.stop_profiler(profile_path=None, print_report=False)
    assert profiler._session._state.programs == []


def test_no_profile_is_a_clear_error():
    profiler.reset_profiler()
    with pytest.raises(RuntimeError, match=r"advise: no profile to analyse: run the steps under "
                                           r"fluid.profiler.profiler\(...\)"):
        profiler.advise()
    with pytest.raises(RuntimeError, match="no profile"):
        profiler.advise(events=[])


def test_bad_arguments():
    evs = _preempted_profile(30_000)
    with pytest.raises(ValueError, match=r"advise: top must be an integer >= 1, got 0"):
        profiler.advise(events=evs, top=0)
    with pytest.raises(TypeError, match=r"advise: programs must be None, a fluidlite Program or a list of "
                                        r"Programs, got 'str'"):
        profiler.advise(programs="main", events=evs)
    with pytest.raises(TypeError, match=r"advise: events must be a list of Event dicts"):
        profiler.advise(events="trace.json")
    with pytest.raises(ValueError, match=r"advise: events\[0\] is not a profiler Event: missing category"):
        profiler.advise(events=[{"name": "x", "start_ns": 0, "end_ns": 1, "dur_ns": 1, "parent": -1, "bytes": -1,
                                 "args": None}])
    bad = [dict(e) for e in evs]
    bad[1]["parent"] = 5
    with pytest.raises(ValueError, match=r"events\[1\] \(mul\) has parent 5: expected -1 or an earlier index"):
        profiler.advise(events=bad)
    bad = [dict(e) for e in evs]
    bad[1]["args"] = '"inputs":'
    with pytest.raises(ValueError, match=r"advise: event 'mul' has malformed args"):
        profiler.advise(events=bad)


def test_bench_advise_prints_findings_after_the_timing(capsys):
    from fluidlite.bench.__main__ import main
    assert main(["--model", "overhead", "--advise", "--iterations", "5", "--repeat", "2", "--warmup", "1",
                 "--no_progress"]) == 0
    out = capsys.readouterr().out
    assert out.index("------------------------->     Advisor     <-------------------------") > out.index("ms/step")
    assert "Profile: 10 steps (exe.run)" in out
    assert "1. [dispatch_bound] dispatch-bound: 1002 ops per step" in out or "[dispatch_bound]" in out


def test_run_model_returns_the_findings_as_data():
    from fluidlite.bench import run_model
    result = run_model("overhead", iterations=3, repeat=1, warmup=1, progress=False, advise=True)
    assert result["advice"] and {"kind", "title", "share", "estimated_saving_ms", "evidence", "fix"} == \
        set(result["advice"][0])
    assert result["advice_text"].count("\n1. [") == 1
