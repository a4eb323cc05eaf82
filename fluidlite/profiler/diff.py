"""Before/after profile diffs, the third step of the tune loop: save a profile (events plus the session facts a
comparison needs) to a file, load it back, and compare two profiles per event name, with the step-time change
and its noise band.

    fluid.profiler.save_profile("A.json", step_ms=step_times)     # after a profiled run
    ...fix...
    print(fluid.profiler.diff("A.json", "B.json"))                # or diff(profile_a, events_b)

The file is JSON (``"format": "fluidlite-profile"``, ``"version": 1``) with the events stored by column and
their names, categories and args as indices into one string table (an op's args repeat on every call).
"""
import datetime
import json
import math
import os
import platform
import tempfile

import numpy as np

from ._session import Event, _state, step_events
from ._session import events as _session_events
from .report import summary

FORMAT = "fluidlite-profile"
VERSION = 1
_INT_KEYS = ("start_ns", "end_ns", "thread", "tid", "depth", "parent", "bytes")
_OPTIONAL_INT_KEYS = ("cpu_ns", "mem_in_use", "mem_peak", "value")  # newer recorder fields: -1 when not recorded
_STRING_KEYS = ("name", "category", "args")  # args may be None (stored as -1)
MIN_SAMPLES = 3  # fewer step samples on a side give no noise band
BOOTSTRAP_RESAMPLES = 2000
BAND_PERCENTILES = (2.5, 97.5)  # a 95 % interval: two runs of one program are "within noise" 19 times in 20


class Profile:
    """A recorded or loaded profile: `events` (Event dicts), `step_ms` (per-step wall times in ms, or None),
    `steps` (steps profiled, or None), `wall_ns` (profiled wall time), `settings` (what ran: the bench's model,
    batch_size, threads, ...), `machine`, `fluidlite` (version) and `path` (the file, when loaded or saved)."""

    def __init__(self, events, step_ms=None, steps=None, wall_ns=None, settings=None, machine=None,
                 fluidlite=None, path=None, name=None):
        self.events = events
        self.step_ms = None if step_ms is None else _check_step_ms("step_ms", step_ms)
        self.steps = _check_steps("steps", steps) if steps is not None else (
            len(self.step_ms) if self.step_ms else None)
        if self.step_ms is None:  # fall back on the executor's runs: one exe.run per step
            runs = [e["dur_ns"] / 1e6 for e in step_events(events)]
            if runs:
                self.step_ms = runs
                self.steps = self.steps or len(runs)
        self.wall_ns = wall_ns if wall_ns is not None else _span_ns(events)
        self.settings = dict(settings or {})
        self.machine = dict(machine or {})
        self.fluidlite = fluidlite
        self.path = path
        self.name = name  # how a diff names a profile that has no file

    def label(self):
        return str(self.path) if self.path else (self.name or "events")

    def to_json(self):
        strings, index = [], {}

        def intern(s):
            if s is None:
                return -1
            i = index.get(s)
            if i is None:
                i = index[s] = len(strings)
                strings.append(s)
            return i
        evs = self.events
        columns = {k: [e[k] for e in evs] for k in _INT_KEYS}
        for k in _OPTIONAL_INT_KEYS:
            if evs and k in evs[0]:
                columns[k] = [e[k] for e in evs]
        for k in _STRING_KEYS:
            columns[k] = [intern(e[k]) for e in evs]
        return {"format": FORMAT, "version": VERSION, "fluidlite": self.fluidlite,
                "saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": self.machine, "settings": self.settings, "wall_ns": self.wall_ns, "steps": self.steps,
                "step_ms": self.step_ms, "strings": strings, "event_count": len(evs), "events": columns}

    def save(self, path):
        """Write the profile to `path` atomically (a temporary file in the same directory, then a rename)."""
        path = _check_path("path", path)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):  # else mkstemp's error would name the temporary file
            raise FileNotFoundError("save_profile: %s: directory %s does not exist" % (path, directory))
        try:
            text = json.dumps(self.to_json(), separators=(",", ":"))
        except TypeError as e:
            raise TypeError("save_profile: settings and machine must hold only JSON values (%s)" % e) from None
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.path = path
        return self


def _span_ns(evs):
    return max(e["end_ns"] for e in evs) - min(e["start_ns"] for e in evs) if evs else 0


def _check_path(argname, path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("%s must be a file path (str or os.PathLike), got %s" % (argname, type(path).__name__))
    return os.fspath(path)


def _check_steps(argname, steps):
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError("%s must be a number of steps >= 1, got %r" % (argname, steps))
    return steps


def _check_step_ms(argname, step_ms):
    try:
        values = [float(v) for v in step_ms]
    except (TypeError, ValueError):
        raise TypeError("%s must be a sequence of per-step times in ms, got %r" % (argname, step_ms)) from None
    bad = [v for v in values if not (v > 0 and math.isfinite(v))]
    if bad:
        raise ValueError("%s must hold positive finite per-step times in ms, got %r" % (argname, bad[0]))
    return values


def _machine():
    import fluidlite
    return {"machine": platform.machine(), "os": platform.platform(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "fluidlite": fluidlite.__version__}


def current_profile(events=None, step_ms=None, steps=None, settings=None, machine=None, name=None):
    """The last profile (or `events`) as a Profile, with the session's wall time (start to stop) when the
    events are the session's."""
    import fluidlite
    own = events is None
    evs = _session_events() if own else list(events)
    if not evs:
        raise ValueError("no profile to save: no events were recorded (run the profiler first, or pass events=)")
    wall = None
    start, stop = getattr(_state, "start_ns", None), getattr(_state, "stop_ns", None)
    if own and start is not None and stop is not None:
        wall = stop - start
    return Profile(evs, step_ms=step_ms, steps=steps, wall_ns=wall, settings=settings,
                   machine=machine if machine is not None else _machine(), fluidlite=fluidlite.__version__,
                   name=name)


def save_profile(path, events=None, step_ms=None, steps=None, settings=None, machine=None):
    """Write the last profile (or `events`) to `path` as JSON, atomically, with the session facts: wall time,
    the per-step times `step_ms` (ms; they give a diff its noise band), the number of `steps`, the `settings`
    that ran (a dict: the bench saves model, batch_size, threads, ...), the machine and fluidlite's version.
    Returns the Profile."""
    path = _check_path("path", path)
    return current_profile(events, step_ms, steps, settings, machine).save(path)


def _corrupt(path, what):
    return ValueError("load_profile: %s is not a readable fluidlite profile: %s" % (path, what))


def load_profile(path):
    """Read a profile written by save_profile (a Profile). A file that is not JSON, not a fluidlite profile,
    of a newer format version, or with damaged event columns is a ValueError naming the file and the fault."""
    path = _check_path("path", path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise _corrupt(path, "not JSON (%s)" % e) from None
    if isinstance(doc, dict) and "traceEvents" in doc or isinstance(doc, list):
        raise _corrupt(path, "it looks like a Chrome trace (profile_path / export_chrome_trace), not a file "
                       "written by fluid.profiler.save_profile")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise _corrupt(path, "no \"format\": %r key (found %r)" % (FORMAT, found))
    version = doc.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise _corrupt(path, "format version %r; this fluidlite reads version 1 to %d" % (version, VERSION))
    return _profile_from_json(path, doc)


def _profile_from_json(path, doc):
    strings, columns, n = doc.get("strings"), doc.get("events"), doc.get("event_count")
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise _corrupt(path, "'strings' is not a list of strings")
    if not isinstance(columns, dict) or not isinstance(n, int) or n < 0:
        raise _corrupt(path, "'events' is not a table of event columns with an 'event_count'")
    for k in _INT_KEYS + _STRING_KEYS + tuple(k for k in _OPTIONAL_INT_KEYS if k in columns):
        col = columns.get(k)
        if col is None or not isinstance(col, list):
            raise _corrupt(path, "event column %r is %s" % (k, "missing" if col is None else "not a list"))
        if len(col) != n:
            raise _corrupt(path, "event column %r has %d values, expected %d" % (k, len(col), n))
        if not all(type(v) is int for v in col):
            raise _corrupt(path, "event column %r holds a value that is not an integer" % k)
    top = len(strings)
    for k in _STRING_KEYS:
        if n and (min(columns[k]) < (-1 if k == "args" else 0) or max(columns[k]) >= top):
            raise _corrupt(path, "event column %r indexes past the string table (%d strings)" % (k, top))
    parents = columns["parent"]
    if n and (min(parents) < -1 or max(parents) >= n):
        raise _corrupt(path, "event column 'parent' points outside the %d events" % n)
    wall = doc.get("wall_ns")
    if wall is not None and (type(wall) is not int or wall < 0):
        raise _corrupt(path, "'wall_ns' is %r, not a number of nanoseconds" % (wall,))
    absent = [-1] * n
    cols = [columns[k] for k in _INT_KEYS] + [columns.get(k, absent) for k in _OPTIONAL_INT_KEYS]
    names = [strings[i] for i in columns["name"]]
    cats = [strings[i] for i in columns["category"]]
    args = [strings[i] if i >= 0 else None for i in columns["args"]]
    evs = []
    for i, (start, end, thread, tid, depth, parent, nbytes, cpu, mem, peak, value) in enumerate(zip(*cols)):
        evs.append(Event(name=names[i], category=cats[i], start_ns=start, end_ns=end, dur_ns=end - start,
                         thread=thread, tid=tid, depth=depth, parent=parent, bytes=nbytes, args=args[i],
                         cpu_ns=cpu, mem_in_use=mem, mem_peak=peak, value=value))
    try:
        return Profile(evs, step_ms=doc.get("step_ms"), steps=doc.get("steps"), wall_ns=wall,
                       settings=doc.get("settings"), machine=doc.get("machine"), fluidlite=doc.get("fluidlite"),
                       path=path)
    except (TypeError, ValueError) as e:
        raise _corrupt(path, "bad session facts (%s)" % e) from None


def as_profile(x, argname):
    """A Profile from a saved-profile path, a Profile, or a list of events."""
    if isinstance(x, Profile):
        return x
    if isinstance(x, (str, os.PathLike)):
        return load_profile(x)
    if isinstance(x, (list, tuple)) and all(isinstance(e, dict) for e in x):
        missing = sorted(set(("name", "category", "start_ns", "end_ns", "dur_ns", "thread", "parent", "bytes"))
                         - set(x[0])) if x else []
        if missing:
            raise ValueError("%s: the events lack the keys %s (pass fluid.profiler.events() or a saved profile)"
                             % (argname, ", ".join(missing)))
        return Profile(list(x))
    raise TypeError("%s must be a saved-profile path, a Profile or a list of events, got %s"
                    % (argname, type(x).__name__))


def _percentile(values, q):
    return float(np.percentile(values, q))


def step_change(samples_a, samples_b, resamples=BOOTSTRAP_RESAMPLES, seed=0):
    """The step-time change from A's to B's per-step samples (ms): medians, p5-p95 of each side, the change of
    the median in %, and its noise band: the 2.5th-97.5th percentile of the median ratio over `resamples` bootstrap
    resamples of both sides (deterministic: seeded): ``band_low_pct`` .. ``band_high_pct``, half-width
    ``band_pct``. ``within_noise``: the band contains 0; None when a side has fewer than MIN_SAMPLES samples
    (no band)."""
    a, b = np.asarray(samples_a, dtype=np.float64), np.asarray(samples_b, dtype=np.float64)
    med_a, med_b = float(np.median(a)), float(np.median(b))
    out = {"ms_a": med_a, "ms_b": med_b, "change_pct": (med_b / med_a - 1) * 100, "samples_a": len(a),
           "samples_b": len(b), "p5_ms_a": _percentile(a, 5), "p95_ms_a": _percentile(a, 95),
           "p5_ms_b": _percentile(b, 5), "p95_ms_b": _percentile(b, 95),
           "band_low_pct": None, "band_high_pct": None, "band_pct": None, "within_noise": None}
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return out
    rng = np.random.default_rng(seed)
    ra = np.median(a[rng.integers(0, len(a), size=(resamples, len(a)))], axis=1)
    rb = np.median(b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    ratio = (rb / ra - 1) * 100
    low, high = _percentile(ratio, BAND_PERCENTILES[0]), _percentile(ratio, BAND_PERCENTILES[1])
    out.update(band_low_pct=low, band_high_pct=high, band_pct=(high - low) / 2, within_noise=bool(low <= 0 <= high))
    return out


def _sample_arg(argname, steps, profile):
    """steps_a / steps_b: None (the profile's own), a number of steps, or per-step times in ms."""
    if steps is None:
        return profile.steps, profile.step_ms
    if isinstance(steps, int) and not isinstance(steps, bool):
        return _check_steps(argname, steps), profile.step_ms
    samples = _check_step_ms(argname, steps)
    if not samples:
        raise ValueError("%s must hold at least one per-step time, got an empty sequence" % argname)
    return len(samples), samples


class ProfileDiff:
    """What diff() returns. `rows`: one dict per event name (merged threads) with ``event``, ``category``,
    ``change`` ('changed', 'added': only in B, 'removed': only in A), ``calls_a/_b``, ``total_ms_a/_b``,
    ``self_ms_a/_b``, ``share_a/_b`` (total over the profiled step time), ``delta_ms`` and ``delta_pct``
    (None for an added event), sorted by |delta_ms|. With both step counts known (`per_step`), calls and times
    are per step. `step`: step_change()'s dict, or None without step samples on both sides. `added`,
    `removed`: event names. str() is the printed table."""

    def __init__(self, a, b, rows, step, per_step, steps_a, steps_b):
        self.a, self.b, self.rows, self.step, self.per_step = a, b, rows, step, per_step
        self.steps_a, self.steps_b = steps_a, steps_b
        self.added = [r["event"] for r in rows if r["change"] == "added"]
        self.removed = [r["event"] for r in rows if r["change"] == "removed"]

    def headline(self):
        s = self.step
        if s is None:
            return "step time: unknown (no per-step times on both sides: pass steps_a= and steps_b=)"
        text = "step time %s ms -> %s ms (%+.1f %%, " % (_num(s["ms_a"]), _num(s["ms_b"]), s["change_pct"])
        if s["within_noise"] is None:
            return text + "noise band unknown: %d and %d step samples, %d needed on each side)" % (
                s["samples_a"], s["samples_b"], MIN_SAMPLES)
        low, high, change = s["band_low_pct"], s["band_high_pct"], s["change_pct"]
        if (abs(change) <= s["band_pct"]) == s["within_noise"]:  # +-half around the change tells the same
            text += "noise band +-%.1f %%)" % s["band_pct"]
        else:  # a lopsided band (outlier steps): the interval itself, so the verdict reads true from the line
            text += "noise band %+.1f %% .. %+.1f %%)" % (low, high)
        return text + (": within noise" if s["within_noise"] else "")

    def text(self):
        s = self.step
        lines = ["A: %s%s" % (self.a.label(), _describe(self.a, self.steps_a)),
                 "B: %s%s" % (self.b.label(), _describe(self.b, self.steps_b)), self.headline()]
        if s is not None:
            lines.append("   step ms median (p5 - p95): A %s (%s - %s) over %d samples, B %s (%s - %s) over %d samples"
                         % (_num(s["ms_a"]), _num(s["p5_ms_a"]), _num(s["p95_ms_a"]), s["samples_a"],
                            _num(s["ms_b"]), _num(s["p5_ms_b"]), _num(s["p95_ms_b"]), s["samples_b"]))
            if s["within_noise"] is not None:
                lines.append("   noise band: %+.1f %% .. %+.1f %% (%g-%g percentile of the median ratio over %d "
                             "bootstrap resamples)" % (s["band_low_pct"], s["band_high_pct"], BAND_PERCENTILES[0],
                                                       BAND_PERCENTILES[1], BOOTSTRAP_RESAMPLES))
        lines += ["", "------------------------->     Profile Diff     <-------------------------", "",
                  "Time unit: ms%s" % (" per step (calls per step too)" if self.per_step else
                                        " (totals over each profile: step counts unknown)"),
                  "Sorted by |Delta| (B - A total) in descending order", ""]
        table = [("Event", "Calls A/B", "Total A/B", "Delta", "Self A/B", "Share A/B")]
        for r in self.rows:
            if r["change"] == "changed":
                delta = "%s (%+.1f %%)" % (_signed(r["delta_ms"]), r["delta_pct"]) if r["delta_pct"] is not None \
                    else _signed(r["delta_ms"])
            else:
                delta = "%s (%s)" % (_signed(r["delta_ms"]), r["change"])
            table.append((r["event"], _pair(r, "calls"), _pair(r, "total_ms"), delta, _pair(r, "self_ms"),
                          _pair(r, "share", "%.1f%%", 100)))
        widths = [max(len(row[i]) for row in table) + 3 for i in range(len(table[0]))]
        lines += ["".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        lines += ["", "Removed (only in A): %s" % (", ".join(self.removed) or "none"),
                  "Added (only in B): %s" % (", ".join(self.added) or "none"), ""]
        return "\n".join(lines) + "\n"

    __str__ = text


def _num(x):
    return "%.4g" % x


def _signed(x):
    return ("+" if x > 0 else "") + _num(x)


def _pair(row, key, fmt=None, scale=1):
    def one(v):
        if v is None:
            return "-"
        return fmt % (v * scale) if fmt else _num(v)
    return "%s/%s" % (one(row[key + "_a"]), one(row[key + "_b"]))


def _describe(profile, steps):
    parts = []
    if steps:
        parts.append("%d steps" % steps)
    st = profile.settings
    if st:
        parts.append(", ".join("%s %s" % (k, st[k]) for k in ("model", "batch_size", "threads") if k in st))
    parts.append("%d events" % len(profile.events))
    return " (%s)" % "; ".join(p for p in parts if p)


def _per_event(profile, steps):
    """summary()'s merged rows by event name, scaled to one step when `steps` is given, with the share of the
    profiled step time (the per-step samples' sum, else the profile's wall time)."""
    step_ms = profile.step_ms
    covered_ms = sum(step_ms) if step_ms and (steps is None or len(step_ms) == steps) else profile.wall_ns / 1e6
    scale = 1.0 / steps if steps else 1.0
    out = {}
    for r in summary(merge_threads=True, event_list=profile.events):
        out[r["event"]] = {"category": r["category"], "calls": r["calls"] * scale, "total_ms": r["total_ms"] * scale,
                           "self_ms": r["self_ms"] * scale,
                           "share": r["total_ms"] / covered_ms if covered_ms > 0 else None}
    return out


def diff(a, b, steps_a=None, steps_b=None):
    """Compare profile `a` (before) with `b` (after): each a saved-profile path, a Profile (load_profile) or an
    event list (events()). `steps_a` / `steps_b`: the per-step times in ms behind each (for the noise band),
    or just the number of steps; default: the profile's own (saved by the bench, else its Executor::run
    events). Returns a ProfileDiff; print it for the table."""
    pa, pb = as_profile(a, "a"), as_profile(b, "b")
    na, samples_a = _sample_arg("steps_a", steps_a, pa)
    nb, samples_b = _sample_arg("steps_b", steps_b, pb)
    per_step = bool(na and nb)
    ea, eb = _per_event(pa, na if per_step else None), _per_event(pb, nb if per_step else None)
    rows = []
    for name in list(ea) + [n for n in eb if n not in ea]:
        ra, rb = ea.get(name), eb.get(name)
        row = {"event": name, "category": (ra or rb)["category"],
               "change": "changed" if ra and rb else ("removed" if ra else "added")}
        for key in ("calls", "total_ms", "self_ms", "share"):
            row[key + "_a"] = ra[key] if ra else None
            row[key + "_b"] = rb[key] if rb else None
        ta, tb = row["total_ms_a"] or 0.0, row["total_ms_b"] or 0.0
        row["delta_ms"] = tb - ta
        row["delta_pct"] = (tb - ta) / ta * 100 if ra and ta > 0 else None
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["delta_ms"]))  # stable: ties keep A's end-time order
    step = step_change(samples_a, samples_b) if samples_a and samples_b else None
    return ProfileDiff(pa, pb, rows, step, per_step, na, nb)
