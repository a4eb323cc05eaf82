"""Fluid's "Profiling Report" and the summaries beside it (gaps and coverage, framework vs kernel time, thread
pool, memory, memcpy, scopes), as data for programs and as text.

Every function takes the recorded events (``event_list=None``: the last profile) and shares one pass over them
(``ProfileView``: self times, the parent chain, the session's wall time), so the report, the advisor and the
profile diff aggregate the same way.
"""
import functools
import json
import math

from .. import core
from ._session import _SORT_KEYS, _PLACE_NAME, _check_sorted_key, _state, events as _session_events, step_events
from .gpu import IDLE_GAP_MIN_NS, gpu_summary, gpu_time_by_name, is_gpu_event

_LOOP_STEP_EVENTS = ("while::step", "while_grad::step", "recurrent::step", "recurrent_grad::step")
# Events whose own (self) time is time between their children: the executor's op loop and the loops' steps run
# ops as children, and what they do between ops (freeing temporaries, log checks, linking step variables) is
# recorded nowhere else. Their self time is reported as "<name>/gaps" rows.
GAP_PARENTS = ("Executor::run",) + _LOOP_STEP_EVENTS
GAP_SUFFIX = "/gaps"
_PREEMPT_MIN_LOST_NS = 200_000


def preempted(e, wait_ns=0):
    """True when the event's thread had the CPU for under half of its wall time and lost more than 200 us: the
    sample measures the machine's load, not the code (``cpu_ns`` is -1, or absent, where not measured).
    `wait_ns`: time the thread was off the CPU by design inside the event (waiting for the pool's workers to
    finish a job's parts: ``pool_wait_ns()``), taken out of the wall time first."""
    cpu = e.get("cpu_ns", -1)
    on = e["dur_ns"] - wait_ns
    return 0 <= cpu < 0.5 * on and on - cpu > _PREEMPT_MIN_LOST_NS


def pool_wait_ns(evs):
    """Per event: the time its thread waited inside it for thread-pool workers (per ThreadPool::job nested in it:
    the job's duration minus the caller's own parts). A caller blocks while it waits, so that time has no CPU."""
    wait = [0] * len(evs)
    caller_parts = {}
    for e in evs:
        if e["name"] == "ThreadPool::part" and e["parent"] >= 0:
            caller_parts[e["parent"]] = caller_parts.get(e["parent"], 0) + e["dur_ns"]
    for j, e in enumerate(evs):
        if e["name"] == "ThreadPool::job":
            w = max(0, e["dur_ns"] - caller_parts.get(j, 0))
            i = j
            while i >= 0:
                wait[i] += w
                i = evs[i]["parent"]
    return wait


@functools.lru_cache(maxsize=8192)
def _parse_args_body(body):
    return json.loads("{" + body + "}")


def event_args(e):
    """The event's args as a dict (parsed once per distinct string: an op's args repeat). Do not mutate it."""
    return _parse_args_body(e["args"]) if e["args"] else {}


def self_times(evs):
    """Per event: its duration minus its children's durations (never negative)."""
    child_total = [0] * len(evs)
    for e in evs:
        if e["parent"] >= 0:
            child_total[e["parent"]] += e["dur_ns"]
    return [max(0, e["dur_ns"] - c) for e, c in zip(evs, child_total)]


_EVENT_KEYS = ("name", "category", "start_ns", "end_ns", "dur_ns", "thread", "tid", "depth", "parent", "bytes", "args")
_EVENT_KEY_SET = frozenset(_EVENT_KEYS)


def _checked_events(evs):
    """The session's events when `evs` is None, else `evs` checked to be an event list (a loaded or hand-built
    profile): a clear error here instead of a KeyError or IndexError deep in a summary."""
    if evs is None:
        return _session_events()
    if not isinstance(evs, (list, tuple)):
        raise TypeError("event_list must be a list of profiler Event dicts, got %s" % type(evs).__name__)
    n = len(evs)
    for i, e in enumerate(evs):
        if not isinstance(e, dict) or not _EVENT_KEY_SET <= e.keys():
            missing = [k for k in _EVENT_KEYS if k not in e] if isinstance(e, dict) else list(_EVENT_KEYS)
            raise ValueError("event_list[%d] is not a profiler event: it lacks %s" % (i, ", ".join(map(repr, missing))))
        if not -1 <= e["parent"] < n:
            raise ValueError("event_list[%d]['parent'] = %r is not an event index (%d events)" % (i, e["parent"], n))
    return evs


def _span_ns(evs):
    return max(e["end_ns"] for e in evs) - min(e["start_ns"] for e in evs) if evs else 0


def _session_clock_applies():
    return _state.start_ns is not None and not _state.schedule


def session_wall_ns(evs=None):
    """The profiling session's wall time: stop_profiler minus start_profiler (now, while running). With a
    schedule only some steps were recorded, so it is the span of the recorded events instead; so it is for
    events that do not come from the session (``evs`` given)."""
    if evs is None and _session_clock_applies():
        stop = _state.stop_ns if _state.stop_ns is not None else core.now_ns()
        return max(0, stop - _state.start_ns)
    return _span_ns(_checked_events(evs))


class ProfileView:
    """One profile's events with what every summary needs, computed once."""

    def __init__(self, evs=None, wall_ns=None):
        if wall_ns is not None and (isinstance(wall_ns, bool) or not isinstance(wall_ns, int) or wall_ns < 0):
            raise ValueError("wall_ns must be an int >= 0, got %r" % (wall_ns,))
        self.events = _checked_events(evs)
        self.self_ns = self_times(self.events)
        self.wait_ns = pool_wait_ns(self.events)
        if wall_ns is None:
            wall_ns = session_wall_ns() if evs is None and _session_clock_applies() else _span_ns(self.events)
        self.wall_ns = wall_ns
        self.gap_ns = dict.fromkeys(GAP_PARENTS, 0)  # GAP_PARENTS name -> its events' self time, summed
        for e, s in zip(self.events, self.self_ns):
            if e["name"] in self.gap_ns:
                self.gap_ns[e["name"]] += s

    def ancestor(self, i, category):
        """Index of the nearest enclosing event of `category` (-1 if none)."""
        p = self.events[i]["parent"]
        while p >= 0 and self.events[p]["category"] != category:
            p = self.events[p]["parent"]
        return p


def _percentile_ns(sorted_durs, q):
    """Nearest-rank percentile (q=0.95: the smallest sample with 95 % of the samples at or below it)."""
    return sorted_durs[max(0, math.ceil(q * len(sorted_durs)) - 1)]


def _median_ns(sorted_durs):
    n = len(sorted_durs)
    return sorted_durs[n // 2] if n % 2 else (sorted_durs[n // 2 - 1] + sorted_durs[n // 2]) / 2


def _new_row(event, thread, category):
    return {"event": event, "thread": thread, "category": category, "durs": [], "self_ns": 0, "bytes": 0,
            "preempted": 0, "cpu_ns": 0, "cpu_samples": 0}


def _finish_row(r, grand, wall_ns):
    durs = sorted(r["durs"])
    total = sum(durs)
    return {"event": r["event"], "thread": r["thread"], "category": r["category"], "calls": len(durs),
            "total_ms": total / 1e6, "self_ms": r["self_ns"] / 1e6, "min_ms": durs[0] / 1e6,
            "max_ms": durs[-1] / 1e6, "ave_ms": total / len(durs) / 1e6, "ratio": total / grand,
            "median_ms": _median_ns(durs) / 1e6, "p95_ms": _percentile_ns(durs, 0.95) / 1e6,
            "wall_ratio": total / wall_ns if wall_ns else 0.0, "bytes": r["bytes"], "preempted": r["preempted"],
            "cpu_ms": r["cpu_ns"] / 1e6, "cpu_samples": r["cpu_samples"]}


def _summary(view, sorted_key, merge_threads):
    evs, selfs = view.events, view.self_ns
    by_end = sorted(range(len(evs)), key=lambda i: evs[i]["end_ns"])
    threads = [None] if merge_threads else sorted({e["thread"] for e in evs if not is_gpu_event(e)})
    rows = []
    for thread in threads:
        table, order = {}, []
        for i in by_end:
            e = evs[i]
            if thread is not None and e["thread"] != thread or is_gpu_event(e):  # GPU time: its own column
                continue
            r = table.get(e["name"])
            if r is None:
                r = table[e["name"]] = _new_row(e["name"], thread, e["category"])
                order.append(r)
            r["durs"].append(e["dur_ns"])
            r["self_ns"] += selfs[i]
            if e["bytes"] > 0:
                r["bytes"] += e["bytes"]
            cpu = e.get("cpu_ns", -1)
            if cpu >= 0:
                r["cpu_ns"] += cpu
                r["cpu_samples"] += 1
                r["preempted"] += preempted(e, view.wait_ns[i])
            if e["name"] in GAP_PARENTS:  # its gaps: a row of their own, right after the parent's first end
                gap_name = e["name"] + GAP_SUFFIX
                g = table.get(gap_name)
                if g is None:
                    g = table[gap_name] = _new_row(gap_name, thread, "Gap")
                    order.append(g)
                g["durs"].append(selfs[i])
                g["self_ns"] += selfs[i]
        # Fluid's Ratio.: total over the sum of the thread's event totals (gap rows are not events: left out)
        grand = sum(sum(r["durs"]) for r in order if r["category"] != "Gap") or 1
        rows += [_finish_row(r, grand, view.wall_ns) for r in order]
    key = {"calls": "calls", "total": "total_ms", "max": "max_ms", "min": "min_ms", "ave": "ave_ms"}.get(sorted_key)
    if key:
        rows.sort(key=lambda r: (r["thread"] is None, r["thread"] or 0, -r[key]))
    return rows


def summary(sorted_key=None, merge_threads=None, event_list=None, wall_ns=None):
    """Report rows as dicts: event, thread (None when merged), category, calls, total_ms, self_ms, min_ms, max_ms,
    ave_ms, median_ms, p95_ms, ratio (total over the sum of the thread's totals, as Fluid computes it), wall_ratio
    (total over the session's wall time), bytes, preempted (samples flagged by ``preempted()``, pool waits
    discounted), cpu_ms and cpu_samples (thread CPU time summed over the samples long enough to be measured, and
    their count).
    Each event in GAP_PARENTS adds a row ``<name>/gaps`` (category ``Gap``): the parents' self time, one sample
    per parent event. `event_list`: another profile's events (default: the last profile's)."""
    _check_sorted_key(sorted_key)
    return _summary(ProfileView(event_list, wall_ns), sorted_key, merge_threads)


def _coverage(view):
    runs = [e["dur_ns"] for e in view.events if e["name"] == "Executor::run"]
    run_ns = sum(runs)
    unexplained = sum(view.gap_ns.values())
    return {"exe_run_ms": run_ns / 1e6, "runs": len(runs), "unexplained_ms": unexplained / 1e6,
            "coverage": (run_ns - unexplained) / run_ns if run_ns else None}


def coverage(event_list=None):
    """The share of ``Executor::run`` wall time that its events explain: (sum of Executor::run durations -
    unexplained) / that sum, where unexplained = the gaps: the self time of Executor::run and of the loop steps
    (GAP_PARENTS), i.e. time inside exe.run between ops that no event covers. Returns exe_run_ms, runs,
    unexplained_ms, coverage (None without an Executor::run)."""
    return _coverage(ProfileView(event_list, 0))


def _framework(view):
    evs, selfs = view.events, view.self_ns
    ops, inner = {}, {}  # op type -> [calls, total, self]; op event index -> {"compute": ns, "infer_shape": ns}
    for e in evs:
        if e["category"] == "OperatorInner" and e["parent"] >= 0:
            part = e["name"].rsplit("/", 1)[-1]
            inner.setdefault(e["parent"], {}).setdefault(part, 0)
            inner[e["parent"]][part] += e["dur_ns"]
    for i, parts in inner.items():
        e = evs[i]
        r = ops.setdefault(e["name"], {"op": e["name"], "calls": 0, "total_ns": 0, "kernel_ns": 0,
                                       "infer_shape_ns": 0, "framework_ns": 0})
        r["calls"] += 1
        r["total_ns"] += e["dur_ns"]
        r["kernel_ns"] += parts.get("compute", 0)
        r["infer_shape_ns"] += parts.get("infer_shape", 0)
        r["framework_ns"] += selfs[i]
    cov = _coverage(view)
    op_framework = sum(r["framework_ns"] for r in ops.values())
    rows = [{"op": r["op"], "calls": r["calls"], "total_ms": r["total_ns"] / 1e6, "kernel_ms": r["kernel_ns"] / 1e6,
             "infer_shape_ms": r["infer_shape_ns"] / 1e6, "framework_ms": r["framework_ns"] / 1e6}
            for r in sorted(ops.values(), key=lambda r: -r["total_ns"])]
    framework_ms = cov["unexplained_ms"] + op_framework / 1e6
    return {"op_detail": bool(inner), "gaps_ms": cov["unexplained_ms"], "op_framework_ms": op_framework / 1e6,
            "framework_ms": framework_ms, "exe_run_ms": cov["exe_run_ms"],
            "share": framework_ms / cov["exe_run_ms"] if cov["exe_run_ms"] else None, "ops": rows}


def framework_summary(event_list=None):
    """Framework vs kernel time. framework_ms = gaps_ms (executor and loop-step gaps, see coverage()) +
    op_framework_ms (the op events' self time outside their ``<type>/compute`` and ``<type>/infer_shape``
    children: kernel lookup, argument checks, LoD sharing; only with tracer_option 'OpDetail' or 'AllOpDetail',
    else 0 and op_detail False); share = framework_ms over exe.run time. ops: per op type with OpDetail children:
    op, calls, total_ms, kernel_ms, infer_shape_ms, framework_ms (largest total first)."""
    return _framework(ProfileView(event_list, 0))


def _thread_pool(view):
    evs = view.events
    parts_ns, part_threads = {}, {}  # job id -> its parts' time; thread -> the parts' time it ran
    job_threads = set()  # threads that issued jobs (they run parts too, but they are not the pool's workers)
    for e in evs:
        if e["name"] == "ThreadPool::part":
            parts_ns[e["value"]] = parts_ns.get(e["value"], 0) + e["dur_ns"]
            part_threads[e["thread"]] = part_threads.get(e["thread"], 0) + e["dur_ns"]
        elif e["name"] == "ThreadPool::job":
            job_threads.add(e["thread"])
    ops = {}
    for i, e in enumerate(evs):
        if e["name"] != "ThreadPool::job":
            continue
        op = view.ancestor(i, "Operator")
        name = evs[op]["name"] if op >= 0 else "(no op)"
        threads = event_args(e).get("threads", 1)
        r = ops.setdefault(name, {"op": name, "jobs": 0, "threads": 0, "job_ms": 0.0, "core_ms": 0.0,
                                  "busy_ms": 0.0})
        r["jobs"] += 1
        r["threads"] = max(r["threads"], threads)
        r["job_ms"] += e["dur_ns"] / 1e6
        r["core_ms"] += e["dur_ns"] * threads / 1e6
        r["busy_ms"] += parts_ns.get(e["value"], 0) / 1e6
    for r in ops.values():
        r["efficiency"] = r["busy_ms"] / r["core_ms"] if r["core_ms"] else None
        r["idle_core_ms"] = max(0.0, r["core_ms"] - r["busy_ms"])
    workers = sorted(t for t in part_threads if t not in job_threads)
    worker_busy = sum(part_threads[t] for t in workers)
    run_ns = sum(e["dur_ns"] for e in evs if e["name"] == "Executor::run")
    return {"ops": sorted(ops.values(), key=lambda r: -r["idle_core_ms"]), "workers": workers,
            "worker_busy_ms": worker_busy / 1e6, "exe_run_ms": run_ns / 1e6,
            "utilisation": worker_busy / (run_ns * len(workers)) if run_ns and workers else None}


def thread_pool_summary(event_list=None):
    """From ThreadPool events. ops: per op type that issued parallel jobs (largest idle core time first): op, jobs,
    threads, job_ms, core_ms (job time x threads), busy_ms (its parts' time), efficiency (busy / core) and
    idle_core_ms (core - busy). workers: the threads that ran only parts (the pool's workers), worker_busy_ms,
    exe_run_ms and utilisation = worker_busy_ms / (workers x exe_run_ms): how busy the workers were while
    exe.run ran (None without workers or exe.run)."""
    return _thread_pool(ProfileView(event_list, 0))


def memory_summary(event_list=None):
    """The allocator's peak: peak_bytes (the largest ``mem_peak``), and the op at the peak: the first Operator
    event, in close order, whose mem_peak reaches it (op, event index, block, index, outputs, site; a sub-range
    names no variables). None when the profile recorded no memory figures."""
    return _memory(_checked_events(event_list))


def _memory(evs):
    peak = max((e.get("mem_peak", -1) for e in evs), default=-1)
    if peak < 0:
        return None
    at = min((i for i, e in enumerate(evs) if e["category"] == "Operator" and e.get("mem_peak", -1) == peak),
             key=lambda i: evs[i]["end_ns"], default=-1)
    out = {"peak_bytes": peak, "event": at, "op": None, "block": None, "index": None, "outputs": [], "site": None}
    if at >= 0:
        args = event_args(evs[at])
        out.update(op=evs[at]["name"], block=args.get("block"), index=args.get("index"), site=args.get("site"),
                   outputs=[v for names in args.get("output_vars", {}).values() for v in names])
    return out


def memcpy_summary(event_list=None):
    """Per direction: count, bytes, total ms and GB/s."""
    return _memcpy(_checked_events(event_list))


def _memcpy(evs):
    out = {}
    for e in evs:
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


COMM_WAIT_SUFFIX = "/wait"  # c_sync_comm_stream/wait: a thread waiting for the comm stream (csrc/comm.cc)


def communication_summary(event_list=None):
    """The collectives (category "Communication" events on the comm stream threads) per op type: op, calls, bytes
    (payload per rank), total_ms, gb_per_s; and the overlap: comm_ms (the streams' time in collectives), exposed_ms
    (the time other threads waited for a stream: the c_sync_comm_stream/wait events), hidden_ms = comm_ms -
    exposed_ms (communication behind compute) and overlap = hidden / comm (None without collectives)."""
    return _communication(_checked_events(event_list))


def _communication(evs):
    ops, exposed_ns, waits = {}, 0, 0
    for e in evs:
        if e["category"] != "Communication":
            continue
        if e["name"].endswith(COMM_WAIT_SUFFIX):
            exposed_ns += e["dur_ns"]
            waits += 1
            continue
        r = ops.setdefault(e["name"], {"op": e["name"], "calls": 0, "bytes": 0, "total_ns": 0})
        r["calls"] += 1
        r["bytes"] += max(e["bytes"], 0)
        r["total_ns"] += e["dur_ns"]
    rows = [{"op": r["op"], "calls": r["calls"], "bytes": r["bytes"], "total_ms": r["total_ns"] / 1e6,
             "gb_per_s": r["bytes"] / r["total_ns"] if r["total_ns"] > 0 else 0.0}
            for r in sorted(ops.values(), key=lambda r: -r["total_ns"])]
    comm_ns = sum(r["total_ns"] for r in ops.values())
    # A wait cannot hide more than the stream ran (a wait also covers the queue's hand-over): capped at comm_ns.
    exposed = min(exposed_ns, comm_ns)
    return {"ops": rows, "comm_ms": comm_ns / 1e6, "waits": waits, "exposed_ms": exposed / 1e6,
            "hidden_ms": (comm_ns - exposed) / 1e6, "overlap": (comm_ns - exposed) / comm_ns if comm_ns else None}


def _communication_lines(comm):
    lines = [_banner("Communication"), ""]
    lines.append("Op".ljust(24) + "Calls".ljust(12) + "Bytes".ljust(16) + "Time(ms)".ljust(12) + "GB/s")
    for r in comm["ops"]:
        lines.append(r["op"].ljust(24) + str(r["calls"]).ljust(12) + str(r["bytes"]).ljust(16)
                     + _fmt(r["total_ms"]).ljust(12) + "%.3f" % r["gb_per_s"])
    if comm["overlap"] is not None:
        lines.append("Overlap: %s ms of communication on the comm stream, %s ms hidden behind compute, %s ms exposed "
                     "(%d waits in c_sync_comm_stream): %.1f %% overlapped"
                     % (_fmt(comm["comm_ms"]), _fmt(comm["hidden_ms"]), _fmt(comm["exposed_ms"]), comm["waits"],
                        100 * comm["overlap"]))
    return lines + [""]


def scope_summary(event_list=None):
    """Scopes created and deleted (kid scopes, step scopes) and the time spent doing it; and the loop iterations
    (While and StaticRNN steps, forward and backward) with the step scopes created for them (the others reuse
    the scopes of earlier runs)."""
    return _scopes(_checked_events(event_list))


def _scopes(evs):
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


def _banner(title):
    return "------------------------->     %s     <-------------------------" % title


IDLE_GAP_US = IDLE_GAP_MIN_NS // 1000
NO_GPU_NOTE = ("Note! This build has no CUDA (fluid.core.is_compiled_with_cuda() is False): no GPU time was "
               "recorded; all times are CPU times.")
PREEMPTED_NOTE = "* %d samples preempted (wall >> thread CPU time): rerun on a quiet machine"


def _profiling_report(rows, merged, state, sorted_key, gpu_ns=None):
    """Fluid's table. With the GPU columns (state 'All' in a CUDA build), as Fluid's: Total = CPU time + GPU time,
    each with its share of the row's Total; a row's GPU time is the GPU spans of its name (an op type's kernels, a
    copy direction's copies; `gpu_ns`), shared among the rows of that name by calls when threads are reported
    apart."""
    gpu_layout = state == "All" and core.is_compiled_with_cuda()
    gpu_ns = gpu_ns or {}
    calls_by_name = {}
    for r in rows if gpu_layout else ():
        calls_by_name[r["event"]] = calls_by_name.get(r["event"], 0) + r["calls"]
    place = _PLACE_NAME[state] if core.is_compiled_with_cuda() else "CPU"
    lines = ["", _banner("Profiling Report"), ""]
    if merged:
        lines.append("Note! This Report merge all thread info into one.")
    lines.append("Place: %s" % place)
    if state != "CPU" and not core.is_compiled_with_cuda():
        lines.append(NO_GPU_NOTE)
    lines += ["Time unit: ms", "Sorted by %s in descending order in the same thread"
              % (_SORT_KEYS[sorted_key] or "event first end time"), ""]
    names = [(r["event"] if merged else "thread%d::%s" % (r["thread"], r["event"])) + ("*" if r["preempted"] else "")
             for r in rows]
    w = max([len(n) for n in names] + [5]) + 4
    header = "Event".ljust(w) + "Calls".ljust(12) + "Total".ljust(12)
    if gpu_layout:
        header += "CPU Time (Ratio)".ljust(24) + "GPU Time (Ratio)".ljust(24)
    header += "".join(c.ljust(12) for c in ("Min.", "Max.", "Ave.", "Ratio.", "Self.", "Median", "P95")) + "% wall"
    lines.append(header)
    for n, r in zip(names, rows):
        total, cells = r["total_ms"], ""
        if gpu_layout:
            gpu_ms = gpu_ns.get(r["event"], 0) / 1e6 * r["calls"] / max(1, calls_by_name[r["event"]])
            total += gpu_ms
            cells = ("%f (%f)" % (r["total_ms"], r["total_ms"] / total if total else 1.0)).ljust(24) + \
                ("%f (%f)" % (gpu_ms, gpu_ms / total if total else 0.0)).ljust(24)
        line = n.ljust(w) + str(r["calls"]).ljust(12) + _fmt(total).ljust(12) + cells
        line += "".join(_fmt(r[k]).ljust(12) for k in ("min_ms", "max_ms", "ave_ms", "ratio", "self_ms",
                                                        "median_ms", "p95_ms"))
        lines.append((line + "%.2f" % (100 * r["wall_ratio"])).rstrip())
    n_preempted = sum(r["preempted"] for r in rows)
    if n_preempted:
        lines.append(PREEMPTED_NOTE % n_preempted)
    lines.append("")
    return lines


def _gpu_lines(gpus):
    lines = [_banner("GPU Summary"), ""]
    for g in gpus:
        lines.append("CUDAPlace(%d): %d spans (%d op kernels, %d copies), busy %s ms of %s ms in the runs that used "
                     "it: %.1f %% utilised, idle %s ms" % (g["device"], g["spans"], g["kernels"], g["copies"],
                                                          _fmt(g["busy_ms"]), _fmt(g["window_ms"]),
                                                          100 * g["utilisation"], _fmt(g["idle_ms"])))
        if g["idle_gaps"]:
            lines.append("Idle between spans: %d gaps of %d us or more, %s ms in all; the longest:"
                         % (g["idle_gap_count"], IDLE_GAP_US, _fmt(g["idle_gap_ms"])))
            for gap in g["idle_gaps"]:
                lines.append("  %s ms between %s and %s (at %s ms)" % (_fmt(round(gap["gap_ms"], 4)), gap["after"],
                                                                     gap["before"], _fmt(round(gap["at_ms"], 3))))
    return lines + [""]


def gpu_summary_of(event_list=None):
    """Per device: spans, busy and idle ms, utilisation and the longest idle gaps (gpu.py: gpu_summary)."""
    evs = _checked_events(event_list)
    return gpu_summary(evs, step_events(evs))


def _time_lines(view):
    cov, fw = _coverage(view), _framework(view)
    lines = ["Wall time: %s ms (start_profiler to stop_profiler; %% wall = a row's total over it; Ratio. = over the "
             "sum of the thread's totals, which counts nested time twice)" % _fmt(view.wall_ns / 1e6)]
    if cov["runs"]:
        lines.append("Coverage: events explain %.2f %% of Executor::run wall time (%s of %s ms; gaps between "
                     "events: %s ms, the /gaps rows)" % (100 * cov["coverage"],
                                                        _fmt(cov["exe_run_ms"] - cov["unexplained_ms"]),
                                                        _fmt(cov["exe_run_ms"]), _fmt(cov["unexplained_ms"])))
        per_op = ("per-op framework time %s ms" % _fmt(fw["op_framework_ms"]) if fw["op_detail"] else
                  "per-op framework time: profile with tracer_option='OpDetail'")
        lines.append("Framework time: %s ms (%.2f %% of exe.run): executor gaps %s ms + %s"
                     % (_fmt(fw["framework_ms"]), 100 * fw["share"], _fmt(fw["gaps_ms"]), per_op))
    return lines + [""], fw


def _op_width(rows):
    return max([len(r["op"]) for r in rows] + [24]) + 4


def _op_table(title, rows, columns, width, cells):
    """A section's per-op table: banner, header ("Op" then `columns`, each `width` wide but the last) and one line
    per row from `cells(row)` (the cells' strings, in column order)."""
    w = _op_width(rows)
    lines = [_banner(title), "", "Op".ljust(w) + "".join(c.ljust(width) for c in columns[:-1]) + columns[-1]]
    for r in rows:
        values = cells(r)
        lines.append(r["op"].ljust(w) + "".join(v.ljust(width) for v in values[:-1]) + values[-1])
    return lines


def _framework_lines(fw):
    lines = _op_table("Framework vs Kernel", fw["ops"],
                      ("Calls", "Total", "Kernel", "InferShape", "Framework", "Framework %"), 14,
                      lambda r: [str(r["calls"])] + [_fmt(r[k]) for k in ("total_ms", "kernel_ms", "infer_shape_ms",
                                                                          "framework_ms")]
                      + ["%.2f" % (100 * r["framework_ms"] / r["total_ms"] if r["total_ms"] else 0.0)])
    return lines + ["(Kernel = <op>/compute, InferShape = <op>/infer_shape, Framework = the op's time outside "
                    "both)", ""]


def _thread_pool_lines(pool):
    lines = _op_table("Thread Pool Summary", pool["ops"],
                      ("Jobs", "Threads", "Job ms", "Busy ms", "Efficiency", "Idle core ms"), 12,
                      lambda r: [str(r["jobs"]), str(r["threads"]), _fmt(r["job_ms"]), _fmt(r["busy_ms"]),
                                 "%.3f" % r["efficiency"], _fmt(r["idle_core_ms"])])
    if pool["utilisation"] is not None:
        n = len(pool["workers"])
        lines.append("Pool workers (%d thread%s): busy %s ms over %s ms of exe.run: %.1f %% utilised"
                     % (n, "" if n == 1 else "s", _fmt(pool["worker_busy_ms"]), _fmt(pool["exe_run_ms"]),
                        100 * pool["utilisation"]))
    return lines + ["(Efficiency = a job's parts' time / (job time x threads); idle core time = job time x "
                    "threads - parts' time)", ""]


def _memory_line(mem):
    where = ""
    if mem["op"] is not None:
        where = ", at op %s" % mem["op"]
        if mem["index"] is not None:
            where += " (block %s, op %s)" % (mem["block"], mem["index"])
        if mem["outputs"]:
            where += " writing %s" % ", ".join(mem["outputs"])
        if mem["site"]:
            where += ", created at %s" % mem["site"]
    return ["Memory: peak %d bytes (%.2f MB) in use in the CPU allocator%s" % (mem["peak_bytes"],
                                                                            mem["peak_bytes"] / 1e6, where), ""]


def report(sorted_key=None, event_list=None, wall_ns=None):
    """The printed report, as a string: Fluid's layout (merged report first with several threads, then per
    thread) with Self., Median, P95 and % wall columns and the /gaps rows; wall time, coverage and framework time
    lines; then the memcpy, communication (when collectives ran), scope, framework-vs-kernel (OpDetail), thread
    pool and memory summaries."""
    _check_sorted_key(sorted_key)
    state = _state.state or "CPU"
    view = ProfileView(event_list, wall_ns)
    per_thread = _summary(view, sorted_key, False)
    gpu_ns = gpu_time_by_name(view.events)
    lines = []
    if len({r["thread"] for r in per_thread}) > 1:  # as Fluid's DisableProfiler: merged report first
        lines += _profiling_report(_summary(view, sorted_key, True), True, state, sorted_key, gpu_ns)
    lines += _profiling_report(per_thread, False, state, sorted_key, gpu_ns)
    time_lines, fw = _time_lines(view)
    lines += time_lines
    gpus = gpu_summary(view.events, step_events(view.events))
    if gpus:
        lines += _gpu_lines(gpus)
    mem = _memcpy(view.events)
    lines += [_banner("Memcpy Summary"), ""]
    lines.append("Direction".ljust(12) + "Count".ljust(12) + "Bytes".ljust(16) + "Time(ms)".ljust(12) + "GB/s")
    for r in mem:
        lines.append(r["direction"].ljust(12) + str(r["count"]).ljust(12) + str(r["bytes"]).ljust(16)
                     + _fmt(r["total_ms"]).ljust(12) + "%.3f" % r["gb_per_s"])
    if not mem:
        lines.append("(no memory copies)")
    comm = _communication(view.events)
    if comm["ops"]:
        lines += [""] + _communication_lines(comm)[:-1]
    sc = _scopes(view.events)
    lines += ["", _banner("Scope Summary "), "",
              "Scopes created: %d (%s ms)   deleted: %d (%s ms)" % (sc["created"], _fmt(sc["create_ms"]),
                                                                 sc["deleted"], _fmt(sc["delete_ms"]))]
    if sc["loop_iterations"]:
        lines.append("Loop step scopes: %d iterations (While and StaticRNN steps, forward and backward), %d step "
                     "scopes created for them, the rest reused" % (sc["loop_iterations"], sc["loop_scopes_created"]))
    lines.append("")
    if fw["op_detail"]:
        lines += _framework_lines(fw)
    pool = _thread_pool(view)
    if pool["ops"] or pool["workers"]:
        lines += _thread_pool_lines(pool)
    peak = _memory(view.events)
    if peak is not None:
        lines += _memory_line(peak)
    if event_list is None:
        dropped = _state.last_dropped if not _state.enabled else core.profiler_dropped_events()
        cap = _state.last_cap if not _state.enabled else core.profiler_event_cap()
        if dropped:
            lines += ["Warning: the event cap (%d events) dropped %d events; totals cover only the kept events."
                      % (cap, dropped), ""]
    return "\n".join(lines) + "\n"
