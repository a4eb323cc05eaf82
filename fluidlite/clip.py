"""Gradient clipping: ``GradientClipByGlobalNorm(clip_norm)`` scales every gradient by
clip_norm / max(global_norm, clip_norm), with global_norm = sqrt(sum_g sum(g^2)), all as ops."""
from . import framework

__all__ = ["GradientClipByGlobalNorm", "GradientClipByValue", "set_gradient_clip", "append_gradient_clip_ops"]

_program_clip = {}


class BaseGradientClipAttr:
    def _clip(self, params_grads, block):
        raise NotImplementedError


def _append_per_grad(params_grads, block, op_type, inputs, attrs):
    """(p, clipped) for each (p, g), clipped = op_type(X=g, **inputs) with attrs; (p, None) passes through."""
    out = []
    for p, g in params_grads:
        if g is None:
            out.append((p, g))
            continue
        # A SelectedRows gradient stays sparse: the op computes on its (merged, for clip) value (Fluid's kernels).
        clipped = block.create_var(dtype=g.dtype, shape=g.shape, type=g.type)
        block.append_op(type=op_type, inputs=dict({"X": g}, **inputs), outputs={"Out": clipped}, attrs=attrs)
        out.append((p, clipped))
    return out


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


class GradientClipByGlobalNorm(BaseGradientClipAttr):
    def __init__(self, clip_norm, group_name="default_group"):
        self.clip_norm = float(clip_norm)
        self.group_name = group_name

    def _clip(self, params_grads, block):
        from . import layers
        grads = [g for _, g in params_grads if g is not None]
        if not grads:
            return params_grads
        squares = [layers.reduce_sum(layers.square(_merged_values(g, block))) for g in grads]
        global_norm = layers.sqrt(squares[0] if len(squares) == 1 else layers.sums(squares))
        clip = layers.fill_constant(shape=[1], dtype=global_norm.dtype, value=self.clip_norm)
        scale = layers.elementwise_div(clip, layers.elementwise_max(global_norm, clip))
        return _append_per_grad(params_grads, block, "elementwise_mul", {"Y": scale}, {"axis": -1})


class GradientClipByValue(BaseGradientClipAttr):
    def __init__(self, max, min=None):
        self.max = float(max)
        self.min = float(-max if min is None else min)

    def _clip(self, params_grads, block):
        return _append_per_grad(params_grads, block, "clip", {}, {"min": self.min, "max": self.max})


def set_gradient_clip(clip, param_list=None, program=None):
    """Fluid 1.x: the clip applies to the next minimize() on `program` (default main program)."""
    if not isinstance(clip, BaseGradientClipAttr):
        raise TypeError("set_gradient_clip: clip must be a GradientClip* object, got %s" % type(clip).__name__)
    program = program or framework.default_main_program()
    _program_clip[id(program)] = clip


def append_gradient_clip_ops(params_grads, clip=None):
    """Clip the gradients with `clip` (or the clip set_gradient_clip set for the parameters' program).
    The ops go to the global block of the parameters' program, whatever the default main program is."""
    program = framework._program_of_params(params_grads, "append_gradient_clip_ops")
    clip = clip or _program_clip.get(id(program))
    if clip is None:
        return params_grads
    block = program.global_block()
    with framework.program_guard(program), program._optimized_guard([]), framework.name_scope("gradient_clip"):
        return clip._clip(params_grads, block)
