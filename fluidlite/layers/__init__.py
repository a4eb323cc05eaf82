"""fluid.layers: functions that append ops to the current program (Fluid 1.x names and arguments)."""
from . import io, learning_rate_scheduler, math_op_patch, nn, ops, tensor  # noqa: F401
from .io import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .ops import *  # noqa: F401,F403
from .learning_rate_scheduler import *  # noqa: F401,F403
from .tensor import *  # noqa: F401,F403

__all__ = io.__all__ + nn.__all__ + ops.__all__ + tensor.__all__ + learning_rate_scheduler.__all__
