"""fluid.memory_optimize / fluid.release_memory: Fluid's program-rewriting memory passes, deprecated since
Fluid 1.6 (which then left the program unchanged and warned). fluidlite's executor frees temporaries after
their last use in every run (eager deletion, docs/architecture.md), so both only check their arguments,
warn as Fluid 1.6+ does, and leave the program as it is (docs/parallel.md)."""
import warnings

from .framework import Program

__all__ = ["memory_optimize", "release_memory"]


def _check(caller, program, skip_opt_set):
    if not isinstance(program, Program):
        raise TypeError("%s: input_program must be a fluid Program, got %s" % (caller, type(program).__name__))
    if skip_opt_set is not None and not isinstance(skip_opt_set, (set, list, tuple)):
        raise TypeError("%s: skip_opt_set must be a set of variable names, got %s"
                        % (caller, type(skip_opt_set).__name__))


def memory_optimize(input_program, skip_opt_set=None, print_log=False, level=0, skip_grads=True):
    _check("memory_optimize", input_program, skip_opt_set)
    if level not in (0, 1):
        raise ValueError("memory_optimize: level must be 0 or 1, got %r" % (level,))
    warnings.warn("fluid.memory_optimize() is deprecated (as in Fluid 1.6+) and leaves the program unchanged: "
                  "fluidlite's executor frees every temporary after its last use (eager deletion)", stacklevel=2)


def release_memory(input_program, skip_opt_set=None):
    _check("release_memory", input_program, skip_opt_set)
    warnings.warn("fluid.release_memory() is deprecated (as in Fluid 1.6+) and leaves the program unchanged: "
                  "fluidlite's executor frees every temporary after its last use (eager deletion)", stacklevel=2)
