"""Tensor-creation and plumbing layers: fill_constant, assign, cast, concat, sums, increment, ..."""
import numpy as np

from .. import unique_name
from ..framework import Variable, VarType, convert_np_dtype_to_dtype_, default_main_program
from ..initializer import Constant
from ..layer_helper import LayerHelper
from .checks import check_dtype, check_variable

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




# ------------------------------------------------------------------ index and creation layers (Fluid 1.8 tensor.py)

__all__ += ["ones_like", "full_like", "argmax", "argmin", "argsort", "range", "linspace",
            "fill_constant_batch_size_like"]


def zeros_like(x, out=None):
    """Zeros with ``x``'s shape and dtype (op fill_zeros_like), into ``out`` if given."""
    check_variable("zeros_like", "x", x)
    helper = LayerHelper("zeros_like")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_zeros_like", inputs={"X": [x]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def ones_like(x, out=None):
    """Ones with ``x``'s shape and dtype (op fill_any_like, value 1), into ``out`` if given."""
    check_variable("ones_like", "x", x)
    helper = LayerHelper("ones_like")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_any_like", inputs={"X": [x]}, outputs={"Out": [out]}, attrs={"value": 1.0})
    out.stop_gradient = True
    return out


def full_like(input, fill_value, out=None, dtype=None, device=None, stop_gradient=True, name=None):
    """``fill_value`` with ``input``'s shape, in ``dtype`` (default: input's), via op fill_any_like; into ``out``
    if given. ``device`` is accepted and ignored (the value is computed where the program runs)."""
    check_variable("full_like", "input", input)
    dtype = input.dtype if dtype is None else convert_np_dtype_to_dtype_(dtype)
    helper = LayerHelper("full_like", name=name)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="fill_any_like", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"value": float(fill_value), "dtype": int(dtype)})
    out.stop_gradient = bool(stop_gradient)
    return out


def _arg_min_max(op_type, layer, x, axis):
    check_variable(layer, "x", x)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(VarType.INT64)
    helper.append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]}, attrs={"axis": int(axis)})
    out.stop_gradient = True
    return out


def argmax(x, axis=0):
    """The int64 index of the largest entry of ``x`` along ``axis`` (that axis removed; the first on ties)."""
    return _arg_min_max("arg_max", "argmax", x, axis)


def argmin(x, axis=0):
    """The int64 index of the smallest entry of ``x`` along ``axis`` (that axis removed; the first on ties)."""
    return _arg_min_max("arg_min", "argmin", x, axis)


def argsort(input, axis=-1, descending=False, name=None):
    """(out, ids): ``input`` sorted along ``axis`` (a stable sort; NaN as the largest) and the int64 positions
    its entries came from. The gradient flows to ``input`` through ``out``."""
    check_variable("argsort", "input", input)
    helper = LayerHelper("argsort", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    ids = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    helper.append_op(type="argsort", inputs={"X": [input]}, outputs={"Out": [out], "Indices": [ids]},
                     attrs={"axis": int(axis), "descending": bool(descending)})
    return out, ids


def _scalar_input(layer, arg, v, dtype):
    """A number as a [1] fill_constant of `dtype`; a Variable cast to `dtype` when it differs."""
    if isinstance(v, Variable):
        return v if v.dtype == dtype else cast(v, dtype)
    if not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError("%s: %s must be a number or a Variable, got %s" % (layer, arg, type(v).__name__))
    return fill_constant([1], dtype, v)


def range(start, end, step, dtype):
    """``[start, start + step, ...)`` up to ``end`` excluded (numpy's arange), each of start, end and step a
    number or a 1-element Variable; ``dtype`` float32, float64, int32 or int64."""
    dtype = convert_np_dtype_to_dtype_(dtype)
    if dtype not in (VarType.FP32, VarType.FP64, VarType.INT32, VarType.INT64):
        raise TypeError("range: dtype must be float32, float64, int32 or int64, got %s" % dtype)
    start, end, step = (_scalar_input("range", a, v, dtype) for a, v in (("start", start), ("end", end),
                                                                        ("step", step)))
    helper = LayerHelper("range")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="range", inputs={"Start": [start], "End": [end], "Step": [step]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def linspace(start, stop, num, dtype):
    """``num`` evenly spaced values from ``start`` to ``stop``, both included; start/stop numbers or 1-element
    Variables, ``num`` an int or a 1-element int32 Variable; ``dtype`` float32 or float64."""
    dtype = convert_np_dtype_to_dtype_(dtype)
    if dtype not in (VarType.FP32, VarType.FP64):
        raise TypeError("linspace: dtype must be float32 or float64, got %s" % dtype)
    start = _scalar_input("linspace", "start", start, dtype)
    stop = _scalar_input("linspace", "stop", stop, dtype)
    if isinstance(num, Variable):
        if num.dtype not in (VarType.INT32, VarType.INT64):
            raise TypeError("linspace: num %s must be int32 or int64, got %s" % (num.name, num.dtype))
    elif isinstance(num, (int, np.integer)):
        if num < 1:
            raise ValueError("linspace: num must be >= 1, got %d" % num)
        num = fill_constant([1], "int32", int(num))
    else:
        raise TypeError("linspace: num must be an int or a Variable, got %s" % type(num).__name__)
    helper = LayerHelper("linspace")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="linspace", inputs={"Start": [start], "Stop": [stop], "Num": [num]},
                     outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def fill_constant_batch_size_like(input, shape, dtype, value, input_dim_idx=0, output_dim_idx=0, force_cpu=False):
    """A ``shape`` tensor of ``value`` whose dim ``output_dim_idx`` is ``input``'s dim ``input_dim_idx`` at run
    time (the batch size of a feed)."""
    check_variable("fill_constant_batch_size_like", "input", input)
    dtype = convert_np_dtype_to_dtype_(dtype)
    helper = LayerHelper("fill_constant_batch_size_like")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="fill_constant_batch_size_like", inputs={"Input": [input]}, outputs={"Out": [out]},
                     attrs={"shape": [int(s) for s in shape], "dtype": int(dtype), "value": float(value),
                            "input_dim_idx": int(input_dim_idx), "output_dim_idx": int(output_dim_idx),
                            "force_cpu": bool(force_cpu)})
    out.stop_gradient = True
    return out


__all__ += ["reverse"]


def reverse(x, axis):
    """``x`` with the order of its elements reversed along ``axis`` (an int, or a list/tuple of ints in
    [-rank, rank)); same shape and dtype (float32, float64, int32, int64, uint8 or bool)."""
    check_dtype("reverse", "x", x, ("float32", "float64", "int32", "int64", "uint8", "bool"))
    if isinstance(axis, int):
        axis = [axis]
    if not isinstance(axis, (list, tuple)) or not all(isinstance(a, int) for a in axis):
        raise TypeError("reverse: 'axis' must be an int or a list/tuple of ints, got %r" % (axis,))
    helper = LayerHelper("reverse")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="reverse", inputs={"X": [x]}, outputs={"Out": [out]}, attrs={"axis": list(axis)})
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
