"""Gradient clipping (Fluid 1.8), all as ops in the parameters' program:

- ``GradientClipByValue(max, min=None)``: each gradient clipped to [min, max] (min defaults to -max);
- ``GradientClipByNorm(clip_norm)``: each gradient g scaled by clip_norm / max(||g||, clip_norm);
- ``GradientClipByGlobalNorm(clip_norm, group_name)``: every gradient scaled by
  clip_norm / max(global_norm, clip_norm), global_norm = sqrt(sum_g sum(g^2)).

Each takes ``need_clip``, a function of the parameter that returns False for the parameters to leave alone.
Pass one as an optimizer's ``grad_clip`` (Fluid 1.8) or give it to parameters with ``set_gradient_clip``
(Fluid 1.6; deprecated in 1.8, with its warning). The optimizer's grad_clip wins: a set_gradient_clip on the
same parameters is then ignored, with Fluid's warning."""
import copy
import warnings

from . import framework

__all__ = ["GradientClipByGlobalNorm", "GradientClipByNorm", "GradientClipByValue", "set_gradient_clip",
           "append_gradient_clip_ops"]


class GradientClipBase:
    def __init__(self, need_clip=None):
        if need_clip is not None and not callable(need_clip):
            raise TypeError("The type of need_clip must be a function of the parameter that returns True (clip) or "
                            "False (leave it), got %s" % type(need_clip).__name__)
        self._need_clip_func = need_clip

    def _needs(self, param):
        return self._need_clip_func is None or bool(self._need_clip_func(param))

    def __call__(self, params_grads):
        """Clip [(param, grad)] as an optimizer's grad_clip; returns the new list."""
        if any(getattr(p, "gradient_clip_attr", None) is not None for p, _ in params_grads):
            warnings.warn("'set_gradient_clip' will be ineffective, because you have set 'grad_clip' in "
                          "'optimizer'. So, 'set_gradient_clip' is redundant and you can remove it.", stacklevel=3)
        return _clip_in_program(params_grads, lambda pgs, block: self._clip(pgs, block))

    def _clip(self, params_grads, block):
        raise NotImplementedError

    def _clip_one(self, grad, block):
        raise NotImplementedError


# Kept for code that names the 1.5 base class.
BaseGradientClipAttr = GradientClipBase


def _same_kind_var(block, g):
    """A new variable for a clipped `g`: a SelectedRows gradient stays sparse (the clip ops compute on its value,
    merged first where Fluid's kernels merge)."""
    return block.create_var(dtype=g.dtype, shape=g.shape, type=g.type)


def _merged_values(g, block):
    """g, or for a SelectedRows gradient the value of its merged rows (Fluid: merge_selected_rows, then
    get_tensor_from_selected_rows): the rows a sparse gradient repeats count once in a norm."""
    if g.type != framework.VarType.SELECTED_ROWS:
        return g
    merged = block.create_var(dtype=g.dtype, shape=g.shape, type=g.type)
    block.append_op(type="merge_selected_rows", inputs={"X": g}, outputs={"Out": merged})
    values = block.create_var(dtype=g.dtype, shape=[-1] + list(g.shape[1:]))
    block.append_op(type="get_tensor_from_selected_rows", inputs={"X": merged}, outputs={"Out": values})
    return values


def _scaled(block, g, scale):
    """g * scale (scale: one element), of g's kind."""
    out = _same_kind_var(block, g)
    block.append_op(type="elementwise_mul", inputs={"X": g, "Y": scale}, outputs={"Out": out}, attrs={"axis": -1})
    return out


class _PerGradClip(GradientClipBase):
    """A clip that treats each gradient on its own (by value, by norm)."""

    def _clip(self, params_grads, block):
        out = []
        for p, g in params_grads:
            out.append((p, g) if g is None or not self._needs(p) else (p, self._clip_one(g, block)))
        return out


class GradientClipByValue(_PerGradClip):
    def __init__(self, max, min=None, need_clip=None):
        super().__init__(need_clip)
        max = float(max)
        if min is None:
            if not max > 0.0:
                raise ValueError("GradientClipByValue: max must be positive when min is not given, got %s" % max)
            min = -max
        self.max = max
        self.min = float(min)

    def __str__(self):
        return "Gradient Clip By Value, min = %f, max=%f" % (self.min, self.max)

    def _clip_one(self, grad, block):
        out = _same_kind_var(block, grad)
        block.append_op(type="clip", inputs={"X": grad}, outputs={"Out": out}, attrs={"min": self.min, "max": self.max})
        return out


class GradientClipByNorm(_PerGradClip):
    def __init__(self, clip_norm, need_clip=None):
        super().__init__(need_clip)
        self.clip_norm = float(clip_norm)

    def __str__(self):
        return "Gradient Clip By Norm, clip_norm=%f" % self.clip_norm

    def _clip_one(self, grad, block):
        """Fluid's clip_by_norm op where this build has it; otherwise the same value composed:
        g * clip_norm / max(||g||, clip_norm) (the norm of a SelectedRows gradient's merged rows)."""
        from . import core, layers
        if core.has_op("clip_by_norm"):
            out = _same_kind_var(block, grad)
            block.append_op(type="clip_by_norm", inputs={"X": grad}, outputs={"Out": out},
                            attrs={"max_norm": self.clip_norm})
            return out
        norm = layers.sqrt(layers.reduce_sum(layers.square(_merged_values(grad, block))))
        clip = layers.fill_constant(shape=[1], dtype=norm.dtype, value=self.clip_norm)
        return _scaled(block, grad, layers.elementwise_div(clip, layers.elementwise_max(norm, clip)))


class GradientClipByGlobalNorm(GradientClipBase):
    def __init__(self, clip_norm, group_name="default_group", need_clip=None):
        super().__init__(need_clip)
        self.clip_norm = float(clip_norm)
        self.group_name = group_name

    def __str__(self):
        return "Gradient Clip By GlobalNorm, global_norm=%f" % self.clip_norm

    def _clip(self, params_grads, block):
        from . import layers
        grads = [g for p, g in params_grads if g is not None and self._needs(p)]
        if not grads:
            return params_grads
        squares = [layers.reduce_sum(layers.square(_merged_values(g, block))) for g in grads]
        global_norm = layers.sqrt(squares[0] if len(squares) == 1 else layers.sums(squares))
        clip = layers.fill_constant(shape=[1], dtype=global_norm.dtype, value=self.clip_norm)
        scale = layers.elementwise_div(clip, layers.elementwise_max(global_norm, clip))
        return [(p, g) if g is None or not self._needs(p) else (p, _scaled(block, g, scale))
                for p, g in params_grads]


def _clip_in_program(params_grads, clip_fn):
    """clip_fn(params_grads, block), its ops in the global block of the parameters' program (whatever the default
    main program is), with the Optimize role and the gradient_clip name scope."""
    program = framework._program_of_params(params_grads, "gradient clip")
    block = program.global_block()
    with framework.program_guard(program), program._optimized_guard([]), framework.name_scope("gradient_clip"):
        return clip_fn(list(params_grads), block)


def set_gradient_clip(clip, param_list=None, program=None):
    """Fluid 1.6: clip the gradients of `param_list` (Parameters or their names; default every parameter of
    `program`, default the default main program) with `clip` at the next minimize. Deprecated in Fluid 1.8
    (its warning is given); an optimizer's grad_clip takes precedence."""
    warnings.warn("Caution! 'set_gradient_clip' is not recommended and may be deprecated in future! We recommend a "
                  "new strategy: set 'grad_clip' when initializing the 'optimizer'. This method can reduce the "
                  "mistakes, please refer to documention of 'optimizer'.", stacklevel=2)
    if not isinstance(clip, GradientClipBase):
        raise TypeError("'clip' should be an instance of GradientClipBase's derived class, got %s"
                        % type(clip).__name__)
    program = program or framework.default_main_program()
    block = program.global_block()
    if any("optimizer" in (op.attr("op_namescope") or "") for op in block.ops if op.has_attr("op_namescope")):
        warnings.warn("'minimize' has been invoked before, this will make 'set_gradient_clip' be ineffective! "
                      "Please invoke 'set_gradient_clip' before 'minimize'.", stacklevel=2)
    if param_list is None:
        param_list = block.all_parameters()
    if all(isinstance(p, str) for p in param_list):
        param_list = [block.var(p) for p in param_list]
    if not all(isinstance(p, framework.Parameter) for p in param_list):
        raise TypeError("set_gradient_clip: 'param_list' should be a list of Parameter or str (parameter names)")
    for p in param_list:
        p.gradient_clip_attr = copy.deepcopy(clip)


def append_gradient_clip_ops(params_grads, clip=None):
    """Clip the gradients with `clip` when given, else each with its parameter's set_gradient_clip attribute
    (parameters without one keep their gradient). Parameters whose attributes are GradientClipByGlobalNorm
    with the same group_name share one global norm (their clip_norm must agree, as in Fluid)."""
    if clip is not None:
        return _clip_in_program(params_grads, lambda pgs, block: clip._clip(pgs, block))
    attrs = [getattr(p, "gradient_clip_attr", None) if g is not None else None for p, g in params_grads]
    if all(a is None for a in attrs):
        return list(params_grads)
    for a in attrs:
        if a is not None and not isinstance(a, GradientClipBase):
            raise TypeError("clip attribute should be an instance of GradientClipBase, got %s" % type(a).__name__)

    def clip_all(pgs, block):
        out = list(pgs)
        groups = {}
        for i, ((p, g), a) in enumerate(zip(pgs, attrs)):
            if isinstance(a, GradientClipByGlobalNorm):
                first = groups.setdefault(a.group_name, (a, []))
                if first[0].clip_norm != a.clip_norm:
                    raise ValueError("All parameters' 'clip_norm' of a same group should be the same: group %r has "
                                     "%s and %s" % (a.group_name, first[0].clip_norm, a.clip_norm))
                first[1].append(i)
            elif a is not None:
                out[i] = a._clip([(p, g)], block)[0]
        for a, idx in groups.values():
            for i, pg in zip(idx, a._clip([pgs[i] for i in idx], block)):
                out[i] = pg
        return out

    return _clip_in_program(params_grads, clip_all)
