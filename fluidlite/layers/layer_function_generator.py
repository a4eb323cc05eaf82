"""Layers generated from the C++ op registration (Fluid's layer_function_generator): for a simple op, the
layer's signature, defaults and docstring come from ``core.op_proto``, so they are written down once.

    relu = generate_layer_fn("relu")                      # relu(x, name=None)
    scale = generate_layer_fn("scale", act=True)          # scale(x, scale=1.0, bias=0.0, bias_after_scale=True,
                                                          #       act=None, name=None)
"""
import inspect

import numpy as np

from .. import core
from ..framework import Variable
from ..layer_helper import LayerHelper

__all__ = ["generate_layer_fn"]

_P = inspect.Parameter


def _python_default(attr):
    """The registered default as a Python value; FLOAT attrs print as their shortest float32 form (0.02)."""
    v = attr["default"]
    if attr["type"] == "FLOAT":
        return float(str(np.float32(v)))
    if attr["type"] == "FLOATS":
        return [float(str(np.float32(x))) for x in v]
    return v


def _doc(proto, inputs, attrs, extra):
    lines = [proto["doc"].strip(), "", "Args:"]
    for arg, slot in inputs:
        lines.append("    %s (Variable): %s" % (arg, slot["doc"]))
    for a in attrs:
        default = "required" if a["required"] else "default %r" % _python_default(a)
        lines.append("    %s (%s, %s): %s" % (a["name"], a["type"].lower(), default, a["doc"]))
    for name, _, doc in extra:
        lines.append("    %s: %s" % (name, doc))
    lines += ["", "Returns:", "    Variable: %s" % proto["outputs"][0]["doc"]]
    return "\n".join(lines)


def generate_layer_fn(op_type, inputs=None, attrs=None, act=False, extra=(), prepare=None, stop_gradient=False,
                      out_arg=None, order=None):
    """A layer function that appends one `op_type` op and returns its first output.

    inputs: argument names for the op's input slots, in slot order (default: the slot names lower-cased).
    attrs: the attributes offered as keyword arguments (default: all of them), with their registered
    defaults; a required attribute is a required argument. act: add Fluid's ``act`` argument. extra:
    (name, default, doc) for further arguments, which `prepare(args) -> {attr: value}` turns into
    attributes. out_arg: an argument that may pass the output Variable (compare ops' ``cond``). order: the
    names of the arguments after the inputs, when Fluid's order differs from attributes-then-extras."""
    proto = core.op_proto(op_type)
    slots = proto["inputs"]
    names = list(inputs) if inputs is not None else [s["name"].lower() for s in slots]
    if len(names) != len(slots):
        raise ValueError("%s: %d argument names for %d input slots" % (op_type, len(names), len(slots)))
    offered = [a for a in proto["attrs"] if attrs is None or a["name"] in attrs]
    extra = list(extra) + ([("act", None, "activation applied to the output (a type name or dict)")] if act else [])
    if out_arg:
        extra.append((out_arg, None, "the Variable to write the output into (a new one if None)"))
    extra.append(("name", None, "name prefix of the output variable"))
    required = [a for a in offered if a["required"]]
    optional = [a for a in offered if not a["required"]]
    params = [_P(n, _P.POSITIONAL_OR_KEYWORD) for n in names]
    params += [_P(a["name"], _P.POSITIONAL_OR_KEYWORD) for a in required]
    params += [_P(a["name"], _P.POSITIONAL_OR_KEYWORD, default=_python_default(a)) for a in optional]
    params += [_P(n, _P.POSITIONAL_OR_KEYWORD, default=d) for n, d, _ in extra]
    if order is not None:
        by_name = {p.name: p for p in params[len(names):]}
        if sorted(order) != sorted(by_name):
            raise ValueError("%s: order %s does not name the arguments %s" % (op_type, order, sorted(by_name)))
        params = params[:len(names)] + [by_name[n] for n in order]
    signature = inspect.Signature(params)

    def layer(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("%s%s: %s" % (op_type, signature, e)) from None
        bound.apply_defaults()
        a = bound.arguments
        for n in names:
            if not isinstance(a[n], Variable):
                raise TypeError("%s: '%s' must be a Variable, got %s" % (op_type, n, type(a[n]).__name__))
        op_attrs = {at["name"]: a[at["name"]] for at in offered}
        if prepare is not None:
            op_attrs.update(prepare(a))
        helper = LayerHelper(op_type, name=a["name"], act=a.get("act"))
        out = a.get(out_arg) if out_arg else None
        if out is None:
            out = helper.create_variable_for_type_inference(dtype=a[names[0]].dtype, stop_gradient=stop_gradient)
        helper.append_op(type=op_type, inputs={s["name"]: [a[n]] for s, n in zip(slots, names)},
                         outputs={proto["outputs"][0]["name"]: [out]}, attrs=op_attrs)
        if stop_gradient:
            out.stop_gradient = True
        return helper.append_activation(out)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__signature__ = signature
    layer.__doc__ = _doc(proto, [(n, s) for n, s in zip(names, slots)], required + optional, extra)
    return layer
