"""Single-input activation layers (``layers.relu(x)`` etc.), generated from one table."""
from ..layer_helper import LayerHelper

_UNARY = ["abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "floor", "sign"]

__all__ = list(_UNARY)


def _make_unary(op_type):
    def layer(x, name=None):
        helper = LayerHelper(op_type, name=name)
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
        helper.append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]})
        return out

    layer.__name__ = op_type
    layer.__doc__ = "Out = %s(X), elementwise." % op_type
    return layer


for _op in _UNARY:
    globals()[_op] = _make_unary(_op)
