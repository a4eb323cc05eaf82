"""Optimizers (Fluid 1.x): each appends one update op per parameter (``sgd``, ``momentum``, ``adam``) with
its accumulators as persistable variables initialised in the startup program."""
from . import framework, unique_name
from .backward import append_backward
from .clip import append_gradient_clip_ops
from .framework import Variable, default_startup_program, program_guard
from .initializer import Constant
from .layer_helper import LayerHelper
from .regularizer import append_regularization_ops

__all__ = ["SGD", "Momentum", "Adam", "Adagrad", "SGDOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "AdagradOptimizer", "Optimizer"]


class Optimizer:
    def __init__(self, learning_rate, regularization=None, name=None, grad_clip=None):
        if not isinstance(learning_rate, (float, int, Variable)):
            raise TypeError("learning_rate must be a float or a Variable, got %s" % type(learning_rate).__name__)
        self._learning_rate = learning_rate
        self.regularization = regularization
        self._grad_clip = grad_clip
        self._name = name
        self._learning_rate_map = {}
        self._accumulators = {}
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
        per_param = self._accumulators.setdefault(name, {})
        if param.name in per_param:
            raise ValueError("accumulator %s already exists for parameter %s" % (name, param.name))
        block = param.block.program.global_block()
        var = block.create_var(name=unique_name.generate(param.name + "_" + name), persistable=True,
                               dtype=dtype or param.dtype, shape=list(shape if shape is not None else param.shape),
                               stop_gradient=True)
        LayerHelper(name).set_variable_initializer(var, Constant(float(fill_value)))
        per_param[param.name] = var
        return var

    def _get_accumulator(self, name, param):
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

    # --- the public API
    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return append_backward(loss, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        """Append clipping, regularization and update ops to the parameters' program (whatever the
        default main program is); returns the update ops."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        program = framework._program_of_params(params_grads, "apply_gradients")
        with program_guard(program):  # layers used on the way (lr scaling, clipping) build into it too
            params_grads = append_gradient_clip_ops(params_grads, self._grad_clip)
            params_grads = append_regularization_ops(params_grads, self.regularization)
            return self._create_optimization_pass(params_grads)

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
        """Append backward and update ops for `loss`; returns (optimize_ops, params_grads)."""
        if grad_clip is not None:
            self._grad_clip = grad_clip
        program = loss.block.program
        startup = startup_program or default_startup_program()
        with program_guard(program, startup):
            params_grads = self.backward(loss, startup, parameter_list, no_grad_set)
            optimize_ops = self.apply_gradients(params_grads)
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

    def __init__(self, learning_rate, momentum, use_nesterov=False, regularization=None, name=None, grad_clip=None):
        super().__init__(learning_rate, regularization, name, grad_clip)
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
                 lazy_mode=False, grad_clip=None):
        super().__init__(learning_rate, regularization, name, grad_clip)
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
                 grad_clip=None):
        super().__init__(learning_rate, regularization, name, grad_clip)
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
