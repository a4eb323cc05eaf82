"""The built-in profiler: Fluid's ``fluid.profiler`` API plus what users of other profilers expect.

    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path="/tmp/profile"):   # yields None
        for step in range(10):
            exe.run(...)

    with fluid.profiler.Profiler("CPU", schedule=fluid.profiler.make_schedule(wait=1, active=3)) as prof:
        for step in range(10):
            exe.run(...)
            prof.step()          # drives the schedule
    rows = prof.summary("total")

On stop it prints Fluid's "Profiling Report" (per-thread rows ``threadN::name`` and, with several threads,
the merged report first), the wall time, coverage and framework time, a memcpy summary, a scope summary,
the thread pool and memory summaries, and writes a Chrome trace (open it in Perfetto or chrome://tracing).
``summary()`` and ``events()`` give the same numbers to programs.

Events come from the C++ recorder (``csrc/profiler.h``): ops, executor phases, memcpys, scope creation and
deletion, thread pool jobs and user ranges (``RecordEvent``). Nesting comes from an explicit per-thread stack,
so self time is total minus the children's totals and is never negative.
"""
import contextlib
import functools
import sys
import threading

from .. import core
from ._session import _SORT_KEYS as _SORT_KEYS
from ._session import Event, _check_sorted_key, _check_state, _check_tracer_option, _collect, _state, events
from . import report as _report
from .advisor import Advice, Finding, advise
from .report import (communication_summary, coverage, framework_summary, memcpy_summary, memory_summary,
                     pool_wait_ns, preempted, report, scope_summary, summary, thread_pool_summary)
from .trace import export_chrome_trace
from .diff import Profile, diff, load_profile, save_profile

__all__ = ["profiler", "start_profiler", "stop_profiler", "reset_profiler", "RecordEvent", "summary", "events",
           "make_schedule", "export_chrome_trace", "set_event_cap", "cuda_profiler", "report", "memcpy_summary",
           "scope_summary", "Event", "step", "Profiler", "coverage", "framework_summary", "thread_pool_summary",
           "memory_summary", "preempted", "pool_wait_ns", "save_profile", "load_profile", "diff", "Profile", "advise",
           "Advice", "Finding", "communication_summary"]


def set_event_cap(max_events):
    """Keep at most `max_events` events (0 = unlimited; default 5,000,000). Later events are dropped and
    counted; the report says how many."""
    core.set_profiler_event_cap(int(max_events))


def reset_profiler():
    """Drop everything recorded so far (recording continues if the profiler is on)."""
    core.reset_profiler()
    _state.last_events = None
    from .gpu import take_device_events
    take_device_events(dict)
    _state.device_events = []


def start_profiler(state, tracer_option=None, schedule=None, max_events=None):
    """Start recording. `state` is 'CPU', 'GPU' or 'All' (GPU time needs a CUDA build). With a
    `schedule` (see make_schedule) recording follows the steps counted by ``step()``."""
    _check_state(state)
    _check_tracer_option(tracer_option)
    if _state.enabled:
        return
    if max_events is not None:  # for this profile only: stop_profiler restores the cap in force before
        _state.saved_cap = core.profiler_event_cap()
        set_event_cap(max_events)
    core.reset_profiler()
    _state.tracer_option = tracer_option or "Default"
    core.set_profiler_op_detail(_state.tracer_option != "Default")
    _state.start_ns, _state.stop_ns = core.now_ns(), None
    _state.enabled, _state.state, _state.schedule, _state.step_num = True, state, schedule, 0
    _state.phase = "none"
    _state.last_events = None
    _state.programs, _state.programs_seen = [], 0
    from .gpu import take_device_events
    take_device_events(dict)  # spans left from an earlier session are not this one's
    _state.device_events = []
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
    core.set_profiler_op_detail(False)
    _state.stop_ns = core.now_ns()
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
def profiler(state, sorted_key=None, profile_path="/tmp/profile", tracer_option="Default", schedule=None,
             max_events=None, print_report=True):
    """Fluid's context manager form of start_profiler/stop_profiler. Yields None, as Fluid's does: use
    ``Profiler`` for a handle (``step()``, ``summary()``, ``events()``, ``export()``). Every argument is checked
    before anything starts."""
    _check_arguments(state, sorted_key, tracer_option, schedule, max_events)
    start_profiler(state, tracer_option, schedule, max_events)
    try:
        yield
    finally:
        stop_profiler(sorted_key, profile_path, print_report)


def _check_arguments(state, sorted_key, tracer_option, schedule, max_events):
    _check_state(state)
    _check_sorted_key(sorted_key)
    _check_tracer_option(tracer_option)
    if schedule is not None and not callable(schedule):
        raise TypeError("schedule must be a function step -> 'none' | 'warmup' | 'record' (see make_schedule), "
                        "got %r" % (schedule,))
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 0):
        raise ValueError("max_events must be an int >= 0 (0 = unlimited), got %r" % (max_events,))


class Profiler:
    """A profiling session as an object: ``with Profiler("CPU", schedule=...) as prof: ... prof.step()``, or
    ``prof.start()`` / ``prof.stop()``. Arguments as ``profiler()``'s, checked here. After stop, ``summary()``,
    ``events()``, ``report()`` and ``export(path)`` give this profile's results even after later profiles."""

    def __init__(self, state="CPU", sorted_key=None, profile_path="/tmp/profile", tracer_option="Default",
                 schedule=None, max_events=None, print_report=True):
        _check_arguments(state, sorted_key, tracer_option, schedule, max_events)
        self.state, self.sorted_key, self.profile_path = state, sorted_key, profile_path
        self.tracer_option, self.schedule, self.max_events = tracer_option, schedule, max_events
        self.print_report = print_report
        self._events = self._wall_ns = None

    def start(self):
        if _state.enabled:  # (Fluid's start_profiler would silently keep the running one)
            raise RuntimeError("Profiler.start: a profiler is already running; stop it before starting another")
        start_profiler(self.state, self.tracer_option, self.schedule, self.max_events)
        self._events = self._wall_ns = None
        return self

    def stop(self):
        if not _state.enabled:
            return
        stop_profiler(self.sorted_key, self.profile_path, self.print_report)
        self._events = _state.last_events
        self._wall_ns = _report.session_wall_ns()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    step = staticmethod(step)

    @property
    def step_num(self):
        return _state.step_num

    def events(self):
        return list(self._events) if self._events is not None else events()

    def summary(self, sorted_key=None, merge_threads=None):
        return summary(sorted_key, merge_threads, event_list=self._events, wall_ns=self._wall_ns)

    def report(self, sorted_key=None):
        return report(sorted_key, event_list=self._events, wall_ns=self._wall_ns)

    def export(self, path):
        """Write this profile's Chrome trace to `path`."""
        return export_chrome_trace(path, event_list=self._events)


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


