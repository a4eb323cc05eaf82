"""Weight decay: ``regularization=fluid.regularizer.L2Decay(c)`` adds c * param to each gradient
(a ``scale`` op and an n-ary ``sum`` per parameter, as Fluid does)."""
from . import framework

__all__ = ["L2Decay", "L1Decay", "L2DecayRegularizer", "L1DecayRegularizer", "append_regularization_ops"]


class WeightDecayRegularizer:
    def __call__(self, param, grad, block):
        raise NotImplementedError


class L2DecayRegularizer(WeightDecayRegularizer):
    def __init__(self, regularization_coeff=0.0):
        self._coeff = float(regularization_coeff)

    def __call__(self, param, grad, block):
        decay = block.create_var(dtype=param.dtype, shape=param.shape)
        block.append_op(type="scale", inputs={"X": param}, outputs={"Out": decay}, attrs={"scale": self._coeff})
        return decay

    def __str__(self):
        return "L2Decay, regularization_coeff=%f" % self._coeff


class L1DecayRegularizer(WeightDecayRegularizer):
    def __init__(self, regularization_coeff=0.0):
        self._coeff = float(regularization_coeff)

    def __call__(self, param, grad, block):
        sign = block.create_var(dtype=param.dtype, shape=param.shape)
        block.append_op(type="sign", inputs={"X": param}, outputs={"Out": sign})
        decay = block.create_var(dtype=param.dtype, shape=param.shape)
        block.append_op(type="scale", inputs={"X": sign}, outputs={"Out": decay}, attrs={"scale": self._coeff})
        return decay


def append_regularization_ops(parameters_and_grads, regularization=None):
    """grad' = grad + decay(param): the parameter's own regularizer wins over the optimizer's. The ops go
    to the global block of the parameter's program, whatever the default main program is."""
    out = []
    for param, grad in parameters_and_grads:
        reg = getattr(param, "regularizer", None) or regularization
        if grad is None or reg is None:
            out.append((param, grad))
            continue
        block = param.block.program.global_block()
        with framework.program_guard(block.program), block.program._optimized_guard([param, grad]), \
                framework.name_scope("regularization"):
            decay = reg(param, grad, block)
            new_grad = block.create_var(dtype=param.dtype,
                                        shape=param.shape)
            block.append_op(type="sum", inputs={"X": [grad, decay]}, outputs={"Out": new_grad})
        out.append((param, new_grad))
    return out


L2Decay = L2DecayRegularizer
L1Decay = L1DecayRegularizer
