"""fluid.layers: functions that append ops to the current program (Fluid 1.x names and arguments)."""
from . import control_flow, conv, io, learning_rate_scheduler, math_op_patch, nn, norm, ops, tensor  # noqa: F401
from . import loss, metric_op, sequence_lod, sequence_rnn  # noqa: F401
from .control_flow import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .io import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .norm import *  # noqa: F401,F403
from .ops import *  # noqa: F401,F403
from .learning_rate_scheduler import *  # noqa: F401,F403
from .metric_op import *  # noqa: F401,F403
from .sequence_rnn import *  # noqa: F401,F403
from .sequence_lod import *  # noqa: F401,F403
from .tensor import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403  (layers.rnn is then the rnn function, not the submodule, as in Fluid)
from .rnn import __all__ as _rnn_all

__all__ = (control_flow.__all__ + io.__all__ + nn.__all__ + ops.__all__ + tensor.__all__
           + learning_rate_scheduler.__all__ + conv.__all__
           + norm.__all__
           + metric_op.__all__ + loss.__all__
           + sequence_lod.__all__ + sequence_rnn.__all__
           + _rnn_all)
