"""GPU time in a profile: the spans the CUDA runtime timed with CUDA events on each device's stream (an op's kernels,
category ``GPUKernel``; a copy, ``GPUMemcpy``), as profiler Events on a track of their own, and what the report,
the trace and the advisor read from them: GPU time per event name (the report's ``GPU Time (Ratio)`` column),
busy and idle time per device, and the longest idle gaps between kernels with the ops around them.

GPU events are Events like the others (same fields) with ``thread = GPU_THREAD_BASE + device``, ``tid`` a fixed
pseudo id per device, no parent and depth 0. The CPU-side summaries leave them out: their time is GPU time.
"""
from .. import core

GPU_CATEGORIES = ("GPUKernel", "GPUMemcpy")
GPU_THREAD_BASE = 1 << 20
GPU_TID_BASE = 0x7FFF0000  # the trace's track ids for the GPU streams (no OS thread has them)
IDLE_GAP_MIN_NS = 5_000  # gaps shorter than a kernel launch are not worth naming


def is_gpu_event(e):
    return e["category"] in GPU_CATEGORIES


def device_of(e):
    return e["thread"] - GPU_THREAD_BASE


def take_device_events(event_type):
    """The spans recorded since the last call (the runtime hands each over once), as `event_type` dicts."""
    if not core.is_compiled_with_cuda():
        return []
    from .._core import _device_events
    out = []
    for name, cat, args, start, end, device, nbytes in _device_events():
        out.append(event_type(name=name, category=cat, start_ns=start, end_ns=end, dur_ns=end - start,
                              thread=GPU_THREAD_BASE + device, tid=GPU_TID_BASE + device, depth=0, parent=-1,
                              bytes=nbytes, args=args, cpu_ns=-1, mem_in_use=-1, mem_peak=-1, value=-1))
    return out


def gpu_time_by_name(evs):
    """Event name -> total ns its GPU spans took (an op type's kernels, a copy direction's copies)."""
    out = {}
    for e in evs:
        if is_gpu_event(e):
            out[e["name"]] = out.get(e["name"], 0) + e["dur_ns"]
    return out


def _union_ns(spans):
    """Total length of the union of [start, end) spans, sorted by start."""
    total, cur_s, cur_e = 0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def gpu_summary(evs, run_events=()):
    """Per device: spans, kernels and copies, busy_ms (the union of its spans), the window (the profiled runs that
    used it: from the start of the first Executor run event holding a span to the end of the last; without run
    events, first span to last), idle_ms = window - busy, utilisation = busy / window, and the longest idle gaps
    between consecutive spans inside runs (gap_ms, the span before and the one after). [] without GPU events."""
    by_device = {}
    for e in evs:
        if is_gpu_event(e):
            by_device.setdefault(device_of(e), []).append(e)
    out = []
    runs = sorted((r["start_ns"], r["end_ns"]) for r in run_events)
    for device in sorted(by_device):
        spans = sorted(by_device[device], key=lambda e: (e["start_ns"], e["end_ns"]))
        busy = _union_ns([(e["start_ns"], e["end_ns"]) for e in spans])
        used = [(s, t) for s, t in runs if any(s <= e["start_ns"] <= t for e in spans)]
        if used:
            window = sum(t - s for s, t in used)
        else:
            window = spans[-1]["end_ns"] - spans[0]["start_ns"]
        gaps = []
        for a, b in zip(spans, spans[1:]):
            gap = b["start_ns"] - max(a["end_ns"], a["start_ns"])
            # gaps inside one run only (between runs the host does the run's own work)
            same_run = not used or any(s <= a["start_ns"] <= t and s <= b["start_ns"] <= t for s, t in used)
            if gap >= IDLE_GAP_MIN_NS and same_run:
                gaps.append({"gap_ms": gap / 1e6, "after": a["name"], "before": b["name"],
                             "at_ms": (a["end_ns"] - spans[0]["start_ns"]) / 1e6})
        gaps.sort(key=lambda g: -g["gap_ms"])
        out.append({"device": device, "spans": len(spans),
                    "kernels": sum(1 for e in spans if e["category"] == "GPUKernel"),
                    "copies": sum(1 for e in spans if e["category"] == "GPUMemcpy"),
                    "busy_ms": busy / 1e6, "window_ms": window / 1e6, "idle_ms": max(0, window - busy) / 1e6,
                    "utilisation": busy / window if window > 0 else 1.0,
                    "idle_gaps": gaps[:5], "idle_gap_count": len(gaps),
                    "idle_gap_ms": sum(g["gap_ms"] for g in gaps)})
    return out
