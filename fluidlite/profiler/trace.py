"""The Chrome trace (Perfetto, chrome://tracing) of the recorded events."""
import json
import os

from .gpu import device_of, is_gpu_event
from .report import _checked_events, event_args, pool_wait_ns, preempted


def _thread_names(evs):
    """fluidlite thread index -> (OS tid, name): the pool's workers (threads that recorded only ThreadPool::part)
    are "pool worker N", the others "threadN" as in the report."""
    tids, only_parts = {}, {}
    for e in evs:
        tids.setdefault(e["thread"], e["tid"])
        only_parts[e["thread"]] = only_parts.get(e["thread"], True) and e["name"] == "ThreadPool::part"
    names, workers = {}, 0
    gpu_threads = {e["thread"]: device_of(e) for e in evs if is_gpu_event(e)}
    for t in sorted(tids):
        if t in gpu_threads:  # a device's stream: its own track under the process
            names[t] = (tids[t], "GPU stream (CUDAPlace(%d))" % gpu_threads[t])
        elif only_parts[t]:
            workers += 1
            names[t] = (tids[t], "pool worker %d" % workers)
        else:
            names[t] = (tids[t], "thread%d" % t)
    return names


def export_chrome_trace(path, event_list=None):
    """Write the recorded events (or `event_list`) as Chrome trace JSON: ``traceEvents`` with ``ph: "X"`` complete
    events (``ts``/``dur`` in microseconds; args as recorded, plus bytes and GB/s on memcpys and
    ``preempted``/``cpu_us`` on preempted samples; GPU spans on a "GPU stream (CUDAPlace(d))" track per device), a
    ``memory`` counter track (``ph: "C"``, bytes in use in the CPU allocator as each op closed, written where it
    changes) and process/thread name metadata. Written to a temporary file and renamed."""
    evs = _checked_events(event_list)
    pid = os.getpid()
    gpu = any(is_gpu_event(e) for e in evs)
    trace = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
              "args": {"name": "fluidlite (CPU and GPU)" if gpu else "fluidlite (CPU)"}}]
    for tid, name in _thread_names(evs).values():
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    t0 = min((e["start_ns"] for e in evs), default=0)
    memory = []
    waits = pool_wait_ns(evs)
    for e, wait in zip(evs, waits):
        args = event_args(e) if e["args"] else {}  # shared parse: copied only below, before adding keys
        if e["bytes"] >= 0:
            args = dict(args, bytes=e["bytes"])
            if e["dur_ns"] > 0:
                args["GB/s"] = round(e["bytes"] / e["dur_ns"], 3)
        if e.get("cpu_ns", -1) >= 0 and preempted(e, wait):
            args = dict(args, preempted=True, cpu_us=e["cpu_ns"] / 1000.0)
        trace.append({"ph": "X", "name": e["name"], "cat": e["category"], "pid": pid, "tid": e["tid"],
                      "ts": (e["start_ns"] - t0) / 1000.0, "dur": e["dur_ns"] / 1000.0, "args": args})
        if e.get("mem_in_use", -1) >= 0 and e["category"] == "Operator":
            memory.append((e["end_ns"], e["mem_in_use"]))
    memory.sort()
    last = None
    for end, n in memory:  # a counter holds its value until the next point: only changes are written
        if n != last:
            trace.append({"ph": "C", "name": "memory", "pid": pid, "ts": (end - t0) / 1000.0,
                          "args": {"bytes_in_use": n}})
            last = n
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp%d" % pid
    with open(tmp, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f, separators=(",", ":"))
    os.replace(tmp, path)
    return path
