"""CompiledProgram, BuildStrategy and ExecutionStrategy (Fluid 1.x ``fluid.compiler``) on one process.

fluidlite runs every program on the executor's one place. ``with_data_parallel`` over N places keeps
Fluid's observable arithmetic instead of copying the program N times (docs/parallel.md):

- a feed dict is the global batch and runs whole; a list of N per-device feed dicts is concatenated
  along dim 0 into that global batch;
- the loss gradient seed is what the devices' gradients would sum to after the all-reduce: Fluid seeds
  ``1/N`` per device (CoeffNumDevice) or ``1`` (One, or no loss_name), so for equal splits of a mean
  loss the summed gradient is the whole-batch gradient times ``1`` or ``N``; fluidlite seeds ``1`` or ``N``;
- a fetched variable whose dim 0 is the batch (declared -1) comes back whole (the concatenation of the
  devices' parts); any other comes back N times along dim 0, as Fluid concatenates each device's copy.

BuildStrategy's fusion flags choose the IR passes (csrc/pass.h, kernels/passes/) that rewrite the executor's
private copy of a program when it is prepared (``PASS_FLAGS``); a plain ``exe.run(program)`` uses the
defaults of ``BuildStrategy()``. The other flags are recorded, checked and reported by docs/parallel.md,
never silently acted on.
"""
import enum

import numpy as np

from . import core
from .framework import OpRole, Program, Variable, grad_var_name
from .places import cpu_num

__all__ = ["CompiledProgram", "BuildStrategy", "ExecutionStrategy"]


class _Strategy:
    """Fields with Fluid's defaults; assigning a field the strategy does not have raises AttributeError
    (a typo must not pass as an option)."""

    _FIELDS = {}

    def __init__(self):
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, list(default) if isinstance(default, list) else default)

    def __setattr__(self, name, value):
        if name not in self._FIELDS:
            raise AttributeError("'%s' object has no attribute '%s' (its fields: %s)"
                                 % (type(self).__name__, name, ", ".join(sorted(self._FIELDS))))
        object.__setattr__(self, name, value)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, getattr(self, k)) for k in self._FIELDS))


class BuildStrategy(_Strategy):
    """Fluid's BuildStrategy fields and defaults. Once a CompiledProgram has run with it, it is finalized
    and every setter raises (Fluid's "BuildStrategy is finlaized.", its spelling)."""

    class ReduceStrategy(enum.IntEnum):
        Reduce = 0
        AllReduce = 1

    class GradientScaleStrategy(enum.IntEnum):
        CoeffNumDevice = 0
        One = 1
        Customized = 2

    _FIELDS = {
        "reduce_strategy": ReduceStrategy.AllReduce,
        "gradient_scale_strategy": GradientScaleStrategy.CoeffNumDevice,
        "debug_graphviz_path": "",
        "enable_sequential_execution": False,
        "remove_unnecessary_lock": True,
        "num_trainers": 1,
        "trainer_id": 0,
        "trainers_endpoints": [],
        "nccl_comm_num": 1,
        "use_hierarchical_allreduce": False,
        "hierarchical_allreduce_inter_nranks": 0,
        "fuse_elewise_add_act_ops": False,
        "fuse_bn_act_ops": False,
        "fuse_relu_depthwise_conv": False,
        "fuse_broadcast_ops": False,
        "fuse_all_optimizer_ops": False,
        "fuse_all_reduce_ops": False,
        "sync_batch_norm": False,
        "memory_optimize": None,
        "enable_inplace": False,
        "enable_backward_optimizer_op_deps": True,
        "cache_runtime_context": False,
        "mkldnn_enabled_op_types": [],
        "is_distribution": False,
        "async_mode": False,
        # fluidlite's own passes (docs/architecture.md, "IR passes"); on by default where measured to pay.
        "fuse_elementwise_chains": True,
        "fuse_reductions": True,
        "fuse_gradient_sums": False,
        # None: on for programs from load_inference_model (batch_norm folding, fc and conv fusion).
        "inference_optimize": None,
    }

    def __init__(self):
        object.__setattr__(self, "_finalized", False)
        super().__init__()

    def __setattr__(self, name, value):
        if name in self._FIELDS and self._finalized:
            raise core.EnforceNotMet("BuildStrategy is finlaized.")
        if name == "reduce_strategy":
            value = _enum_value(BuildStrategy.ReduceStrategy, value, name)
        elif name == "gradient_scale_strategy":
            value = _enum_value(BuildStrategy.GradientScaleStrategy, value, name)
        elif name in ("memory_optimize", "inference_optimize") and not (value is None or isinstance(value, bool)):
            raise core.EnforceNotMet("BuildStrategy.%s must be None, False or True, got %r" % (name, value))
        elif name in PASS_FLAGS and not isinstance(value, bool) and name != "inference_optimize":
            raise TypeError("BuildStrategy.%s must be True or False, got %r" % (name, value))
        super().__setattr__(name, value)

    def _finalize(self):
        object.__setattr__(self, "_finalized", True)


# BuildStrategy flag -> the IR passes it turns on. A pass that is not built into this module is left out.
PASS_FLAGS = {
    "inference_optimize": ["fold_batch_norm", "fuse_fc", "fuse_conv_bias_act"],
    "fuse_bn_act_ops": ["fuse_bn_act"],
    "fuse_elewise_add_act_ops": ["fuse_elewise_add_act"],
    "fuse_reductions": ["fuse_reductions"],
    "fuse_elementwise_chains": ["fuse_elementwise_chains"],
    "fuse_gradient_sums": ["fuse_gradient_sums"],
    "fuse_all_optimizer_ops": ["fuse_optimizer_ops"],
    "enable_inplace": ["inplace"],
}

_DEFAULT_PASSES = {}  # program._is_inference -> the passes of BuildStrategy()'s defaults


def passes_for(program, build_strategy=None):
    """The IR passes a run of `program` with `build_strategy` (None: BuildStrategy()'s defaults) applies, as a
    tuple of names (the executor runs them in their registered order)."""
    if build_strategy is None:  # every plain exe.run asks: the answer depends only on _is_inference
        inference = bool(getattr(program, "_is_inference", False))
        cached = _DEFAULT_PASSES.get(inference)
        if cached is not None:
            return cached
        _DEFAULT_PASSES[inference] = passes_for(program, BuildStrategy())
        return _DEFAULT_PASSES[inference]
    built = _built_passes()
    names = []
    for flag, passes in PASS_FLAGS.items():
        on = getattr(build_strategy, flag)
        if flag == "inference_optimize" and on is None:
            on = getattr(program, "_is_inference", False)
        if on:
            names.extend(p for p in passes if p in built)
    return tuple(names)


_BUILT = None


def _built_passes():
    global _BUILT
    if _BUILT is None:
        _BUILT = frozenset(p["name"] for p in core.passes())
    return _BUILT


def _enum_value(cls, value, field):
    if isinstance(value, cls):
        return value
    raise TypeError("BuildStrategy.%s must be a BuildStrategy.%s (%s), got %r"
                    % (field, cls.__name__, ", ".join(m.name for m in cls), value))


class ExecutionStrategy(_Strategy):
    """Fluid's ExecutionStrategy fields and defaults (num_iteration_per_drop_scope: 100 as in 1.7/1.8)."""

    _FIELDS = {
        "num_threads": 0,
        "use_cuda": False,
        "allow_op_delay": False,
        "num_iteration_per_drop_scope": 100,
        "num_iteration_per_run": 1,
        "use_experimental_executor": False,
        "use_thread_barrier": False,
        "_dry_run": False,
    }


def _check_places(places, caller):
    if isinstance(places, core.Place):
        places = [places]
    if not isinstance(places, (list, tuple)) or not places:
        raise TypeError("%s: places must be a non-empty list of places (fluid.CPUPlace() / fluid.CUDAPlace(i)), "
                        "got %r" % (caller, places))
    for p in places:
        if not isinstance(p, core.Place):
            raise TypeError("%s: places must be fluid.CPUPlace() / fluid.CUDAPlace(i) objects, got %s (%r)"
                            % (caller, type(p).__name__, p))
    kinds = {p.is_gpu_place() for p in places}
    if len(kinds) > 1:
        raise ValueError("%s: places mix CPU and CUDA places: %s" % (caller, [str(p) for p in places]))
    return list(places)


class CompiledProgram:
    """``CompiledProgram(program).with_data_parallel(...)``: run by ``Executor.run`` as `program` with
    the data-parallel feed, gradient-seed and fetch rules of the module docstring."""

    def __init__(self, program_or_graph, build_strategy=None):
        if not isinstance(program_or_graph, Program):
            raise TypeError("CompiledProgram: expects a fluid Program (fluidlite has no IrGraph), got %s"
                            % type(program_or_graph).__name__)
        if build_strategy is not None and not isinstance(build_strategy, BuildStrategy):
            raise TypeError("CompiledProgram: build_strategy must be a fluid.BuildStrategy, got %s"
                            % type(build_strategy).__name__)
        self._program = program_or_graph
        self._build_strategy = build_strategy
        self._exec_strategy = None
        self._loss_name = None
        self._places = None
        self._is_data_parallel = False
        self._share_vars_from = None
        self._run_program = None  # ((source version, scale mode, N), the copy of the program that runs)

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None, share_vars_from=None,
                           places=None):
        if self._is_data_parallel:
            raise RuntimeError("CompiledProgram.with_data_parallel: already called on this CompiledProgram")
        if build_strategy is not None:
            if not isinstance(build_strategy, BuildStrategy):
                raise TypeError("with_data_parallel: build_strategy must be a fluid.BuildStrategy, got %s"
                                % type(build_strategy).__name__)
            self._build_strategy = build_strategy
        if exec_strategy is not None and not isinstance(exec_strategy, ExecutionStrategy):
            raise TypeError("with_data_parallel: exec_strategy must be a fluid.ExecutionStrategy, got %s"
                            % type(exec_strategy).__name__)
        if share_vars_from is not None and not isinstance(share_vars_from, CompiledProgram):
            raise TypeError("with_data_parallel: share_vars_from must be a CompiledProgram, got %s"
                            % type(share_vars_from).__name__)
        if isinstance(loss_name, Variable):
            loss_name = loss_name.name
        if loss_name is not None:
            if not isinstance(loss_name, str):
                raise TypeError("with_data_parallel: loss_name must be a variable name, got %s"
                                % type(loss_name).__name__)
            if self._program.global_block()._find_var_recursive(loss_name) is None:
                raise ValueError("with_data_parallel: loss_name '%s' is not a variable of the program" % loss_name)
        self._places = None if places is None else _check_places(places, "with_data_parallel")
        self._loss_name = loss_name
        self._exec_strategy = exec_strategy or ExecutionStrategy()
        self._build_strategy = self._build_strategy or BuildStrategy()
        self._share_vars_from = share_vars_from  # one scope holds every variable: sharing is the default
        self._is_data_parallel = True
        return self

    def with_inference_optimize(self, config):
        raise NotImplementedError("CompiledProgram.with_inference_optimize: fluidlite has no inference engine "
                                  "(AnalysisConfig); run the program itself with an Executor")

    def _drop_prepared(self):
        self._program._exec_cache.clear()
        if self._run_program is not None:
            self._run_program[1]._exec_cache.clear()

    # ------------------------------------------------------------------ run (called by Executor.run)

    def _device_count(self, executor):
        if not self._is_data_parallel:
            return 1
        use_cuda = executor.place.is_gpu_place()
        if self._places is not None:
            if self._places[0].is_gpu_place() != use_cuda:
                raise ValueError("CompiledProgram: places are %s but the executor runs on %s"
                                 % (self._places[0], executor.place))
            return len(self._places)
        return core.get_cuda_device_count() if use_cuda else cpu_num()

    def _program_to_run(self, n):
        """The program Executor.run runs: the source itself, or a copy whose loss gradient seed is
        scaled (One with N > 1) or removed (Customized: loss@GRAD is fed)."""
        bs = self._build_strategy
        if bs is not None:
            bs._finalize()  # Fluid compiles every CompiledProgram with its strategy, data-parallel or not
        if not self._is_data_parallel:
            return self._program
        scale = BuildStrategy.GradientScaleStrategy
        # Without loss_name Fluid leaves the backward's own seed (1 on every device): One.
        mode = bs.gradient_scale_strategy if self._loss_name else scale.One
        if mode == scale.CoeffNumDevice or (mode == scale.One and n == 1):
            return self._program
        key = (self._program.desc.version(), mode, n)
        if self._run_program is not None and self._run_program[0] == key:
            return self._run_program[1]
        program = self._program.clone()
        block = program.global_block()
        seeds = [i for i, op in enumerate(block.ops) if op.has_attr("op_role") and
                 op.attr("op_role") & OpRole.Loss and
                 (self._loss_name is None or grad_var_name(self._loss_name) in op.output_arg_names)]
        for i in reversed(seeds):
            if mode == scale.Customized:
                block._remove_op(i)
            else:
                block.ops[i]._set_attr("value", float(block.ops[i].attr("value")) * n)
        self._run_program = (key, program)
        return program

    def _run(self, executor, feed, fetch_list, scope, return_numpy):
        n = self._device_count(executor)
        program = self._program_to_run(n)
        if isinstance(feed, (list, tuple)):
            feed = self._merge_device_feeds(feed, n)
        elif feed is not None and not isinstance(feed, dict):
            raise TypeError("feed of a CompiledProgram must be a dict or a list of one dict per device, got %s"
                            % type(feed).__name__)
        if feed and n > 1:
            for name, value in feed.items():
                rows = np.shape(value)[0] if np.ndim(value) else 0
                if rows < n:
                    raise ValueError("feed: variable '%s' has %d rows, fewer than the %d devices of the "
                                     "CompiledProgram (each device needs at least one)" % (name, rows, n))
            if self._loss_name and self._build_strategy.gradient_scale_strategy == \
                    BuildStrategy.GradientScaleStrategy.Customized:
                feed = self._customized_loss_grad(program, feed, n)
        results = executor.run(program, feed=feed, fetch_list=fetch_list, scope=scope, return_numpy=return_numpy,
                               _passes=passes_for(program, self._build_strategy))
        if n == 1 or not fetch_list:
            return results
        if isinstance(fetch_list, (str, Variable)):
            fetch_list = [fetch_list]
        return [self._per_device_fetch(program, f, r, n, return_numpy, executor.place)
                for f, r in zip(fetch_list, results)]

    @staticmethod
    def _merge_device_feeds(feeds, n):
        if len(feeds) != n:
            raise ValueError("feed: a list of %d feed dicts for %d devices (a list gives one dict per device)"
                             % (len(feeds), n))
        for d in feeds:
            if not isinstance(d, dict):
                raise TypeError("feed: each per-device feed must be a dict, got %s" % type(d).__name__)
            if set(d) != set(feeds[0]):
                raise ValueError("feed: the per-device feed dicts name different variables: %s vs %s"
                                 % (sorted(feeds[0]), sorted(d)))
        return {name: np.concatenate([np.asarray(d[name]) for d in feeds], axis=0) for name in feeds[0]}

    def _customized_loss_grad(self, program, feed, n):
        """Customized: the user feeds loss@GRAD, one value per device; the devices' gradients summed are
        those of the whole batch seeded with the sum when every device has the same value (equal splits)."""
        name = grad_var_name(self._loss_name)
        if name not in feed:
            raise ValueError("feed: gradient_scale_strategy is Customized, so %s must be fed (one value per "
                             "device)" % name)
        values = np.asarray(feed[name]).reshape(n, -1)
        if not (values == values[:1]).all():
            raise ValueError("feed: %s differs between the %d devices (%s); fluidlite runs the global batch once "
                             "and can only seed one value" % (name, n, values.reshape(-1).tolist()))
        loss = program.global_block()._var_recursive(self._loss_name)
        feed = dict(feed)
        feed[name] = (values[0] * n).reshape([d if d >= 0 else 1 for d in loss.shape]).astype(values.dtype)
        return feed

    @staticmethod
    def _per_device_fetch(program, item, result, n, return_numpy, place):
        name = item.name if isinstance(item, Variable) else item
        var = program.global_block()._find_var_recursive(name)
        if var is not None and var.shape and var.shape[0] == -1:
            return result  # the global batch's rows: the devices' parts concatenated
        arr = np.asarray(result)
        tiled = np.concatenate([arr.reshape((1,) + arr.shape) if arr.ndim == 0 else arr] * n, axis=0)
        if return_numpy:
            return tiled
        t = core.LoDTensor()
        t.set(tiled, place)
        return t
