"""Fluid's global flags: ``fluid.set_flags({'FLAGS_check_nan_inf': True})`` and ``fluid.get_flags``.

Each flag also reads its environment variable when fluidlite is imported (``FLAGS_check_nan_inf=1``).
"""
from . import core

__all__ = ["set_flags", "get_flags"]

# name -> (getter, setter, type)
_FLAGS = {
    "FLAGS_check_nan_inf": (core.get_check_nan_inf, core.set_check_nan_inf, bool),
}


def _lookup(name):
    if name not in _FLAGS:
        raise ValueError("unknown flag '%s' (fluidlite supports: %s)" % (name, ", ".join(sorted(_FLAGS))))
    return _FLAGS[name]


def set_flags(flags):
    """Set flags from a dict {name: value}."""
    if not isinstance(flags, dict):
        raise TypeError("set_flags expects a dict {flag name: value}, got %s" % type(flags).__name__)
    for name, value in flags.items():
        _, setter, kind = _lookup(name)
        if not isinstance(value, (kind, int)) or isinstance(value, float):
            raise TypeError("flag %s expects a %s, got %r" % (name, kind.__name__, value))
        setter(kind(value))


def get_flags(flags):
    """The values of flags: a name or a list of names -> {name: value}."""
    names = [flags] if isinstance(flags, str) else list(flags)
    return {name: _lookup(name)[0]() for name in names}
