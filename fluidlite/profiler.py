"""The built-in profiler: Fluid's ``fluid.profiler`` API plus what users of other profilers expect.

    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path="/tmp/profile") as prof:
        for step in range(10):
            exe.run(...)
            prof.step()          # only needed with a schedule

On stop it prints Fluid's "Profiling Report" (per-thread rows ``threadN::name`` and, with several threads,
the merged report), a memcpy summary, a scope summary, and writes a Chrome trace (open it in Perfetto or
chrome://tracing). ``summary()`` and ``events()`` give the same numbers to programs.

Events come from the C++ recorder (``csrc/profiler.h``): ops, executor phases, memcpys, scope creation and
deletion, and user ranges (``RecordEvent``). Nesting comes from an explicit per-thread stack, so self
time is total minus the children's totals and is never negative.
"""
import contextlib
import functools
import json
import os
import sys
import threading

from . import core

__all__ = ["profiler", "start_profiler", "stop_profiler", "reset_profiler", "RecordEvent", "summary", "events",
           "make_schedule", "export_chrome_trace", "set_event_cap", "cuda_profiler"]

_STATES = ("CPU", "GPU", "All")
_SORT_KEYS = {None: None, "calls": "number of calls", "total": "total time", "max": "maximum time",
              "min": "minimum time", "ave": "average time"}
_PLACE_NAME = {"CPU": "CPU", "GPU": "CUDA", "All": "All"}
_TRACER_OPTIONS = ("Default", "OpDetail", "AllOpDetail")


class _State:
    enabled = False
    state = None
    schedule = None
    step_num = 0
    recording = False
    phase = "none"
    last_events = None  # events of the last stop (for summary()/events() after stop)
    last_dropped = 0
    last_cap = 0  # the event cap in force during the last profile (its report's drop warning names it)
    saved_cap = None  # the cap to restore at stop when start_profiler(max_events=...) set one for this profile


_state = _State()


def _check_state(state):
    if state not in _STATES:
        raise ValueError("profiler state must be one of 'CPU', 'GPU', 'All'; got %r" % (state,))


def _check_sorted_key(sorted_key):
    if sorted_key not in _SORT_KEYS:
        raise ValueError("sorted_key must be None, 'calls', 'total', 'max', 'min' or 'ave'; got %r" % (sorted_key,))


def set_event_cap(max_events):
    """Keep at most `max_events` events (0 = unlimited; default 5,000,000). Later events are dropped and
    counted; the report says how many."""
    core.set_profiler_event_cap(int(max_events))


def reset_profiler():
    """Drop everything recorded so far (recording continues if the profiler is on)."""
    core.reset_profiler()
    _state.last_events = None


def start_profiler(state, tracer_option=None, schedule=None, max_events=None):
    """Start recording. `state` is 'CPU', 'GPU' or 'All' (GPU time needs a CUDA build). With a
    `schedule` (see make_schedule) recording follows the steps counted by ``step()``."""
    _check_state(state)
    if tracer_option is not None and tracer_option not in _TRACER_OPTIONS:
        raise ValueError("tracer option must be 'Default', 'OpDetail', 'AllOpDetail'.")  # Fluid 1.8's words
    if _state.enabled:
        return
    if max_events is not None:  # for this profile only: stop_profiler restores the cap in force before
        _state.saved_cap = core.profiler_event_cap()
        set_event_cap(max_events)
    core.reset_profiler()
    _state.enabled, _state.state, _state.schedule, _state.step_num = True, state, schedule, 0
    _state.phase = "none"
    _state.last_events = None
    _apply_schedule()


def _apply_schedule():
    """Set recording on/off for the current step. Entering an active window from warm-up drops what the
    warm-up steps recorded (they ran only to warm caches and allocators)."""
    action = _state.schedule(_state.step_num) if _state.schedule else "record"
    if action not in ("none", "warmup", "record"):
        raise ValueError("a profiler schedule must return 'none', 'warmup' or 'record', got %r" % (action,))
    if action == "record" and _state.phase == "warmup":
        core.reset_profiler()
    want = action != "none"
    if want and not _state.recording:
        core.enable_profiler()
    elif not want and _state.recording:
        core.disable_profiler()
    _state.recording, _state.phase = want, action


def step():
    """Mark the end of a training step (drives the schedule)."""
    if not _state.enabled:
        return
    _state.step_num += 1
    _apply_schedule()


def make_schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=0):
    """torch.profiler.schedule: skip `skip_first` steps, then cycles of `wait` steps off, `warmup` steps
    recorded and then discarded, `active` steps recorded; `repeat` cycles (0 = forever).
    Returns a function step -> 'none' | 'warmup' | 'record'."""
    if min(wait, warmup, skip_first, repeat) < 0 or active < 1:
        raise ValueError("make_schedule: wait/warmup/skip_first/repeat must be >= 0 and active >= 1")
    cycle = wait + warmup + active

    def schedule(step_num):
        s = step_num - skip_first
        if s < 0 or (repeat and s >= cycle * repeat):
            return "none"
        pos = s % cycle
        return "none" if pos < wait else ("warmup" if pos < wait + warmup else "record")

    return schedule


def stop_profiler(sorted_key=None, profile_path="/tmp/profile", print_report=True):
    """Stop recording, print the report (sorted by `sorted_key`) and write the Chrome trace to
    `profile_path` (None: no file). Does nothing if the profiler is not running."""
    _check_sorted_key(sorted_key)
    if not _state.enabled:
        return
    core.disable_profiler()
    _state.enabled = _state.recording = False
    _state.last_events = _collect()
    _state.last_dropped = core.profiler_dropped_events()
    _state.last_cap = core.profiler_event_cap()
    if _state.saved_cap is not None:
        set_event_cap(_state.saved_cap)
        _state.saved_cap = None
    if print_report:
        sys.stdout.write(report(sorted_key))
        sys.stdout.flush()
    if profile_path:
        export_chrome_trace(profile_path)


@contextlib.contextmanager
def profiler(state, sorted_key=None, profile_path="/tmp/profile", tracer_option=None, schedule=None,
             max_events=None, print_report=True):
    """Context manager form of start_profiler/stop_profiler; yields an object with ``step()``."""
    _check_state(state)
    _check_sorted_key(sorted_key)
    start_profiler(state, tracer_option, schedule, max_events)
    try:
        yield _Handle()
    finally:
        stop_profiler(sorted_key, profile_path, print_report)


class _Handle:
    step = staticmethod(step)

    @property
    def step_num(self):
        return _state.step_num


@contextlib.contextmanager
def cuda_profiler(output_file, output_mode=None, config=None):
    """Fluid's nvprof hook: a no-op range here (use profiler('All') for GPU time)."""
    yield


class RecordEvent:
    """A user range: ``with RecordEvent("data_reader"): ...`` or ``@RecordEvent("step")`` on a function.
    Costs one C++ call when the profiler is off."""

    def __init__(self, name):
        self.name = str(name)
        self._tokens = threading.local()

    def __enter__(self):
        stack = getattr(self._tokens, "stack", None)
        if stack is None:
            stack = self._tokens.stack = []
        stack.append(core.push_event(self.name) if core.is_profiler_enabled() else -1)
        return self

    def __exit__(self, *exc):
        core.pop_event(self._tokens.stack.pop())
        return False

    def begin(self):
        self.__enter__()

    def end(self):
        self.__exit__()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


# ---------------------------------------------------------------------------------------------- data

class Event(dict):
    """One recorded event: name, category, start_ns, end_ns, dur_ns, thread, tid, depth, parent, bytes, args."""
    __slots__ = ()


def _collect():
    raw = core.collect_events()
    out = []
    for name, cat, start, end, thread, tid, depth, parent, nbytes, args in raw:
        out.append(Event(name=name, category=cat, start_ns=start, end_ns=end, dur_ns=end - start, thread=thread,
                         tid=tid, depth=depth, parent=parent, bytes=nbytes, args=args))
    return out


def events():
    """Every recorded event (of the last stopped session, or so far if still running) as dicts."""
    if _state.enabled:
        return _collect()
    return list(_state.last_events or [])


def _self_times(evs):
    child_total = [0] * len(evs)
    for e in evs:
        if e["parent"] >= 0:
            child_total[e["parent"]] += e["dur_ns"]
    return [max(0, e["dur_ns"] - c) for e, c in zip(evs, child_total)]


def summary(sorted_key=None, merge_threads=None):
    """Report rows as dicts: event, thread (None when merged), calls, total_ms, self_ms, min_ms, max_ms,
    ave_ms, ratio (total over the sum of the thread's totals, as Fluid computes it)."""
    _check_sorted_key(sorted_key)
    evs = events()
    selfs = _self_times(evs)
    threads = sorted({e["thread"] for e in evs})
    groups = [(None, list(range(len(evs))))] if merge_threads else \
        [(t, [i for i, e in enumerate(evs) if e["thread"] == t]) for t in threads]
    rows = []
    for thread, idx in groups:
        table = {}
        order = []
        for i in sorted(idx, key=lambda i: evs[i]["end_ns"]):
            e = evs[i]
            r = table.get(e["name"])
            if r is None:
                r = table[e["name"]] = {"event": e["name"], "thread": thread, "category": e["category"], "calls": 0,
                                        "total_ns": 0, "self_ns": 0, "min_ns": None, "max_ns": 0, "bytes": 0}
                order.append(r)
            d = e["dur_ns"]
            r["calls"] += 1
            r["total_ns"] += d
            r["self_ns"] += selfs[i]
            r["min_ns"] = d if r["min_ns"] is None else min(r["min_ns"], d)
            r["max_ns"] = max(r["max_ns"], d)
            if e["bytes"] > 0:
                r["bytes"] += e["bytes"]
        grand = sum(r["total_ns"] for r in order) or 1
        for r in order:
            rows.append({"event": r["event"], "thread": thread, "category": r["category"], "calls": r["calls"],
                         "total_ms": r["total_ns"] / 1e6, "self_ms": r["self_ns"] / 1e6,
                         "min_ms": r["min_ns"] / 1e6, "max_ms": r["max_ns"] / 1e6,
                         "ave_ms": r["total_ns"] / r["calls"] / 1e6, "ratio": r["total_ns"] / grand,
                         "bytes": r["bytes"]})
    key = {"calls": "calls", "total": "total_ms", "max": "max_ms", "min": "min_ms", "ave": "ave_ms"}.get(sorted_key)
    if key:
        rows.sort(key=lambda r: (r["thread"] is None, r["thread"] or 0, -r[key]))
    return rows


def memcpy_summary():
    """Per direction: count, bytes, total ms and GB/s."""
    out = {}
    for e in events():
        if e["category"] != "Memcpy":
            continue
        direction = e["name"].split(":", 1)[1]
        r = out.setdefault(direction, {"direction": direction, "count": 0, "bytes": 0, "total_ms": 0.0})
        r["count"] += 1
        r["bytes"] += max(e["bytes"], 0)
        r["total_ms"] += e["dur_ns"] / 1e6
    for r in out.values():
        r["gb_per_s"] = r["bytes"] / (r["total_ms"] * 1e6) if r["total_ms"] > 0 else 0.0
    return [out[k] for k in sorted(out)]


_LOOP_STEP_EVENTS = ("while::step", "while_grad::step", "recurrent::step", "recurrent_grad::step")


def scope_summary():
    """Scopes created and deleted (kid scopes, step scopes) and the time spent doing it; and the loop iterations
    (While and StaticRNN steps, forward and backward) with the step scopes created for them (the others reuse
    the scopes of earlier runs)."""
    evs = events()
    created = [e for e in evs if e["category"] == "Scope" and e["name"].endswith("new")]
    deleted = [e for e in evs if e["category"] == "Scope" and e["name"].endswith("delete")]
    steps = {i for i, e in enumerate(evs) if e["name"] in _LOOP_STEP_EVENTS}
    loop_ops = {i for i, e in enumerate(evs) if e["name"] in ("while", "while_grad", "recurrent", "recurrent_grad")}

    def in_loop(e):
        while e["parent"] >= 0:
            if e["parent"] in loop_ops or e["parent"] in steps:
                return True
            e = evs[e["parent"]]
        return False
    return {"created": len(created), "deleted": len(deleted),
            "create_ms": sum(e["dur_ns"] for e in created) / 1e6,
            "delete_ms": sum(e["dur_ns"] for e in deleted) / 1e6,
            "loop_iterations": len(steps), "loop_scopes_created": sum(1 for e in created if in_loop(e))}


def _fmt(x):
    return "%g" % x


def report(sorted_key=None):
    """The printed report, as a string (Fluid's layout; then memcpy and scope summaries)."""
    _check_sorted_key(sorted_key)
    state = _state.state or "CPU"
    per_thread = summary(sorted_key)
    threads = sorted({r["thread"] for r in per_thread})
    # As Fluid's DisableProfiler: with several threads the merged report comes first, then the per-thread one,
    # each with its banner.
    lines = []
    sections = [(False, per_thread)]
    if len(threads) > 1:
        sections.insert(0, (True, summary(sorted_key, merge_threads=True)))
    for merged, rows in sections:
        lines += ["", "------------------------->     Profiling Report     <-------------------------", ""]
        if merged:
            lines.append("Note! This Report merge all thread info into one.")
        lines += ["Place: %s" % _PLACE_NAME[state], "Time unit: ms",
                  "Sorted by %s in descending order in the same thread"
                  % (_SORT_KEYS[sorted_key] or "event first end time"),
                  ""]
        names = [(r["event"] if merged else "thread%d::%s" % (r["thread"], r["event"])) for r in rows]
        w = max([len(n) for n in names] + [5]) + 4
        gpu = state == "All"
        header = "Event".ljust(w) + "Calls".ljust(12) + "Total".ljust(12)
        if gpu:
            header += "CPU Time (Ratio)".ljust(24) + "GPU Time (Ratio)".ljust(24)
        header += "Min.".ljust(12) + "Max.".ljust(12) + "Ave.".ljust(12) + "Ratio.".ljust(12) + "Self."
        lines.append(header)
        for n, r in zip(names, rows):
            line = n.ljust(w) + str(r["calls"]).ljust(12) + _fmt(r["total_ms"]).ljust(12)
            if gpu:
                line += ("%f (%f)" % (r["total_ms"], 1.0)).ljust(24) + ("%f (%f)" % (0.0, 0.0)).ljust(24)
            line += (_fmt(r["min_ms"]).ljust(12) + _fmt(r["max_ms"]).ljust(12) + _fmt(r["ave_ms"]).ljust(12)
                     + _fmt(r["ratio"]).ljust(12) + _fmt(r["self_ms"]))
            lines.append(line.rstrip())
        lines.append("")
    mem = memcpy_summary()
    lines += ["------------------------->     Memcpy Summary     <-------------------------", ""]
    lines.append("Direction".ljust(12) + "Count".ljust(12) + "Bytes".ljust(16) + "Time(ms)".ljust(12) + "GB/s")
    for r in mem:
        lines.append(r["direction"].ljust(12) + str(r["count"]).ljust(12) + str(r["bytes"]).ljust(16)
                     + _fmt(r["total_ms"]).ljust(12) + "%.3f" % r["gb_per_s"])
    if not mem:
        lines.append("(no memory copies)")
    sc = scope_summary()
    lines += ["", "------------------------->     Scope Summary      <-------------------------", "",
              "Scopes created: %d (%s ms)   deleted: %d (%s ms)" % (sc["created"], _fmt(sc["create_ms"]),
                                                                 sc["deleted"], _fmt(sc["delete_ms"]))]
    if sc["loop_iterations"]:
        lines.append("Loop step scopes: %d iterations (While and StaticRNN steps, forward and backward), %d step "
                     "scopes created for them, the rest reused" % (sc["loop_iterations"], sc["loop_scopes_created"]))
    lines.append("")
    dropped = _state.last_dropped if not _state.enabled else core.profiler_dropped_events()
    cap = _state.last_cap if not _state.enabled else core.profiler_event_cap()
    if dropped:
        lines += ["Warning: the event cap (%d events) dropped %d events; totals cover only the kept events."
                  % (cap, dropped), ""]
    return "\n".join(lines) + "\n"


def export_chrome_trace(path):
    """Write the recorded events as Chrome trace JSON (``traceEvents`` with ``ph: "X"`` complete events,
    ``ts``/``dur`` in microseconds, process/thread name metadata). Written to a temporary file and renamed."""
    evs = events()
    pid = os.getpid()
    trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "fluidlite (CPU)"}}]
    seen = set()
    for e in evs:
        if e["thread"] not in seen:
            seen.add(e["thread"])
            trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": e["tid"],
                          "args": {"name": "thread%d" % e["thread"]}})
    t0 = min((e["start_ns"] for e in evs), default=0)
    for e in evs:
        args = json.loads("{" + e["args"] + "}") if e["args"] else {}
        if e["bytes"] >= 0:
            args["bytes"] = e["bytes"]
            if e["dur_ns"] > 0:
                args["GB/s"] = round(e["bytes"] / e["dur_ns"], 3)
        trace.append({"ph": "X", "name": e["name"], "cat": e["category"], "pid": pid, "tid": e["tid"],
                      "ts": (e["start_ns"] - t0) / 1000.0, "dur": e["dur_ns"] / 1000.0, "args": args})
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp%d" % pid
    with open(tmp, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f, separators=(",", ":"))
    os.replace(tmp, path)
    return path
