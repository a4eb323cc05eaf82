"""The argument checks the layers share (Fluid 1.8's check_type / check_variable_and_dtype): a Variable where the
layer needs one, of a dtype the layer accepts. Each raises a TypeError naming the layer, the argument, the variable
and the expected and actual dtype, when the program is built."""
from ..framework import Variable, dtype_to_str


def check_variable(layer, arg, v):
    """TypeError unless `v` is a Variable."""
    if not isinstance(v, Variable):
        raise TypeError("%s: '%s' must be a Variable, got %s" % (layer, arg, type(v).__name__))


def check_dtype(layer, arg, v, dtypes=None):
    """TypeError unless `v` is a Variable whose dtype is one of `dtypes` (names such as "float32", or VarTypes; None:
    any dtype). Returns the dtype's name."""
    check_variable(layer, arg, v)
    name = dtype_to_str(v.dtype)
    if dtypes is not None:
        allowed = [d if isinstance(d, str) else dtype_to_str(d) for d in dtypes]
        if name not in allowed:
            raise TypeError("%s: '%s' (%s) must be %s, got %s" % (layer, arg, v.name, " or ".join(allowed), name))
    return name
