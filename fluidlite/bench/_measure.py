"""What the bench measures besides time: process RSS peaks and program-construction counts.

RSS: Linux keeps the process's peak resident set size in ``VmHWM`` (/proc/self/status). Writing ``5``
to /proc/self/clear_refs resets that peak to the current RSS, so "peak RSS growth during an interval"
is exactly ``VmHWM at the end - VmRSS at the start`` after a reset at the start. Where the reset is not
permitted (or there is no /proc) the figure falls back to a lower bound:
``max(VmHWM growth, VmRSS growth)`` over the interval, and the method says so.

Construction: while a model builds its programs, the constructors of Program, Block, Variable (incl.
Parameter) and Operator are wrapped to count the Python objects created, and ``append_backward`` is
wrapped to time it and count what it creates. The wrappers live only inside ``count_construction()``;
fluidlite's own modules are not changed.
"""
import contextlib
import functools
import statistics
import time

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_bytes(key):
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_bytes():
    """Current resident set size in bytes (None where /proc is missing)."""
    return _status_bytes("VmRSS")


def hwm_bytes():
    """Peak resident set size (VmHWM) in bytes (None where /proc is missing)."""
    return _status_bytes("VmHWM")


def reset_hwm():
    """Reset VmHWM to the current RSS; True if the kernel allowed it."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


RSS_METHOD_EXACT = "VmHWM after - VmRSS before, VmHWM reset via /proc/self/clear_refs"
RSS_METHOD_BOUND = "lower bound: max(VmHWM growth, VmRSS growth) (VmHWM could not be reset)"


class PeakRSS:
    """Peak RSS growth over an interval: ``start()``, run, ``stop()`` -> bytes (None without /proc)."""

    def __init__(self):
        self.method = None

    def start(self):
        self.exact = reset_hwm()
        self.method = RSS_METHOD_EXACT if self.exact else RSS_METHOD_BOUND
        self.rss0, self.hwm0 = rss_bytes(), hwm_bytes()

    def stop(self):
        rss1, hwm1 = rss_bytes(), hwm_bytes()
        if None in (self.rss0, rss1, hwm1, self.hwm0):
            return None
        if self.exact:
            return max(0, hwm1 - self.rss0)
        return max(0, hwm1 - self.hwm0, rss1 - self.rss0)


_KINDS = (("programs", "Program"), ("blocks", "Block"), ("variables", "Variable"), ("operators", "Operator"))


def program_counts(programs):
    """Blocks, variables and operators held by `programs` (what the built IR contains)."""
    blocks = [b for p in programs for b in p.blocks]
    return {"programs": len(programs), "blocks": len(blocks),
            "variables": sum(len(b.vars) for b in blocks), "operators": sum(len(b.ops) for b in blocks)}


@contextlib.contextmanager
def count_construction():
    """Count Program/Block/Variable/Operator constructions and time append_backward while active.

    Yields a dict filled in on exit: ``created`` (counts), ``append_backward`` (``calls``, ``s``, and
    ``created``: the objects created inside it)."""
    import fluidlite
    from fluidlite import backward, framework, optimizer
    counts = {key: 0 for key, _ in _KINDS}
    stats = {"created": counts, "append_backward": {"calls": 0, "s": 0.0, "created": {key: 0 for key, _ in _KINDS}}}
    saved = []

    def counting(cls, key):
        original = cls.__dict__["__init__"]

        @functools.wraps(original)
        def __init__(self, *args, **kwargs):
            counts[key] += 1
            original(self, *args, **kwargs)
        saved.append((cls, "__init__", original))
        cls.__init__ = __init__

    for key, cls_name in _KINDS:
        counting(getattr(framework, cls_name), key)

    ab = stats["append_backward"]
    original_ab = backward.append_backward

    @functools.wraps(original_ab)
    def append_backward(*args, **kwargs):
        before = dict(counts)
        t0 = time.perf_counter()
        try:
            return original_ab(*args, **kwargs)
        finally:
            ab["s"] += time.perf_counter() - t0
            ab["calls"] += 1
            for key in counts:
                ab["created"][key] += counts[key] - before[key]

    for mod in (backward, optimizer, fluidlite):
        if getattr(mod, "append_backward", None) is original_ab:
            saved.append((mod, "append_backward", original_ab))
            mod.append_backward = append_backward
    try:
        yield stats
    finally:
        for obj, attr, value in reversed(saved):
            setattr(obj, attr, value)


def seconds_per_call(fn, runs, repeat, warmup):
    """(median, min, max) over `repeat` repetitions of the mean wall time of one fn() call, in seconds,
    after `warmup` untimed calls (each repetition times `runs` calls in a row)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        samples.append((time.perf_counter() - t0) / runs)
    return statistics.median(samples), min(samples), max(samples)
