"""The Chrome trace (Perfetto, chrome://tracing) of the recorded events."""
import json
import os

from ._session import events


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
