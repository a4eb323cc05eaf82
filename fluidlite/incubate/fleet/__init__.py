"""fluid.incubate.fleet: collective training (``fleet.collective``) and its role makers (``fleet.base.role_maker``).
Parameter-server training (``fleet.parameter_server``) is out of scope (docs/compat.md)."""
from . import base, collective  # noqa: F401
