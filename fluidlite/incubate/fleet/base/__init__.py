"""fluid.incubate.fleet.base: the role makers (who this process is in the job)."""
from . import role_maker  # noqa: F401
