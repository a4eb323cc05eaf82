"""Optimizers (Fluid 1.x): each appends one update op per parameter (``sgd``, ``momentum``, ``adam``, ...) with
its accumulators as persistable variables initialised in the startup program; ``ExponentialMovingAverage`` and
``ModelAverage`` keep averages of the parameters and swap them in with ``apply``/``restore``."""
import contextlib

from . import framework, unique_name
from .backward import append_backward
from .clip import GradientClipBase, append_gradient_clip_ops
from .framework import Program, Variable, default_main_program, default_startup_program, program_guard
from .initializer import Constant
from .layer_helper import LayerHelper
from .regularizer import append_regularization_ops

__all__ = ["SGD", "Momentum", "Adam", "Adagrad", "SGDOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "AdagradOptimizer", "Optimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Adadelta",
           "AdadeltaOptimizer", "Adamax", "AdamaxOptimizer", "RMSProp", "RMSPropOptimizer", "Ftrl", "FtrlOptimizer",
           "Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer", "ExponentialMovingAverage",
           "ModelAverage"]


class Optimizer:
    def __init__(self, learning_rate, regularization=None, name=None, grad_clip=None, parameter_list=None):
        if not isinstance(learning_rate, (float, int, Variable)):
            raise TypeError("learning_rate must be a float or a Variable, got %s" % type(learning_rate).__name__)
        if grad_clip is not None and not isinstance(grad_clip, GradientClipBase):
            raise TypeError("'grad_clip' should be an instance of GradientClipBase's derived class "
                            "(GradientClipByValue, GradientClipByNorm, GradientClipByGlobalNorm), got %s"
                            % type(grad_clip).__name__)
        self._learning_rate = learning_rate
        self.regularization = regularization
        self._grad_clip = grad_clip
        self._name = name
        self._parameter_list = parameter_list
        self._dtype = None
        self._learning_rate_map = {}
        self._accumulators = {}
        self._opti_name_list = []
        self.helper = None
        self.type = getattr(self, "type", "optimizer")

    # --- learning rate
    def _create_global_learning_rate(self, program=None):
        program = program or framework.default_main_program()
        if program in self._learning_rate_map:
            return
        if isinstance(self._learning_rate, Variable):
            self._learning_rate_map[program] = self._learning_rate
            return
        lr = program.global_block().create_var(name=unique_name.generate("learning_rate"), shape=[1],
                                               dtype="float32", persistable=True, stop_gradient=True)
        LayerHelper("learning_rate").set_variable_initializer(lr, Constant(float(self._learning_rate)))
        self._learning_rate_map[program] = lr

    def _global_learning_rate(self, program=None):
        return self._learning_rate_map.get(program or framework.default_main_program())

    def _create_param_lr(self, param_and_grad):
        param = param_and_grad[0]
        factor = param.optimize_attr.get("learning_rate", 1.0) if hasattr(param, "optimize_attr") else 1.0
        lr = self._global_learning_rate(param.block.program)
        if factor == 1.0:
            return lr
        from .layers import scale
        return scale(lr, scale=float(factor))

    # --- accumulators
    def _add_accumulator(self, name, param, dtype=None, fill_value=0.0, shape=None):
        """A persistable `param.name + "_" + name` (unique-suffixed; Fluid prefixes `name` with the optimizer's
        name when it has one), filled with fill_value by the startup program."""
        if self._name is not None:
            name = self._name + "_" + name
        per_param = self._accumulators.setdefault(name, {})
        if param.name in per_param:
            raise ValueError("accumulator %s already exists for parameter %s" % (name, param.name))
        block = param.block.program.global_block()
        var = block.create_var(name=unique_name.generate(param.name + "_" + name), persistable=True,
                               dtype=dtype or param.dtype, shape=list(shape if shape is not None else param.shape),
                               stop_gradient=True)
        LayerHelper(name).set_variable_initializer(var, Constant(float(fill_value)))
        per_param[param.name] = var
        self._opti_name_list.append(var.name)
        return var

    def get_opti_var_name_list(self):
        """The names of the accumulator variables this optimizer created (Fluid 1.8)."""
        return self._opti_name_list

    def _get_accumulator(self, name, param):
        if self._name is not None:
            name = self._name + "_" + name
        try:
            return self._accumulators[name][param.name]
        except KeyError:
            raise ValueError("no accumulator %s for parameter %s" % (name, param.name)) from None

    # --- subclass hooks
    def _create_accumulators(self, block, parameters):
        pass

    def _append_optimize_op(self, block, param_and_grad):
        raise NotImplementedError

    def _finish_update(self, block, parameters_and_grads):
        pass

    # --- the public API: minimize = backward + apply_optimize (apply_gradients under the loss's program)
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        """The first part of minimize: append the backward pass of `loss` (under its program and
        `startup_program`); returns [(param, grad)] for the trainable parameters (or `parameter_list`, else the
        optimizer's own parameter_list) the loss depends on."""
        self._dtype = loss.dtype
        parameter_list = parameter_list if parameter_list else self._parameter_list
        with program_guard(loss.block.program, startup_program):
            return append_backward(loss, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        """The second part of minimize: append clipping, regularization and update ops to the parameters'
        program (whatever the default main program is); returns the update ops. The clip is the optimizer's
        grad_clip when it has one (Fluid 1.8: a set_gradient_clip on the same parameters is then ignored,
        with Fluid's warning), else each parameter's set_gradient_clip attribute."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        program = framework._program_of_params(params_grads, "apply_gradients")
        with program_guard(program):  # layers used on the way (lr scaling, clipping) build into it too
            if self._grad_clip is not None:
                params_grads = self._grad_clip(params_grads)
            else:
                params_grads = append_gradient_clip_ops(params_grads)
            params_grads = append_regularization_ops(params_grads, self.regularization)
            return self._create_optimization_pass(params_grads)

    def apply_optimize(self, loss, startup_program, params_grads):
        """apply_gradients under `loss`'s program and `startup_program` (Fluid 1.8's second half of minimize)."""
        with program_guard(loss.block.program, startup_program):
            return self.apply_gradients(params_grads)

    def _create_optimization_pass(self, params_grads):
        program = framework._program_of_params(params_grads, "apply_gradients")
        block = program.global_block()
        self.helper = LayerHelper(self.__class__.__name__)
        self._create_global_learning_rate(program)
        self._create_accumulators(block, [p for p, g in params_grads if p.trainable])
        ops = []
        for param, grad in params_grads:
            if grad is None or not param.trainable:
                continue
            with program._optimized_guard([param, grad]), framework.name_scope("optimizer"):
                ops.append(self._append_optimize_op(block, (param, grad)))
        with program._optimized_guard([]):
            self._finish_update(block, params_grads)
        return ops

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, grad_clip=None):
        """Append backward and update ops for `loss`; returns (optimize_ops, params_grads). `grad_clip` (Fluid
        1.6's argument) replaces the optimizer's grad_clip."""
        if not isinstance(loss, Variable):
            raise TypeError("minimize: loss must be a Variable, got %s" % type(loss).__name__)
        if grad_clip is not None:
            if not isinstance(grad_clip, GradientClipBase):
                raise TypeError("minimize: 'grad_clip' should be an instance of GradientClipBase's derived class, "
                                "got %s" % type(grad_clip).__name__)
            self._grad_clip = grad_clip
        startup = startup_program or default_startup_program()
        params_grads = self.backward(loss, startup, parameter_list, no_grad_set)
        optimize_ops = self.apply_optimize(loss, startup, params_grads)
        return optimize_ops, params_grads


class SGDOptimizer(Optimizer):
    """p -= lr * g"""

    type = "sgd"

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        return block.append_op(type="sgd", inputs={"Param": p, "Grad": g,
                                                   "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p})


class MomentumOptimizer(Optimizer):
    """v = momentum * v + g; p -= lr * v (or Nesterov)."""

    type = "momentum"
    _velocity_acc_str = "velocity"

    def __init__(self, learning_rate, momentum, use_nesterov=False, regularization=None, name=None, grad_clip=None,
                 parameter_list=None):
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._velocity_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        v = self._get_accumulator(self._velocity_acc_str, p)
        return block.append_op(type="momentum",
                               inputs={"Param": p, "Grad": g, "Velocity": v,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "VelocityOut": v},
                               attrs={"mu": self._momentum, "use_nesterov": self._use_nesterov})


class AdamOptimizer(Optimizer):
    """Adam with Fluid's accumulator names (moment1_0, moment2_0, beta1_pow_acc_0, beta2_pow_acc_0)."""

    type = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, regularization=None, name=None,
                 lazy_mode=False, grad_clip=None, parameter_list=None):
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._beta1, self._beta2, self._epsilon, self._lazy_mode = float(beta1), float(beta2), float(epsilon), lazy_mode

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator("moment1", p)
            self._add_accumulator("moment2", p)
            self._add_accumulator("beta1_pow_acc", p, fill_value=self._beta1, shape=[1])
            self._add_accumulator("beta2_pow_acc", p, fill_value=self._beta2, shape=[1])

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m1, m2 = self._get_accumulator("moment1", p), self._get_accumulator("moment2", p)
        b1p, b2p = self._get_accumulator("beta1_pow_acc", p), self._get_accumulator("beta2_pow_acc", p)
        return block.append_op(type="adam",
                               inputs={"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                                       "Moment1": m1, "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p},
                               outputs={"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2},
                               attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                                      "lazy_mode": self._lazy_mode})

    def _finish_update(self, block, parameters_and_grads):
        """beta{1,2}_pow *= beta{1,2}, once per parameter per step (Fluid's scale ops)."""
        for p, g in parameters_and_grads:
            if g is None or not p.trainable:
                continue
            for acc, beta in (("beta1_pow_acc", self._beta1), ("beta2_pow_acc", self._beta2)):
                var = self._get_accumulator(acc, p)
                block.append_op(type="scale", inputs={"X": var}, outputs={"Out": var}, attrs={"scale": beta})


class AdagradOptimizer(Optimizer):
    """moment += g^2; p -= lr * g / (sqrt(moment) + epsilon), with Fluid's accumulator name (moment_0); a sparse
    (SelectedRows) gradient updates only its rows (docs/sparse.md)."""

    type = "adagrad"
    _moment_acc_str = "moment"

    def __init__(self, learning_rate, epsilon=1.0e-6, regularization=None, name=None, initial_accumulator_value=0.0,
                 grad_clip=None, parameter_list=None):
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._epsilon = float(epsilon)
        self._initial_accumulator_value = float(initial_accumulator_value)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p, fill_value=self._initial_accumulator_value)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        return block.append_op(type="adagrad",
                               inputs={"Param": p, "Grad": g, "Moment": m,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "MomentOut": m}, attrs={"epsilon": self._epsilon})


SGD = SGDOptimizer
Momentum = MomentumOptimizer
Adam = AdamOptimizer
Adagrad = AdagradOptimizer


# ---------------------------------------------------------------- Fluid 1.8's other optimizers
# Their signatures are Fluid 1.8's (learning_rate first, then the optimizer's own arguments, then
# parameter_list, regularization, grad_clip, name). parameter_list restricts minimize to those parameters.


def _check_number(cls, **values):
    for k, v in values.items():
        if v is None:
            raise ValueError("%s: %s is not set" % (cls, k))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("%s: %s must be a number, got %s" % (cls, k, type(v).__name__))


class DecayedAdagradOptimizer(Optimizer):
    """moment = decay * moment + (1 - decay) * g^2; p -= lr * g / (sqrt(moment) + epsilon)  (op decayed_adagrad,
    accumulator moment)."""

    type = "decayed_adagrad"
    _moment_acc_str = "moment"

    def __init__(self, learning_rate, decay=0.95, epsilon=1.0e-6, parameter_list=None, regularization=None,
                 grad_clip=None, name=None):
        _check_number("DecayedAdagradOptimizer", decay=decay, epsilon=epsilon)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._decay, self._epsilon = float(decay), float(epsilon)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "Moment": m,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "MomentOut": m},
                               attrs={"epsilon": self._epsilon, "decay": self._decay})


class AdadeltaOptimizer(Optimizer):
    """Adadelta (op adadelta, accumulators _avg_squared_grad and _avg_squared_update). As in Fluid 1.8 the op
    has no learning-rate input: learning_rate is required and checked but does not scale the update."""

    type = "adadelta"
    _avg_squared_grad_acc_str = "_avg_squared_grad"
    _avg_squared_update_acc_str = "_avg_squared_update"

    def __init__(self, learning_rate, epsilon=1.0e-6, rho=0.95, parameter_list=None, regularization=None,
                 grad_clip=None, name=None):
        if learning_rate is None:
            raise ValueError("learning_rate is not set.")
        _check_number("AdadeltaOptimizer", epsilon=epsilon, rho=rho)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._epsilon, self._rho = float(epsilon), float(rho)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._avg_squared_grad_acc_str, p)
            self._add_accumulator(self._avg_squared_update_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        eg = self._get_accumulator(self._avg_squared_grad_acc_str, p)
        eu = self._get_accumulator(self._avg_squared_update_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "AvgSquaredGrad": eg, "AvgSquaredUpdate": eu},
                               outputs={"ParamOut": p, "AvgSquaredGradOut": eg, "AvgSquaredUpdateOut": eu},
                               attrs={"epsilon": self._epsilon, "rho": self._rho})


class AdamaxOptimizer(Optimizer):
    """Adamax (op adamax, accumulators moment, inf_norm and beta1_pow_acc [1] starting at beta1); after the
    updates one scale op per parameter multiplies beta1_pow_acc by beta1, as Fluid's _finish_update."""

    type = "adamax"
    _moment_acc_str = "moment"
    _inf_norm_acc_str = "inf_norm"
    _beta1_pow_acc_str = "beta1_pow_acc"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        _check_number("AdamaxOptimizer", beta1=beta1, beta2=beta2, epsilon=epsilon)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p)
            self._add_accumulator(self._inf_norm_acc_str, p)
            self._add_accumulator(self._beta1_pow_acc_str, p, fill_value=self._beta1, shape=[1])

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        u = self._get_accumulator(self._inf_norm_acc_str, p)
        b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                                       "Moment": m, "InfNorm": u, "Beta1Pow": b1p},
                               outputs={"ParamOut": p, "MomentOut": m, "InfNormOut": u},
                               attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon})

    def _finish_update(self, block, parameters_and_grads):
        for p, g in parameters_and_grads:
            if g is None or not p.trainable:
                continue
            with framework.name_scope("adamx"):
                b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
                block.append_op(type="scale", inputs={"X": b1p}, outputs={"Out": b1p}, attrs={"scale": self._beta1})


class RMSPropOptimizer(Optimizer):
    """RMSProp (op rmsprop, accumulators momentum, mean_square and mean_grad); rho is the op's `decay`.
    ms = rho ms + (1-rho) g^2; centered: mg = rho mg + (1-rho) g, mom = momentum mom + lr g / sqrt(ms - mg^2 +
    epsilon); else mom = momentum mom + lr g / sqrt(ms + epsilon); p -= mom."""

    type = "rmsprop"
    _momentum_acc_str = "momentum"
    _mean_square_acc_str = "mean_square"
    _mean_grad_acc_str = "mean_grad"

    def __init__(self, learning_rate, rho=0.95, epsilon=1.0e-6, momentum=0.0, centered=False, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        if learning_rate is None:
            raise ValueError("learning_rate is not set.")
        _check_number("RMSPropOptimizer", rho=rho, epsilon=epsilon, momentum=momentum)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._rho, self._epsilon, self._momentum = float(rho), float(epsilon), float(momentum)
        self._centered = bool(centered)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._momentum_acc_str, p)
            self._add_accumulator(self._mean_square_acc_str, p)
            self._add_accumulator(self._mean_grad_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        mom = self._get_accumulator(self._momentum_acc_str, p)
        ms = self._get_accumulator(self._mean_square_acc_str, p)
        mg = self._get_accumulator(self._mean_grad_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "Moment": mom, "MeanSquare": ms, "MeanGrad": mg,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg},
                               attrs={"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
                                      "centered": self._centered})


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (op ftrl, accumulators squared and linear). Fluid 1.8's class passes l1 as the op's l2
    attribute (a bug fixed in Paddle 2.0); fluidlite passes l2, so with l2 != l1 the results differ from 1.8's."""

    type = "ftrl"
    _squared_acc_str = "squared"
    _linear_acc_str = "linear"

    def __init__(self, learning_rate, l1=0.0, l2=0.0, lr_power=-0.5, parameter_list=None, regularization=None,
                 grad_clip=None, name=None):
        if learning_rate is None:
            raise ValueError("learning_rate is not set.")
        _check_number("FtrlOptimizer", l1=l1, l2=l2, lr_power=lr_power)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._l1, self._l2, self._lr_power = float(l1), float(l2), float(lr_power)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._squared_acc_str, p)
            self._add_accumulator(self._linear_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        sq = self._get_accumulator(self._squared_acc_str, p)
        lin = self._get_accumulator(self._linear_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "SquaredAccumulator": sq, "LinearAccumulator": lin,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "SquaredAccumOut": sq, "LinearAccumOut": lin},
                               attrs={"l1": self._l1, "l2": self._l2, "lr_power": self._lr_power})


class LambOptimizer(AdamOptimizer):
    """LAMB (op lamb) with Adam's accumulators (moment1, moment2, beta1_pow_acc, beta2_pow_acc); an
    AdamOptimizer subclass, as in Fluid 1.8. As in Fluid 1.8 the beta powers are created but neither read nor
    advanced (no bias correction). A parameter for which exclude_from_weight_decay_fn(param) is true gets
    weight_decay 0."""

    type = "lamb"
    _moment1_acc_str = "moment1"
    _moment2_acc_str = "moment2"
    _beta1_pow_acc_str = "beta1_pow_acc"
    _beta2_pow_acc_str = "beta2_pow_acc"

    def __init__(self, learning_rate=0.001, lamb_weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 parameter_list=None, regularization=None, grad_clip=None, exclude_from_weight_decay_fn=None,
                 name=None):
        _check_number("LambOptimizer", lamb_weight_decay=lamb_weight_decay, beta1=beta1, beta2=beta2,
                      epsilon=epsilon)
        if exclude_from_weight_decay_fn is not None and not callable(exclude_from_weight_decay_fn):
            raise TypeError("LambOptimizer: exclude_from_weight_decay_fn must be a function of the parameter, got %s"
                            % type(exclude_from_weight_decay_fn).__name__)
        Optimizer.__init__(self, learning_rate, regularization, name, grad_clip, parameter_list)
        self._weight_decay = float(lamb_weight_decay)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        self._lazy_mode = False
        self._exclude_from_weight_decay_fn = exclude_from_weight_decay_fn

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment1_acc_str, p)
            self._add_accumulator(self._moment2_acc_str, p)
            self._add_accumulator(self._beta1_pow_acc_str, p, fill_value=self._beta1, shape=[1])
            self._add_accumulator(self._beta2_pow_acc_str, p, fill_value=self._beta2, shape=[1])

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        fn = self._exclude_from_weight_decay_fn
        weight_decay = 0.0 if fn is not None and fn(p) else self._weight_decay
        m1, m2 = self._get_accumulator(self._moment1_acc_str, p), self._get_accumulator(self._moment2_acc_str, p)
        b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
        b2p = self._get_accumulator(self._beta2_pow_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                                       "Moment1": m1, "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p},
                               outputs={"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2},
                               attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                                      "weight_decay": weight_decay})

    def _finish_update(self, block, parameters_and_grads):
        """Nothing: Fluid 1.8's Lamb leaves the beta powers as they are."""


class LarsMomentumOptimizer(Optimizer):
    """LARS momentum (op lars_momentum, accumulator velocity)."""

    type = "lars_momentum"
    _velocity_acc_str = "velocity"

    def __init__(self, learning_rate, momentum, lars_coeff=0.001, lars_weight_decay=0.0005, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        _check_number("LarsMomentumOptimizer", momentum=momentum, lars_coeff=lars_coeff,
                      lars_weight_decay=lars_weight_decay)
        super().__init__(learning_rate, regularization, name, grad_clip, parameter_list)
        self._momentum = float(momentum)
        self._lars_coeff, self._lars_weight_decay = float(lars_coeff), float(lars_weight_decay)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._velocity_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        v = self._get_accumulator(self._velocity_acc_str, p)
        return block.append_op(type=self.type,
                               inputs={"Param": p, "Grad": g, "Velocity": v,
                                       "LearningRate": self._create_param_lr(param_and_grad)},
                               outputs={"ParamOut": p, "VelocityOut": v},
                               attrs={"mu": self._momentum, "lars_coeff": self._lars_coeff,
                                      "lars_weight_decay": self._lars_weight_decay})


DecayedAdagrad = DecayedAdagradOptimizer
Adadelta = AdadeltaOptimizer
Adamax = AdamaxOptimizer
RMSProp = RMSPropOptimizer
Ftrl = FtrlOptimizer
Lamb = LambOptimizer
LarsMomentum = LarsMomentumOptimizer


# ---------------------------------------------------------------- parameter averages


def _averaged_params(program):
    """The parameters of `program` that take part in averaging: do_model_average is not False (Fluid's test;
    ParamAttr's default is True)."""
    return [p for p in program.global_block().all_parameters() if p.do_model_average is not False]


def _mirror(block, var, persistable=None):
    """A variable of `block` with `var`'s name, shape and dtype (Fluid's Block._clone_variable)."""
    if block.has_var(var.name):
        return block.var(var.name)
    return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                            persistable=var.persistable if persistable is None else persistable)


class ModelAverage(Optimizer):
    """Fluid's ModelAverage: built on the default main program when constructed (after minimize), it appends one
    average_accumulates op per averaged parameter (accumulators sum_1, sum_2, sum_3 and the int64 [1] counters
    num_accumulates, old_num_accumulates, num_updates). ``apply(executor, need_restore=True)`` (a context
    manager) backs the parameters up and sets each to (sum_1 + sum_2 + sum_3) / (num_accumulates +
    old_num_accumulates); ``restore(executor)`` puts the backup back. The backups are persistable variables
    ``<param>.tmp_N`` of the apply/restore programs, so they survive between the two runs. `regularization` is
    accepted for Fluid's signature and unused (ModelAverage computes no gradients), as in Fluid."""

    def __init__(self, average_window_rate, min_average_window=10000, max_average_window=10000,
                 regularization=None, name=None):
        _check_number("ModelAverage", average_window_rate=average_window_rate)
        for k, v in (("min_average_window", min_average_window), ("max_average_window", max_average_window)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError("ModelAverage: %s must be a positive int, got %r" % (k, v))
        if min_average_window > max_average_window:
            raise ValueError("ModelAverage: min_average_window (%d) must not be larger than max_average_window (%d)"
                             % (min_average_window, max_average_window))
        super().__init__(0.0, regularization=regularization, name=name)
        self.average_window = float(average_window_rate)
        self.min_average_window = int(min_average_window)
        self.max_average_window = int(max_average_window)
        main = default_main_program()
        self.params_grads = []
        for param in _averaged_params(main):  # (param, the name of its backup), Fluid's (param, "grad") pairs
            self.params_grads.append((param, unique_name.generate(param.name + ".tmp")))
        for param, _ in self.params_grads:
            with main._optimized_guard([param]), framework.name_scope("move_average"):
                self._append_average_accumulate_op(param)
        self.apply_program, self.restore_program = Program(), Program()
        with program_guard(self.apply_program):
            block = self.apply_program.global_block()
            for param, backup in self.params_grads:
                self._add_average_apply_op(block, param, backup)
        with program_guard(self.restore_program):
            block = self.restore_program.global_block()
            for param, backup in self.params_grads:
                block_param = _mirror(block, param)
                src = block.create_var(name=backup, shape=param.shape, dtype=param.dtype, persistable=True)
                _assign(src, block_param)

    def _append_average_accumulate_op(self, param):
        self.helper = LayerHelper("average_accumulate")
        accs = {k: self._add_accumulator(k, param) for k in ("sum_1", "sum_2", "sum_3")}
        for k in ("num_accumulates", "old_num_accumulates", "num_updates"):
            accs[k] = self._add_accumulator(k, param, dtype="int64", shape=[1])
        param.block.program.global_block().append_op(
            type="average_accumulates",
            inputs=dict({"param": param}, **{"in_" + k: v for k, v in accs.items()}),
            outputs={"out_" + k: v for k, v in accs.items()},
            attrs={"average_window": self.average_window, "min_average_window": self.min_average_window,
                   "max_average_window": self.max_average_window})

    def _add_average_apply_op(self, block, param, backup_name):
        from . import layers
        p = _mirror(block, param)
        backup = block.create_var(name=backup_name, shape=param.shape, dtype=param.dtype, persistable=True)
        acc = {k: _mirror(block, self._get_accumulator(k, param)) for k in
               ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates")}
        _assign(p, backup)
        count = layers.elementwise_add(layers.cast(acc["num_accumulates"], param.dtype),
                                       layers.cast(acc["old_num_accumulates"], param.dtype))
        total = layers.sums([acc["sum_1"], acc["sum_2"], acc["sum_3"]])
        _assign(layers.elementwise_div(total, count), p)

    def _append_optimize_op(self, block, param_and_grad):
        raise NotImplementedError("ModelAverage builds its ops when constructed; it has no minimize")

    def minimize(self, *args, **kwargs):
        raise NotImplementedError("ModelAverage is not a training optimizer: construct it after the real "
                                  "optimizer's minimize, then use apply()/restore()")

    @contextlib.contextmanager
    def apply(self, executor, need_restore=True):
        """Swap the averages in (runs apply_program); on leaving the block, restore (unless need_restore is
        False: then call restore(executor) yourself)."""
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor):
        executor.run(self.restore_program)


def _assign(src, dst):
    from .layers import tensor
    return tensor.assign(src, dst)


class ExponentialMovingAverage:
    """Fluid's ExponentialMovingAverage(decay=0.999, thres_steps=None, name=None).

    Construct it on the training program (after minimize) and call ``update()``: each step then advances the
    int64 counter ``@EMA_STEP_COUNTER@`` and sets ema = decay * ema + (1 - decay) * param for every parameter whose
    do_model_average is not False (persistable ``<name><param>_ema_N``, zeros at start). The decay is the float32
    global ``scheduled_ema_decay_rate``; with ``thres_steps`` (a Variable, e.g. the global step) it is recomputed
    each step as min(decay, (thres_steps + 1) / (thres_steps + 10)), in float32 (Fluid 1.8 divides in the
    counter's int64, which makes it 0 for an integer counter). ``apply(executor, need_restore=True)`` backs the
    parameters up and sets each to ema / (1 - decay^t) (Fluid's bias correction; ema itself when t = 0);
    ``restore(executor)`` puts the backups back. Unlike Fluid 1.8, apply does not overwrite the ema variables
    with the corrected values, so applying twice gives the same parameters and training after apply continues
    from the uncorrected averages."""

    def __init__(self, decay=0.999, thres_steps=None, name=None):
        _check_number("ExponentialMovingAverage", decay=decay)
        if thres_steps is not None and not isinstance(thres_steps, Variable):
            raise TypeError("ExponentialMovingAverage: thres_steps must be a Variable or None, got %s"
                            % type(thres_steps).__name__)
        self._decay = float(decay)
        self._thres_steps = thres_steps
        self._name = name if name is not None else ""
        self._step_counter_name = "@EMA_STEP_COUNTER@"
        self._decay_var = self._get_ema_decay()
        main = default_main_program()
        self._params_tmps = [(p, unique_name.generate(self._name + p.name + ".ema_tmp")) for p in
                             _averaged_params(main)]
        self._ema_vars = {}
        from .layers import tensor
        for param, _ in self._params_tmps:
            with main._optimized_guard([param]), framework.name_scope("moving_average"):
                self._ema_vars[param.name] = tensor.create_global_var(
                    name=unique_name.generate(self._name + param.name + "_ema"), shape=param.shape, value=0.0,
                    dtype=param.dtype, persistable=True)
        self.apply_program, self.restore_program = Program(), Program()
        with program_guard(self.apply_program):
            self._build_apply(self.apply_program.global_block())
        with program_guard(self.restore_program):
            block = self.restore_program.global_block()
            for param, tmp_name in self._params_tmps:
                tmp = block.create_var(name=tmp_name, shape=param.shape, dtype=param.dtype, persistable=True)
                _assign(tmp, _mirror(block, param))

    def _get_ema_decay(self):
        from . import layers
        main = default_main_program()
        with main._lr_schedule_guard():
            decay_var = layers.create_global_var(shape=[1], value=self._decay, dtype="float32", persistable=True,
                                                 name="scheduled_ema_decay_rate")
            if self._thres_steps is not None:
                t = self._thres_steps
                if t.dtype != decay_var.dtype:
                    t = layers.cast(t, "float32")
                ratio = layers.elementwise_div(layers.scale(t, bias=1.0), layers.scale(t, bias=10.0))
                decay = layers.fill_constant(shape=[1], dtype="float32", value=self._decay)
                _assign(layers.elementwise_min(ratio, decay), decay_var)
        return decay_var

    def _build_apply(self, block):
        from . import layers
        counter = block.create_var(name=self._step_counter_name, shape=[1], dtype="int64", persistable=True)
        decay = _mirror(block, self._decay_var)
        t = layers.cast(counter, "float32")
        decay_pow = self._decay_pow(block, decay, t)
        # 1 - decay^t, or 1 before the first update (t = 0), when Fluid's Switch leaves ema as it is
        first = layers.cast(layers.less_equal(t, layers.fill_constant(shape=[1], dtype="float32", value=0.0)),
                            "float32")
        denom = layers.elementwise_add(layers.scale(decay_pow, scale=-1.0, bias=1.0), first)
        for param, tmp_name in self._params_tmps:
            p = _mirror(block, param)
            tmp = block.create_var(name=tmp_name, shape=param.shape, dtype=param.dtype, persistable=True)
            ema = _mirror(block, self._ema_vars[param.name])
            _assign(p, tmp)
            d = denom if param.dtype == denom.dtype else layers.cast(denom, param.dtype)
            _assign(layers.elementwise_div(ema, d), p)

    @staticmethod
    def _decay_pow(block, decay, t):
        """decay^t: Fluid's elementwise_pow where the build has it, else exp(t * log(decay)) (decay > 0)."""
        from . import core, layers
        if not core.has_op("elementwise_pow"):
            return layers.exp(layers.elementwise_mul(t, layers.log(decay)))
        out = block.create_var(name=unique_name.generate("ema_decay_pow"), shape=[1], dtype=decay.dtype)
        block.append_op(type="elementwise_pow", inputs={"X": decay, "Y": t}, outputs={"Out": out},
                        attrs={"axis": -1})
        return out

    def update(self):
        """Append the EMA update (and the step counter) to the default main program; call it after minimize."""
        from . import layers
        from .layers.learning_rate_scheduler import autoincreased_step_counter
        autoincreased_step_counter(counter_name=self._step_counter_name)
        main = default_main_program()
        for param, _ in self._params_tmps:
            with main._optimized_guard([param]), framework.name_scope("moving_average"):
                ema = self._ema_vars[param.name]
                d = self._decay_var if param.dtype == self._decay_var.dtype else layers.cast(self._decay_var,
                                                                                              param.dtype)
                one_minus = layers.scale(d, scale=-1.0, bias=1.0)
                ema_t = layers.elementwise_add(layers.elementwise_mul(ema, d), layers.elementwise_mul(param,
                                                                                                      one_minus))
                _assign(ema_t, ema)

    @contextlib.contextmanager
    def apply(self, executor, need_restore=True):
        """Swap the bias-corrected averages in; restore on leaving the block unless need_restore is False."""
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor):
        executor.run(self.restore_program)
