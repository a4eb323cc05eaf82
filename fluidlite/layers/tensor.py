"""Tensor-creation and plumbing layers: fill_constant, assign, cast, concat, sums, increment, ..."""
import numpy as np

from .. import unique_name
from ..framework import Variable, convert_np_dtype_to_dtype_, default_main_program
from ..initializer import Constant
from ..layer_helper import LayerHelper

__all__ = ["fill_constant", "assign", "cast", "concat", "sums", "increment", "zeros", "ones", "create_tensor",
           "create_global_var", "create_parameter", "fill_zeros_like", "uniform_random", "gaussian_random",
           "zeros_like"]


def create_tensor(dtype, name=None, persistable=False):
    helper = LayerHelper("create_tensor", name=name)
    return helper.create_variable(name=helper.name, dtype=dtype, persistable=persistable)


def create_parameter(shape, dtype, name=None, attr=None, is_bias=False, default_initializer=None):
    helper = LayerHelper("create_parameter", name=name)
    if attr is None:
        from ..param_attr import ParamAttr
        attr = ParamAttr(name=name)
    return helper.create_parameter(attr, shape, dtype, is_bias, default_initializer)


def create_global_var(shape, value, dtype, persistable=False, force_cpu=False, name=None):
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(dtype=dtype, shape=shape, persistable=persistable,
                                        name=name or unique_name.generate("global_var"), stop_gradient=True)
    helper.set_variable_initializer(var, initializer=Constant(value=float(value), force_cpu=force_cpu))
    return var


def fill_constant(shape, dtype, value, force_cpu=False, out=None):
    helper = LayerHelper("fill_constant")
    dtype = convert_np_dtype_to_dtype_(dtype)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=dtype)
    attrs = {"shape": [int(s) for s in shape], "dtype": int(dtype), "value": float(value), "force_cpu": force_cpu}
    if dtype.name in ("INT64", "INT32"):
        attrs["str_value"] = str(int(value))
    helper.append_op(type="fill_constant", outputs={"Out": [out]}, attrs=attrs)
    out.stop_gradient = True
    return out


def zeros(shape, dtype, force_cpu=False):
    return fill_constant(shape, dtype, 0.0, force_cpu)


def ones(shape, dtype, force_cpu=False):
    return fill_constant(shape, dtype, 1.0, force_cpu)


def assign(input, output=None):
    """Copy a Variable (assign op) or a numpy array (assign_value op) into `output`."""
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        if output is None:
            output = helper.create_variable_for_type_inference(dtype=input.dtype)
        helper.append_op(type="assign", inputs={"X": [input]}, outputs={"Out": [output]})
        return output
    value = np.asarray(input)
    dtype = convert_np_dtype_to_dtype_(value.dtype)
    if output is None:
        output = helper.create_variable_for_type_inference(dtype=dtype)
    keys = {"FP32": ("fp32_values", np.float32), "FP64": ("fp32_values", np.float32),
            "INT32": ("int32_values", np.int32), "INT64": ("int64_values", np.int64), "BOOL": ("bool_values", bool)}
    if dtype.name not in keys:
        raise TypeError("assign: numpy dtype %s is not supported" % value.dtype)
    key, np_t = keys[dtype.name]
    helper.append_op(type="assign_value", outputs={"Out": [output]},
                     attrs={"dtype": int(dtype), "shape": list(value.shape), key: value.astype(np_t).ravel().tolist()})
    return output


def cast(x, dtype):
    helper = LayerHelper("cast")
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="cast", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"in_dtype": int(x.dtype), "out_dtype": int(dtype)})
    return out


def concat(input, axis=0, name=None):
    helper = LayerHelper("concat", name=name, input=input)
    inputs = helper.multiple_input()
    out = helper.create_variable_for_type_inference(dtype=helper.input_dtype())
    helper.append_op(type="concat", inputs={"X": inputs}, outputs={"Out": [out]}, attrs={"axis": axis})
    return out


def sums(input, out=None):
    """The n-ary `sum` op: out = input[0] + input[1] + ... in one pass."""
    helper = LayerHelper("sum", input=input)
    inputs = helper.multiple_input()
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=helper.input_dtype())
    helper.append_op(type="sum", inputs={"X": inputs}, outputs={"Out": out})
    return out


def increment(x, value=1.0, in_place=True):
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="increment", inputs={"X": [x]}, outputs={"Out": [out]}, attrs={"step": float(value)})
    return out


def fill_zeros_like(x):
    helper = LayerHelper("fill_zeros_like")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_zeros_like", inputs={"X": [x]}, outputs={"Out": [out]})
    return out


zeros_like = fill_zeros_like


def uniform_random(shape, dtype="float32", min=-1.0, max=1.0, seed=0):
    helper = LayerHelper("uniform_random")
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="uniform_random", outputs={"Out": out},
                     attrs={"shape": [int(s) for s in shape], "dtype": int(dtype), "min": float(min),
                            "max": float(max), "seed": seed})
    return out


def gaussian_random(shape, mean=0.0, std=1.0, seed=0, dtype="float32"):
    helper = LayerHelper("gaussian_random")
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="gaussian_random", outputs={"Out": out},
                     attrs={"shape": [int(s) for s in shape], "dtype": int(dtype), "mean": float(mean),
                            "std": float(std), "seed": seed})
    return out


del default_main_program


# ------------------------------------------------------------------ whole-tensor predicates (one bool, shape [1])

__all__ += ["isfinite", "has_inf", "has_nan"]


def _predicate(op_type, layer, x):
    if not isinstance(x, Variable):
        raise TypeError("%s: 'x' must be a Variable, got %s" % (layer, type(x).__name__))
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def isfinite(x):
    """A bool Variable of shape [1]: True if every element of x is finite (no inf, no NaN)."""
    return _predicate("isfinite", "isfinite", x)


def has_inf(x):
    """A bool Variable of shape [1]: True if some element of x is +inf or -inf (op isinf)."""
    return _predicate("isinf", "has_inf", x)


def has_nan(x):
    """A bool Variable of shape [1]: True if some element of x is NaN (op isnan)."""
    return _predicate("isnan", "has_nan", x)
