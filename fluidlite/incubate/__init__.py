"""fluid.incubate: of Fluid 1.x's incubating APIs, fleet's collective (data-parallel) training."""
from . import fleet  # noqa: F401
