"""Learning-rate schedules as ops (Fluid 1.x). Each reads the int64 [1] counter ``@LR_DECAY_COUNTER@``
that an ``increment`` op placed first in the main program advances every run (the first run sees 0),
so the schedule costs a handful of tiny ops per step and needs no Python between steps."""
import math

from ..framework import default_main_program
from ..initializer import Constant
from ..layer_helper import LayerHelper
from . import nn, ops, tensor

__all__ = ["autoincreased_step_counter", "exponential_decay", "natural_exp_decay", "inverse_time_decay",
           "piecewise_decay"]

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"


def autoincreased_step_counter(counter_name=None, begin=1, step=1):
    """A persistable int64 [1] counter, initialised to begin-1 by the startup program and advanced by an
    increment op prepended to the main program's block 0 (so it counts runs)."""
    helper = LayerHelper("global_step_counter")
    name = counter_name or "@STEP_COUNTER@"
    block = default_main_program().global_block()
    if name in block.vars:
        return block.vars[name]
    counter = helper.create_global_variable(name=name, dtype="int64", shape=[1], persistable=True)
    helper.set_variable_initializer(counter, Constant(value=begin - 1, force_cpu=True))
    block._prepend_op(type="increment", inputs={"X": [counter]}, outputs={"Out": [counter]},
                      attrs={"step": float(step)})
    counter.stop_gradient = True
    return counter


def _decay_step_counter(begin=0):
    counter = autoincreased_step_counter(counter_name=LR_DECAY_COUNTER, begin=begin, step=1)
    return tensor.cast(counter, "float32")


def _div_steps(step, decay_steps, staircase):
    div = nn.scale(step, scale=1.0 / float(decay_steps))
    if staircase:
        div = ops.floor(div)
    return div


def exponential_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr * decay_rate ^ (step / decay_steps)  (floor of the exponent when staircase)."""
    with default_main_program()._lr_schedule_guard():
        div = _div_steps(_decay_step_counter(), decay_steps, staircase)
        return nn.scale(ops.exp(nn.scale(div, scale=math.log(decay_rate))), scale=float(learning_rate))


def natural_exp_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr * exp(-decay_rate * step / decay_steps)."""
    with default_main_program()._lr_schedule_guard():
        div = _div_steps(_decay_step_counter(), decay_steps, staircase)
        return nn.scale(ops.exp(nn.scale(div, scale=-float(decay_rate))), scale=float(learning_rate))


def inverse_time_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """lr / (1 + decay_rate * step / decay_steps)."""
    with default_main_program()._lr_schedule_guard():
        div = _div_steps(_decay_step_counter(), decay_steps, staircase)
        denom = nn.scale(div, scale=float(decay_rate), bias=1.0)
        lr = tensor.fill_constant(shape=[1], dtype="float32", value=float(learning_rate))
        return nn.elementwise_div(lr, denom)


def piecewise_decay(boundaries, values):
    """values[i] while boundaries[i-1] <= step < boundaries[i]: values[0] plus a step function per boundary,
    lr = values[0] + sum_i (values[i+1] - values[i]) * (step >= boundaries[i])."""
    if len(values) != len(boundaries) + 1:
        raise ValueError("piecewise_decay: len(values) must be len(boundaries) + 1, got %d and %d"
                         % (len(values), len(boundaries)))
    with default_main_program()._lr_schedule_guard():
        step = _decay_step_counter()
        terms = [tensor.fill_constant(shape=[1], dtype="float32", value=float(values[0]))]
        for b, lo, hi in zip(boundaries, values[:-1], values[1:]):
            bound = tensor.fill_constant(shape=[1], dtype="float32", value=float(b))
            reached = tensor.cast(nn.greater_equal(step, bound), "float32")
            terms.append(nn.scale(reached, scale=float(hi - lo)))
        return tensor.sums(terms)
