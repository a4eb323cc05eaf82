"""Variable arithmetic (``a + b``, ``2 * x``): Python scalars become fill_constant or scale ops."""
from .. import unique_name
from ..framework import Variable


def _scalar_var(block, value, ref):
    from .tensor import fill_constant
    return fill_constant(shape=[1], dtype=ref.dtype, value=float(value))


def binary(x, other, op_type, reverse=False):
    from .nn import scale
    if not isinstance(other, Variable):
        value = float(other)
        if op_type == "elementwise_add":
            return scale(x, scale=1.0, bias=value)
        if op_type == "elementwise_sub" and not reverse:
            return scale(x, scale=1.0, bias=-value)
        if op_type == "elementwise_sub" and reverse:
            return scale(x, scale=-1.0, bias=value)
        if op_type == "elementwise_mul":
            return scale(x, scale=value)
        if op_type == "elementwise_div" and not reverse:
            return scale(x, scale=1.0 / value)
        other = _scalar_var(x.block, value, x)
    a, b = (other, x) if reverse else (x, other)
    block = x.block.program.current_block()
    out = block.create_var(name=unique_name.generate_with_ignorable_key("tmp"), dtype=x.dtype)
    block.append_op(type=op_type, inputs={"X": [a], "Y": [b]}, outputs={"Out": [out]}, attrs={"axis": -1})
    return out
