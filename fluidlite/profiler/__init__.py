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
import sys
import threading

from .. import core
from ._session import _SORT_KEYS as _SORT_KEYS
from ._session import _TRACER_OPTIONS, Event, _check_sorted_key, _check_state, _collect, _state, events
from .advisor import Advice, Finding, advise
from .report import memcpy_summary, report, scope_summary, summary
from .trace import export_chrome_trace
from .diff import Profile, diff, load_profile, save_profile

__all__ = ["profiler", "start_profiler", "stop_profiler", "reset_profiler", "RecordEvent", "summary", "events",
           "make_schedule", "export_chrome_trace", "set_event_cap", "cuda_profiler", "report", "memcpy_summary",
           "scope_summary", "Event", "step", "save_profile", "load_profile", "diff", "Profile", "advise",
           "Advice", "Finding"]


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
    _state.tracer_option = tracer_option or "Default"
    core.set_profiler_op_detail(_state.tracer_option != "Default")
    _state.start_ns, _state.stop_ns = core.now_ns(), None
    _state.enabled, _state.state, _state.schedule, _state.step_num = True, state, schedule, 0
    _state.phase = "none"
    _state.last_events = None
    _state.programs, _state.programs_seen = [], 0
    _state.run_wall_ns = _state.run_calls = 0
    _state.first_run_ns = _state.last_run_end_ns = None
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


