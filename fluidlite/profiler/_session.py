"""The profiling session's state and the recorded events, shared by the API, the report, the trace and the
advisor."""
from .. import core

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
    # The programs Executor.run ran while recording (distinct, first-run order; at most PROGRAMS_KEPT), for the
    # advisor: op events name their block and index, the program gives their consumers and attributes.
    programs = []
    programs_seen = 0  # distinct programs run while recording, kept or not (a program rebuilt per step)
    in_run = False  # inside a recorded Executor.run (a nested call records no second event)
    start_ns = None  # the profiler's clock (time.monotonic_ns) at start_profiler and stop_profiler (None: running)
    stop_ns = None
    tracer_option = "Default"
    device_events = []  # the GPU spans taken from the runtime since start_profiler (gpu.py)


_state = _State()


PROGRAMS_KEPT = 32


def _note_program(program):
    """Executor.run's hook while recording: remember `program` (strongly: a program rebuilt per step must stay
    inspectable after the loop dropped it)."""
    programs = _state.programs
    for p in programs:
        if p is program:
            return
    _state.programs_seen += 1
    if len(programs) < PROGRAMS_KEPT:
        programs.append(program)


def _check_state(state):
    if state not in _STATES:
        raise ValueError("profiler state must be one of 'CPU', 'GPU', 'All'; got %r" % (state,))


def _check_tracer_option(tracer_option):
    if tracer_option is not None and tracer_option not in _TRACER_OPTIONS:
        raise ValueError("tracer option must be 'Default', 'OpDetail', 'AllOpDetail'.")  # Fluid 1.8's words


def _check_sorted_key(sorted_key):
    if sorted_key not in _SORT_KEYS:
        raise ValueError("sorted_key must be None, 'calls', 'total', 'max', 'min' or 'ave'; got %r" % (sorted_key,))


class Event(dict):
    """One recorded event: name, category, start_ns, end_ns, dur_ns, thread, tid, depth, parent, bytes, args,
    cpu_ns (thread CPU time inside it, an upper bound; -1 when not measured: events shorter than the recorder's
    ~1 ms CPU-clock check interval), mem_in_use and mem_peak (CPU allocator bytes in use at its close, and the
    most since the profile started), value (a thread-pool job id, else -1). Fields and names: docs/profiling.md."""
    __slots__ = ()


def _collect():
    """The CPU events, then the GPU spans of the session so far (gpu.py: the runtime hands each over once, so they
    are kept in _state.device_events)."""
    from .gpu import take_device_events
    raw = core.collect_events()
    out = []
    for name, cat, start, end, thread, tid, depth, parent, nbytes, args, cpu, in_use, peak, value in raw:
        out.append(Event(name=name, category=cat, start_ns=start, end_ns=end, dur_ns=end - start, thread=thread,
                         tid=tid, depth=depth, parent=parent, bytes=nbytes, args=args, cpu_ns=cpu,
                         mem_in_use=in_use, mem_peak=peak, value=value))
    _state.device_events.extend(take_device_events(Event))
    return out + list(_state.device_events)


# One event per exe.run call at the top of its thread: the Python-side `Executor.run` (the whole call), or the C++
# `Executor::run` where the program was run without the Python executor (or profiled by core.enable_profiler()).
RUN_EVENTS = ("Executor.run", "Executor::run")


def step_event_indices(evs):
    """Indexes of the events that are one exe.run each (see RUN_EVENTS): the `Executor.run` events at the top of
    their thread (or directly inside a user range), else such `Executor::run` events."""
    for name in RUN_EVENTS:
        runs = [i for i, e in enumerate(evs) if e["name"] == name and
                (e["parent"] < 0 or evs[e["parent"]]["category"] == "User")]
        if runs:
            return runs
    return []


def step_events(evs):
    """The events that are one exe.run each (step_event_indices)."""
    return [evs[i] for i in step_event_indices(evs)]


def events():
    """Every recorded event (of the last stopped session, or so far if still running) as dicts."""
    if _state.enabled:
        return _collect()
    return list(_state.last_events or [])


