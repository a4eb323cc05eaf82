"""Fluid's "Profiling Report" and the summaries beside it (memcpy, scopes), as rows for programs and as text."""
from .. import core
from ._session import _SORT_KEYS, _PLACE_NAME, _check_sorted_key, _state, events

def _self_times(evs):
    child_total = [0] * len(evs)
    for e in evs:
        if e["parent"] >= 0:
            child_total[e["parent"]] += e["dur_ns"]
    return [max(0, e["dur_ns"] - c) for e, c in zip(evs, child_total)]


def summary(sorted_key=None, merge_threads=None, event_list=None):
    """Report rows as dicts: event, thread (None when merged), calls, total_ms, self_ms, min_ms, max_ms,
    ave_ms, ratio (total over the sum of the thread's totals, as Fluid computes it). `event_list`: summarise
    these events (e.g. a loaded profile's) instead of the session's."""
    _check_sorted_key(sorted_key)
    evs = events() if event_list is None else event_list
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


PREEMPTED_CPU_FRACTION = 0.5
PREEMPTED_MIN_LOST_NS = 200_000


def preempted(e):
    """Whether event `e` was preempted: its thread had the CPU for under half its wall time and lost more than
    0.2 ms (cpu_ns is -1 where the recorder did not measure it: short events cannot hide a preemption)."""
    cpu = e.get("cpu_ns", -1)
    return 0 <= cpu < PREEMPTED_CPU_FRACTION * e["dur_ns"] and e["dur_ns"] - cpu > PREEMPTED_MIN_LOST_NS


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


