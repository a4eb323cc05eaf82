"""Learning-rate schedules as ops (Fluid 1.x). Each reads the int64 [1] counter ``@LR_DECAY_COUNTER@``
that an ``increment`` op placed first in the main program advances every run (the first run sees 0;
noam_decay's 1), so the schedule costs a handful of tiny ops per step and needs no Python between steps.

Each schedule is written with Variable arithmetic as Fluid 1.8 writes it, so it emits Fluid's op sequence
(``step / n`` a scale op by 1/n, ``rate ** x`` an elementwise_pow, ``lr * x`` a scale op) and its float32
values are those of Fluid's kernels, bit for bit (tests/test_lr_decay.py replays each sequence in numpy
float32). Where Fluid uses a ``Switch`` (piecewise_decay, linear_lr_warmup, polynomial_decay with cycle), so does
this module (layers/branches.py: one conditional block per case, only the first true one runs)."""
import math

from .. import unique_name
from ..framework import Variable, default_main_program
from ..initializer import Constant
from ..layer_helper import LayerHelper
from . import nn, ops, tensor
from .branches import Switch

__all__ = ["autoincreased_step_counter", "exponential_decay", "natural_exp_decay", "inverse_time_decay",
           "piecewise_decay", "polynomial_decay", "cosine_decay", "noam_decay", "linear_lr_warmup"]

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


def _result_var(name, dtype):
    """The persistable [1] result variable Fluid names `name`; a second schedule of the same kind in the
    program gets name_N instead of silently sharing the first one's (Fluid would share it)."""
    if name in default_main_program().global_block().vars:
        name = unique_name.generate(name)
    return tensor.create_global_var(shape=[1], value=0.0, dtype=dtype, persistable=True, name=name)


def _staircase(div_res, staircase):
    return ops.floor(div_res) if staircase else div_res


def exponential_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate * decay_rate ^ (step / decay_steps) (the exponent floored when staircase): an
    elementwise_pow, as Fluid computes it (not exp(x * ln(rate)), which rounds differently)."""
    with default_main_program()._lr_schedule_guard():
        div_res = _staircase(_decay_step_counter() / decay_steps, staircase)
        return learning_rate * (decay_rate ** div_res)


def natural_exp_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate * exp(-decay_rate * step / decay_steps) (step / decay_steps floored when staircase)."""
    with default_main_program()._lr_schedule_guard():
        div_res = _staircase(_decay_step_counter() / decay_steps, staircase)
        return learning_rate * ops.exp(-1 * decay_rate * div_res)


def inverse_time_decay(learning_rate, decay_steps, decay_rate, staircase=False):
    """learning_rate / (1 + decay_rate * step / decay_steps) (step / decay_steps floored when staircase)."""
    with default_main_program()._lr_schedule_guard():
        div_res = _staircase(_decay_step_counter() / decay_steps, staircase)
        return learning_rate / (1 + decay_rate * div_res)


def polynomial_decay(learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False):
    """(learning_rate - end_learning_rate) * (1 - step / decay_steps) ^ power + end_learning_rate, with step
    capped at decay_steps; with cycle, decay_steps is instead multiplied by ceil(step / decay_steps), set to 1 at
    step 0 by a Switch as in Fluid, so the decay restarts every decay_steps steps."""
    with default_main_program()._lr_schedule_guard():
        global_step = _decay_step_counter()
        if cycle:
            div_res = ops.ceil(global_step / decay_steps)
            zero_var = tensor.fill_constant(shape=[1], dtype="float32", value=0.0)
            one_var = tensor.fill_constant(shape=[1], dtype="float32", value=1.0)
            with Switch() as switch:
                with switch.case(nn.equal(global_step, zero_var)):
                    tensor.assign(input=one_var, output=div_res)
            decay_steps = decay_steps * div_res
        else:
            decay_steps_var = tensor.fill_constant(shape=[1], dtype="float32", value=float(decay_steps))
            global_step = nn.elementwise_min(global_step, decay_steps_var)
        return (learning_rate - end_learning_rate) * ((1 - global_step / decay_steps) ** power) + end_learning_rate


def piecewise_decay(boundaries, values):
    """values[i] while boundaries[i-1] <= step < boundaries[i] (values[0] before boundaries[0], values[-1] from
    boundaries[-1] on).

    The result is the persistable [1] variable ``learning_rate``, as in Fluid, assigned by a Switch: one case
    ``step < boundaries[i]`` per boundary (the first true one runs), the last value by default."""
    if len(values) - len(boundaries) != 1:
        raise ValueError("piecewise_decay: len(values) - len(boundaries) should be 1, got len(values) %d and "
                         "len(boundaries) %d" % (len(values), len(boundaries)))
    if any(b >= c for b, c in zip(boundaries[:-1], boundaries[1:])):
        raise ValueError("piecewise_decay: boundaries must be increasing, got %s" % (list(boundaries),))
    with default_main_program()._lr_schedule_guard():
        global_step = _decay_step_counter()
        lr = _result_var("learning_rate", "float32")
        with Switch() as switch:
            for boundary, value in zip(boundaries, values):
                boundary_val = tensor.fill_constant(shape=[1], dtype="float32", value=float(boundary), force_cpu=True)
                value_var = tensor.fill_constant(shape=[1], dtype="float32", value=float(value))
                with switch.case(nn.less_than(global_step, boundary_val)):
                    tensor.assign(value_var, lr)
            last_value_var = tensor.fill_constant(shape=[1], dtype="float32", value=float(values[-1]))
            with switch.default():
                tensor.assign(last_value_var, lr)
        return lr


def cosine_decay(learning_rate, step_each_epoch, epochs):
    """learning_rate * 0.5 * (cos(epoch * pi / epochs) + 1), epoch = floor(step / step_each_epoch)."""
    if not isinstance(learning_rate, (float, Variable)):
        raise TypeError("The type of 'learning_rate' in cosine_decay must be (float, Variable), but received %s."
                        % type(learning_rate))
    with default_main_program()._lr_schedule_guard():
        cur_epoch = ops.floor(_decay_step_counter() / step_each_epoch)
        return learning_rate * 0.5 * (ops.cos(cur_epoch * math.pi / epochs) + 1)


def noam_decay(d_model, warmup_steps, learning_rate=1.0):
    """learning_rate * d_model^-0.5 * min(step^-0.5, warmup_steps^-1.5 * step), the Transformer's schedule; its
    step counter begins at 1 (when it is the first schedule of the program to create @LR_DECAY_COUNTER@)."""
    with default_main_program()._lr_schedule_guard():
        global_step = _decay_step_counter(1)
        a = global_step ** -0.5
        b = (warmup_steps ** -1.5) * global_step
        return learning_rate * (d_model ** -0.5) * nn.elementwise_min(a, b)


def linear_lr_warmup(learning_rate, warmup_steps, start_lr, end_lr):
    """start_lr + (end_lr - start_lr) * step / warmup_steps while step < warmup_steps, then learning_rate (a
    float, or a Variable such as another schedule's output). The result is the persistable [1] variable
    ``learning_rate_warmup``, of learning_rate's dtype (float32 for a float), assigned by a Switch as in Fluid:
    the warm-up value in the case ``step < warmup_steps``, learning_rate by default.

    Deviation: with a float64 learning_rate the warm-up value (float32, from the step counter) is cast to float64
    before it is assigned; Fluid assigns the float32 value, so its float64 variable holds float32 data during the
    warm-up."""
    dtype = learning_rate.dtype if isinstance(learning_rate, Variable) else "float32"
    linear_step = float(end_lr) - float(start_lr)
    with default_main_program()._lr_schedule_guard():
        lr = _result_var("learning_rate_warmup", dtype)
        global_step = _decay_step_counter()
        limit = tensor.fill_constant(shape=[1], dtype="float32", value=float(warmup_steps))
        with Switch() as switch:
            with switch.case(nn.less_than(global_step, limit)):
                decayed_lr = start_lr + linear_step * (global_step / float(warmup_steps))
                if decayed_lr.dtype != lr.dtype:
                    decayed_lr = tensor.cast(decayed_lr, lr.dtype)
                tensor.assign(decayed_lr, lr)
            with switch.default():
                if not isinstance(learning_rate, Variable):
                    learning_rate = tensor.fill_constant(shape=[1], dtype=dtype, value=float(learning_rate))
                tensor.assign(learning_rate, lr)
    return lr
