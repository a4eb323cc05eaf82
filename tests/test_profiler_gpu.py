"""The profiler's GPU side on hand-built GPU spans (what csrc/cuda/device.cu records with CUDA events on a device),
so it is checked without a GPU: the report's GPU Time (Ratio) column, the GPU Summary (busy, idle, the longest idle
gaps), the trace's GPU stream track, the advisor's gpu_idle finding, and the CPU summaries leaving GPU spans out."""
import json
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, profiler
from fluidlite.profiler import gpu as gpu_events
from fluidlite.profiler._session import Event, step_events

pytestmark = pytest.mark.skipif(not core.is_compiled_with_cuda(),
                                reason="the GPU columns are shown by CUDA builds only (the build has no CUDA)")

# The spans start inside each run: the runs' fc (64 x 256 x 256) takes longer than the 32 us they need.
MUL_US, ADD_US, GAP_US = 10, 5, 20


def _gpu_event(name, start, dur, category="GPUKernel", nbytes=-1):
    return Event(name=name, category=category, start_ns=start, end_ns=start + dur, dur_ns=dur,
                 thread=gpu_events.GPU_THREAD_BASE, tid=gpu_events.GPU_TID_BASE, depth=0, parent=-1, bytes=nbytes,
                 args="", cpu_ns=-1, mem_in_use=-1, mem_peak=-1, value=-1)


@pytest.fixture(scope="module")
def profile():
    """Three profiled runs of a fc program on the CPU (state 'All'), plus per run: a copy in, mul's kernel, a gap,
    elementwise_add's kernel, as a GPU would have run them inside the run."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [256])
        y = fluid.layers.fc(x, 256)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    profiler.start_profiler("All")
    for _ in range(3):
        exe.run(main, feed={"x": np.ones((64, 256), "float32")}, fetch_list=[y], scope=scope)
    profiler.stop_profiler(profile_path=None, print_report=False)
    cpu = profiler.events()
    assert all(r["dur_ns"] > 40_000 for r in step_events(cpu)), "runs too short to hold the spans"
    gpu = []
    for run in step_events(cpu):
        t = run["start_ns"] + 1000
        gpu.append(_gpu_event("memcpy:CPU->GPU", t, 1000, "GPUMemcpy", 32))
        t += 1000
        gpu.append(_gpu_event("mul", t, MUL_US * 1000))
        t += (MUL_US + GAP_US) * 1000
        gpu.append(_gpu_event("elementwise_add", t, ADD_US * 1000))
    return cpu, cpu + gpu


def _row(text, name):
    return next(line for line in text.splitlines() if re.match(r"(thread\d+::)?%s\s" % re.escape(name), line))


def test_report_fills_the_gpu_column(profile):
    cpu, evs = profile
    text = profiler.report(event_list=evs)
    row = _row(text, "mul")
    cells = re.findall(r"([0-9.]+) \(([0-9.]+)\)", row)
    (cpu_ms, cpu_ratio), (gpu_ms, gpu_ratio) = [(float(a), float(b)) for a, b in cells]
    assert gpu_ms == pytest.approx(3 * MUL_US / 1000, rel=1e-6)
    total = float(row.split()[2])
    assert total == pytest.approx(cpu_ms + gpu_ms, rel=1e-4)  # Fluid's Total = CPU + GPU
    assert gpu_ratio == pytest.approx(gpu_ms / total, rel=1e-3) and cpu_ratio == pytest.approx(cpu_ms / total, 1e-3)
    # an event with no GPU part: GPU 0 (ratio 0), CPU ratio 1
    run_row = _row(text, "Executor::run")
    assert re.findall(r"([0-9.]+) \(([0-9.]+)\)", run_row)[1] == ("0.000000", "0.000000")


def test_gpu_spans_are_not_rows_of_their_own(profile):
    _, evs = profile
    rows = profiler.summary(event_list=evs)
    assert rows and all(r["thread"] != gpu_events.GPU_THREAD_BASE for r in rows)
    assert {r["event"] for r in rows} == {r["event"] for r in profiler.summary(event_list=profile[0])}


def test_gpu_summary_busy_idle_and_gaps(profile):
    from fluidlite.profiler.report import gpu_summary_of
    _, evs = profile
    (g,) = gpu_summary_of(evs)
    assert g["device"] == 0 and g["kernels"] == 6 and g["copies"] == 3
    assert g["busy_ms"] == pytest.approx(3 * (1 + MUL_US + ADD_US) / 1000)
    runs_ms = sum(r["dur_ns"] for r in step_events(evs)) / 1e6
    assert g["window_ms"] == pytest.approx(runs_ms)
    assert g["idle_ms"] == pytest.approx(runs_ms - g["busy_ms"])
    assert g["idle_gaps"][0]["gap_ms"] == pytest.approx(GAP_US / 1000)
    assert (g["idle_gaps"][0]["after"], g["idle_gaps"][0]["before"]) == ("mul", "elementwise_add")
    text = profiler.report(event_list=evs)
    assert "------------------------->     GPU Summary     <-------------------------" in text
    assert re.search(r"CUDAPlace\(0\): 9 spans \(6 op kernels, 3 copies\), busy 0\.048 ms", text)
    assert "Idle between spans: 3 gaps of 5 us or more, 0.06 ms in all; the longest:" in text
    assert "  0.02 ms between mul and elementwise_add" in text


def test_trace_puts_gpu_spans_on_a_stream_track(profile, tmp_path):
    _, evs = profile
    path = profiler.export_chrome_trace(str(tmp_path / "trace.json"), evs)
    trace = json.load(open(path))["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    assert tracks[gpu_events.GPU_TID_BASE] == "GPU stream (CUDAPlace(0))"
    on_track = [e for e in trace if e.get("ph") == "X" and e["tid"] == gpu_events.GPU_TID_BASE]
    assert sorted({e["name"] for e in on_track}) == ["elementwise_add", "memcpy:CPU->GPU", "mul"]
    copy = next(e for e in on_track if e["name"] == "memcpy:CPU->GPU")
    assert copy["args"]["bytes"] == 32 and copy["args"]["GB/s"] == 0.032
    assert any(e.get("name") == "process_name" and e["args"]["name"] == "fluidlite (CPU and GPU)" for e in trace)


def test_advisor_reports_the_idle_gpu(profile):
    _, evs = profile
    advice = profiler.advise(events=evs, programs=[], print_report=False)
    idle = [f for f in advice if f.kind == "gpu_idle"]
    assert idle, [f.kind for f in advice]
    f = idle[0]
    assert f.title.startswith("CUDAPlace(0) is idle ")
    assert f.evidence["longest_idle_gaps"][0]["after"] == "mul"
    assert f.estimated_saving_ms == pytest.approx(GAP_US / 1000, rel=1e-6)  # the gaps between spans, per step
    assert "fuse elementwise chains" in f.fix


def test_cpu_profile_has_no_gpu_summary(profile):
    cpu, _ = profile
    assert "GPU Summary" not in profiler.report(event_list=cpu)
