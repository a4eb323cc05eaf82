"""Profile diffs: save_profile/load_profile round trip and format checks, diff() of real profiles of two programs,
the step-time noise band, and the bench's --save-profile / --baseline flags."""
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.profiler.diff import FORMAT, MIN_SAMPLES, step_change


@pytest.fixture(autouse=True, scope="module")
def _programs_as_written():
    """These tests diff profiles of their programs' ops as written: elementwise fusion (on by default) would turn
    their chains into fused_elementwise ops (subprocesses inherit the variable). Module scope: the profiles are
    module fixtures."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")
        yield


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 4


def _profile_program(activation):
    """Profile STEPS runs of fc -> `activation` -> reduce_mean; returns the events."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8], "float32")
        h = fluid.layers.fc(x, 16)
        h = activation(h)
        out = fluid.layers.reduce_mean(h)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.ones((4, 8), "float32")}
    with profiler.profiler("CPU", profile_path=None, print_report=False):
        for _ in range(STEPS):
            exe.run(main, feed=feed, fetch_list=[out], scope=scope)
    return profiler.events()


@pytest.fixture(scope="module")
def two_profiles():
    before = _profile_program(lambda h: fluid.layers.tanh(fluid.layers.scale(h, 2.0)))
    before_rows = profiler.summary(merge_threads=True)
    after = _profile_program(fluid.layers.relu)
    after_rows = profiler.summary(merge_threads=True)
    return before, before_rows, after, after_rows


def test_save_load_round_trip(tmp_path, two_profiles):
    events = two_profiles[2]  # the session's last profile: what save_profile saves by default
    path = tmp_path / "a.json"
    saved = profiler.save_profile(path, step_ms=[1.0, 1.5, 2.0, 1.2], settings={"model": "toy", "batch_size": 4})
    assert saved.path == str(path) and not [p for p in os.listdir(tmp_path) if p != "a.json"]  # no temp left
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"], doc["event_count"]) == (FORMAT, 1, len(events))
    assert doc["fluidlite"] == fluid.__version__ and doc["machine"]["cpu_count"] == os.cpu_count()
    loaded = profiler.load_profile(path)
    assert loaded.step_ms == [1.0, 1.5, 2.0, 1.2] and loaded.steps == 4
    assert loaded.settings == {"model": "toy", "batch_size": 4}
    for got, want in zip(loaded.events, events):
        assert {k: got[k] for k in want} == dict(want)
    assert len(loaded.events) == len(events)
    # The session's wall time (start to stop) covers every event.
    assert loaded.wall_ns >= max(e["end_ns"] for e in events) - min(e["start_ns"] for e in events)
    assert profiler.summary(event_list=loaded.events) == profiler.summary(event_list=events)


def test_profile_without_step_times_counts_executor_runs(two_profiles):
    prof = profiler.Profile(two_profiles[0])
    runs = [e for e in two_profiles[0] if e["name"] == "Executor.run" and e["parent"] < 0]
    assert prof.steps == STEPS == len(runs)
    assert prof.step_ms == [e["dur_ns"] / 1e6 for e in runs]


def _write(path, text):
    path.write_text(text)
    return path


def test_corrupt_and_foreign_files(tmp_path, two_profiles):
    good = profiler.save_profile(tmp_path / "good.json", events=two_profiles[0])
    doc = good.to_json()
    cases = [
        ("{not json", r"bad.json is not a readable fluidlite profile: not JSON"),
        (json.dumps({"traceEvents": []}), r"looks like a Chrome trace"),
        (json.dumps({"format": "other"}), r"no \"format\": 'fluidlite-profile' key \(found 'other'\)"),
        (json.dumps(dict(doc, version=99)), r"format version 99; this fluidlite reads version 1 to 1"),
        (json.dumps(dict(doc, events=dict(doc["events"], name=doc["events"]["name"][:-1]))),
         r"event column 'name' has %d values, expected %d" % (len(two_profiles[0]) - 1, len(two_profiles[0]))),
        (json.dumps(dict(doc, events={k: v for k, v in doc["events"].items() if k != "end_ns"})),
         r"event column 'end_ns' is missing"),
        (json.dumps(dict(doc, events=dict(doc["events"], depth=["x"] * len(two_profiles[0])))),
         r"event column 'depth' holds a value that is not an integer"),
        (json.dumps(dict(doc, strings=doc["strings"][:1])), r"event column 'name' indexes past the string table"),
        (json.dumps(dict(doc, events=dict(doc["events"], parent=[len(two_profiles[0])] * len(two_profiles[0])))),
         r"'parent' points outside the %d events" % len(two_profiles[0])),
        (json.dumps(dict(doc, events=dict(doc["events"], tid=7))), r"event column 'tid' is not a list"),
        (json.dumps(dict(doc, step_ms=[1.0, -2.0])), r"bad session facts \(step_ms must hold positive"),
        (json.dumps(dict(doc, wall_ns="1 s")), r"'wall_ns' is '1 s', not a number of nanoseconds"),
    ]
    for text, message in cases:
        with pytest.raises(ValueError, match=message):
            profiler.load_profile(_write(tmp_path / "bad.json", text))
    # A Chrome trace written by the profiler itself is recognised as one.
    profiler.export_chrome_trace(str(tmp_path / "trace.json"))
    with pytest.raises(ValueError, match=r"trace.json is not a readable .*Chrome trace"):
        profiler.load_profile(tmp_path / "trace.json")
    with pytest.raises(TypeError, match=r"path must be a file path \(str or os.PathLike\), got int"):
        profiler.load_profile(3)
    with pytest.raises(FileNotFoundError):
        profiler.load_profile(tmp_path / "missing.json")


def test_bad_arguments(two_profiles):
    events = two_profiles[0]
    with pytest.raises(TypeError, match=r"a must be a saved-profile path, a Profile or a list of events, got int"):
        profiler.diff(1, events)
    with pytest.raises(ValueError, match=r"b: the events lack the keys category, dur_ns"):
        profiler.diff(events, [{"name": "x", "start_ns": 0, "end_ns": 1, "thread": 0, "parent": -1, "bytes": -1}])
    with pytest.raises(ValueError, match=r"steps_a must be a number of steps >= 1, got 0"):
        profiler.diff(events, events, steps_a=0)
    with pytest.raises(TypeError, match=r"steps_b must be a sequence of per-step times in ms, got 'fast'"):
        profiler.diff(events, events, steps_b="fast")
    with pytest.raises(ValueError, match=r"step_ms must hold positive finite per-step times in ms, got nan"):
        profiler.save_profile("/tmp/unused.json", events=events, step_ms=[1.0, float("nan")])
    with pytest.raises(ValueError, match=r"no profile to save: no events were recorded"):
        profiler.save_profile("/tmp/unused.json", events=[])


def test_save_errors_leave_no_file(tmp_path, two_profiles):
    events = two_profiles[0]
    missing = tmp_path / "no" / "a.json"
    with pytest.raises(FileNotFoundError, match=r"save_profile: %s: directory %s does not exist"
                       % (missing, missing.parent)):
        profiler.save_profile(missing, events=events)
    with pytest.raises(TypeError, match=r"settings and machine must hold only JSON values \(Object of type set"):
        profiler.save_profile(tmp_path / "a.json", events=events, settings={"model": {1, 2}})
    with pytest.raises(TypeError, match=r"path must be a file path \(str or os.PathLike\), got NoneType"):
        profiler.save_profile(None, events=events)
    assert os.listdir(tmp_path) == []
    # Saving over an existing profile replaces it whole.
    profiler.save_profile(tmp_path / "a.json", events=events)
    top = [e for e in events if e["parent"] < 0]
    profiler.save_profile(tmp_path / "a.json", events=top)
    assert len(profiler.load_profile(tmp_path / "a.json").events) == len(top) < len(events)
    assert os.listdir(tmp_path) == ["a.json"]


def test_diff_of_two_real_programs(two_profiles):
    before, before_rows, after, after_rows = two_profiles
    d = profiler.diff(before, after)
    assert d.per_step and (d.steps_a, d.steps_b) == (STEPS, STEPS)  # from the Executor.run events
    assert sorted(d.removed) == ["scale", "tanh"]
    assert d.added == ["relu"]
    rows = {r["event"]: r for r in d.rows}
    assert set(rows) == {r["event"] for r in before_rows} | {r["event"] for r in after_rows}
    # Totals, self times and calls are summary()'s, per step.
    for side, summary_rows in (("a", before_rows), ("b", after_rows)):
        for s in summary_rows:
            r = rows[s["event"]]
            assert r["total_ms_" + side] * STEPS == pytest.approx(s["total_ms"])
            assert r["self_ms_" + side] * STEPS == pytest.approx(s["self_ms"])
            assert r["calls_" + side] * STEPS == pytest.approx(s["calls"])
    assert rows["tanh"]["total_ms_b"] is None and rows["tanh"]["change"] == "removed"
    assert rows["relu"]["total_ms_a"] is None and rows["relu"]["delta_ms"] == rows["relu"]["total_ms_b"]
    mul = rows["mul"]
    assert mul["change"] == "changed" and mul["calls_a"] == mul["calls_b"] == 1
    assert mul["delta_ms"] == pytest.approx(mul["total_ms_b"] - mul["total_ms_a"])
    assert mul["delta_pct"] == pytest.approx(100 * mul["delta_ms"] / mul["total_ms_a"])
    # The share is the event's time over the profiled step time (here the Executor.run samples: one per exe.run).
    run_ms = sum(e["dur_ns"] for e in before if e["name"] == "Executor.run") / 1e6
    assert rows["Executor.run"]["share_a"] == pytest.approx(1.0)
    assert mul["share_a"] == pytest.approx(mul["total_ms_a"] * STEPS / run_ms)
    deltas = [abs(r["delta_ms"]) for r in d.rows]
    assert deltas == sorted(deltas, reverse=True)
    text = str(d)
    assert "Event" in text and "Calls A/B" in text and "Total A/B" in text and "Share A/B" in text
    assert "Removed (only in A): " in text and "Added (only in B): relu" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("relu "))
    assert "-/1 " in line and "(added)" in line
    assert text.splitlines()[2].startswith("step time ")


def test_diff_with_raw_totals_when_steps_are_unknown(two_profiles):
    before, before_rows = two_profiles[0], two_profiles[1]
    no_runs = [dict(e, name="X::run") if e["name"] in ("Executor.run", "Executor::run") else e for e in before]
    d = profiler.diff(no_runs, no_runs)
    assert not d.per_step and d.step is None
    assert "step time: unknown" in d.text() and "step counts unknown" in d.text()
    mul = next(r for r in d.rows if r["event"] == "mul")
    assert mul["total_ms_a"] == pytest.approx(next(r["total_ms"] for r in before_rows if r["event"] == "mul"))
    assert all(r["delta_ms"] == 0 for r in d.rows)


def test_diff_accepts_paths_and_profiles(tmp_path, two_profiles):
    before, _, after, _ = two_profiles
    a = profiler.save_profile(tmp_path / "a.json", events=before, step_ms=[2.0] * 5 + [2.1] * 5)
    d = profiler.diff(str(tmp_path / "a.json"), after, steps_b=[1.0] * 5 + [1.1] * 5)
    assert (d.steps_a, d.steps_b) == (10, 10) and d.step["ms_a"] == pytest.approx(2.05)
    assert d.text().startswith("A: %s (10 steps;" % a.path)
    assert profiler.diff(a, after).rows == profiler.diff(tmp_path / "a.json", after).rows


def _samples(rng, n, ms, spread=0.05):
    return [ms * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_noise_band_on_synthetic_samples():
    rng = random.Random(1)
    # Pairs of runs from one distribution: within noise but for about the interval's 5 % (5 of these 60; 8 allowed);
    # twice as slow: never.
    same = [step_change(_samples(rng, 40, 10.0), _samples(rng, 40, 10.0)) for _ in range(60)]
    assert sum(not s["within_noise"] for s in same) <= 8
    for s in same:
        assert s["band_low_pct"] <= s["change_pct"] <= s["band_high_pct"]
        assert s["band_pct"] == pytest.approx((s["band_high_pct"] - s["band_low_pct"]) / 2)
    for _ in range(20):
        slower = step_change(_samples(rng, 40, 10.0), _samples(rng, 40, 20.0))
        assert slower["within_noise"] is False
        assert 80 < slower["change_pct"] < 120 and slower["band_low_pct"] > 60
    # Deterministic (seeded), and the medians and percentiles are numpy's.
    a, b = _samples(rng, 9, 5.0), _samples(rng, 9, 5.5)
    assert step_change(a, b) == step_change(a, b)
    s = step_change(a, b)
    assert s["ms_a"] == pytest.approx(float(np.median(a))) and s["p95_ms_b"] == pytest.approx(np.percentile(b, 95))
    assert s["change_pct"] == pytest.approx((np.median(b) / np.median(a) - 1) * 100)
    few = step_change([1.0] * (MIN_SAMPLES - 1), [2.0] * 10)
    assert few["within_noise"] is None and few["band_pct"] is None


def test_headline_formats():
    events = [{"name": "Executor::run", "category": "Executor", "start_ns": 0, "end_ns": 1000, "dur_ns": 1000,
               "thread": 0, "tid": 1, "depth": 0, "parent": -1, "bytes": -1, "args": None}]
    rng = random.Random(2)
    d = profiler.diff(events, events, steps_a=_samples(rng, 30, 12.3, 0.01), steps_b=_samples(rng, 30, 9.8, 0.01))
    s = d.step
    assert d.headline() == "step time %.4g ms -> %.4g ms (%+.1f %%, noise band +-%.1f %%)" % (
        s["ms_a"], s["ms_b"], s["change_pct"], s["band_pct"])
    # A lopsided band (one side's steps with slow outliers) is printed as its interval.
    # A lopsided band whose +-half-width would contain 0 though the interval does not is printed as the interval.
    lopsided = profiler.diff(events, events, steps_a=[1.0] * 10, steps_b=[1.5] * 6 + [5.0] * 4)
    s = lopsided.step
    assert s["band_low_pct"] == 50 and s["band_pct"] > 50 and s["within_noise"] is False
    assert lopsided.headline() == "step time 1 ms -> 1.5 ms (+50.0 %%, noise band +50.0 %% .. %+.1f %%)" % (
        s["band_high_pct"])
    same = _samples(rng, 30, 5.0)
    headline = profiler.diff(events, events, steps_a=same, steps_b=list(same)).headline()
    assert "(+0.0 %, noise band +-" in headline and headline.endswith(" %): within noise")
    assert "noise band unknown: 2 and 2 step samples, 3 needed on each side" in profiler.diff(
        events, events, steps_a=[1.0, 1.1], steps_b=[1.0, 1.2]).headline()


def _bench(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fluidlite.bench", "--model", "overhead", "--iterations", "5",
                           "--repeat", "2", "--warmup", "2", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_bench_save_profile_and_baseline(tmp_path):
    path = tmp_path / "A.json"
    r = _bench("--save-profile", str(path))
    assert r.returncode == 0, r.stderr
    assert "Profiling Report" not in r.stdout  # saving alone prints no report
    a = profiler.load_profile(path)
    assert a.steps == 10 and len(a.step_ms) == 10
    assert a.settings["model"] == "overhead" and a.settings["iterations"] == 5 and a.settings["repeat"] == 2
    assert "profile     %s (%d events, 10 step times)" % (path, len(a.events)) in r.stdout
    assert sum(1 for e in a.events if e["name"] == "scale") == 10 * 1000  # exactly the timed steps
    assert a.machine["fluidlite"] == fluid.__version__ and "cpu_model" in a.machine

    r = _bench("--baseline", str(path), "--batch_size", "4")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("python -m fluidlite.bench: warning: --baseline %s was recorded with other settings: "
                        "batch 16 (this run: 4)\n" % path)
    out = r.stdout
    assert "A: %s (10 steps; model overhead, batch_size 16" % path in out
    assert "B: this run (10 steps; model overhead, batch_size 4" in out
    assert "Profile Diff" in out and "\nstep time " in out and "noise band" in out
    scale = next(ln for ln in out.splitlines() if ln.startswith("scale "))
    assert scale.split()[1] == "1000/1000"

    r = _bench("--baseline", str(path))  # same settings: no warning
    assert r.returncode == 0 and r.stderr == "", r.stderr

    # With --profile the report is printed too; --save_profile is the other flags' spelling of --save-profile.
    r = _bench("--profile", "--save_profile", str(tmp_path / "B.json"))
    assert r.returncode == 0, r.stderr
    assert "Profiling Report" in r.stdout and profiler.load_profile(tmp_path / "B.json").steps == 10


def test_bench_bad_baseline_fails_before_running(tmp_path):
    bad = _write(tmp_path / "bad.json", "[]")
    r = _bench("--baseline", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("python -m fluidlite.bench: error: --baseline %s: load_profile: %s is not a "
                               "readable fluidlite profile" % (bad, bad)), r.stderr
    r = _bench("--save-profile", str(tmp_path / "no" / "A.json"))
    assert r.returncode == 2 and "--save-profile %s: directory" % (tmp_path / "no" / "A.json") in r.stderr


def test_docs_snippet_runs(tmp_path, monkeypatch, capsys):
    """docs/profiling.md's diff example runs as printed and finds the removed op it says it finds."""
    with open(os.path.join(ROOT, "docs", "profiling.md")) as f:
        text = f.read()
    section = text[text.index("## Before and after: profile diffs"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[:code.index("```")]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/profiling.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "Removed (only in A): scale\nAdded (only in B): none\n" in out
    assert out.rstrip().splitlines()[-1].startswith("['scale'] [] ")
    assert sorted(os.listdir(tmp_path)) == ["after.json", "before.json"]
