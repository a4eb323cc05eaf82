"""Fluid 1.x names fluidlite lacks say so: an AttributeError naming the Fluid API, its plan and docs/compat.md.

``_fluid18_api.json`` holds Fluid 1.8's public names per module (extracted from Paddle 1.8.5's sources by
tools/compat/extract_fluid18_api.py); the tables below say which issue adds a missing name, or why none will.
tools/compat_report.py turns both into docs/compat.md.

Each fluidlite module that mirrors a Fluid module gets a module-level ``__getattr__`` (PEP 562), which
Python calls only when normal lookup fails, so present names cost nothing and ``hasattr()`` stays False
for absent ones. ``fluidlite/__init__.py`` installs it in every mirroring module imported by then
(``install_all``); a module imported later on its own calls ``install(globals())`` at its end. Importing a
Fluid module fluidlite lacks (``import fluidlite.incubate.fleet.collective``) says so the same way.
"""
import functools
import json
import os
import sys

DOC = "docs/compat.md"

# Issues of the "Fluid 1.x programs run unchanged" series, by label.
ISSUES = {
    "[3/10]": "data feeding, readers, datasets, program-level API",
    "[4/10]": "layers, optimizers, sparse gradients, metrics",
    "[5/10]": "LoD tensors, sequence ops, dynamic_lstm/dynamic_gru, CRF",
    "[6/10]": "control flow, tensor arrays, RNN cells, beam search",
    "[9/10]": "collective data-parallel training over MPI, fleet",
    "[10/10]": "CUDAPlace: CUDA kernels",
}

# Names each issue's text asks for, per Fluid module ("*": every name of the module). Only names in Fluid 1.8's
# lists (tests/test_compat.py checks it): e.g. lod_rank_table, which [6/10] adds, is not in 1.8's __all__.
PLANNED = {
    "[3/10]": {
        "paddle": "batch reader dataset",
        "paddle.reader": "shuffle buffered chain compose ComposeNotAligned map_readers xmap_readers firstn cache",
        "paddle.dataset": "uci_housing mnist cifar imikolov movielens imdb conll05 wmt16",
        "paddle.dataset.uci_housing": "*", "paddle.dataset.mnist": "*", "paddle.dataset.cifar": "*",
        "paddle.dataset.imikolov": "*", "paddle.dataset.movielens": "*", "paddle.dataset.imdb": "*",
        "paddle.dataset.conll05": "*", "paddle.dataset.wmt16": "*",
        "fluid": "data embedding one_hot DataFeeder cpu_places cuda_places CompiledProgram BuildStrategy "
                 "ExecutionStrategy ParallelExecutor memory_optimize release_memory save load LoDTensor Tensor "
                 "in_dygraph_mode",
        "fluid.framework": "cpu_places cuda_places in_dygraph_mode",
        "fluid.io": "DataLoader PyReader batch save load load_program_state set_program_state shuffle buffered "
                    "chain compose ComposeNotAligned map_readers xmap_readers firstn cache",
        "fluid.layers": "py_reader create_py_reader_by_data read_file double_buffer",
        "fluid.transpiler": "memory_optimize release_memory",
    },
    "[4/10]": {
        "fluid.nets": "simple_img_conv_pool img_conv_group glu scaled_dot_product_attention",
        "fluid.layers": "conv2d_transpose layer_norm group_norm instance_norm prelu elu selu swish hard_swish gelu "
                        "hard_sigmoid softplus softsign log sqrt rsqrt square pow exp reciprocal sin cos argmax "
                        "argmin argsort where gather_nd scatter scatter_nd_add expand expand_as shape range "
                        "linspace zeros_like ones_like pad pad2d pad_constant_like crop image_resize "
                        "resize_bilinear resize_nearest pixel_shuffle unfold l2_normalize cos_sim label_smooth "
                        "sigmoid_cross_entropy_with_logits bpr_loss log_loss huber_loss smooth_l1 kldiv_loss "
                        "margin_rank_loss rank_loss npair_loss sampled_softmax_with_cross_entropy nce hsigmoid "
                        "sums clip_by_norm maxout affine_channel space_to_depth unique isfinite has_inf has_nan "
                        "logical_and logical_or logical_xor logical_not is_empty reduce_prod reduce_all "
                        "reduce_any one_hot fill_constant_batch_size_like auc polynomial_decay cosine_decay "
                        "noam_decay linear_lr_warmup",
        "fluid.optimizer": "Adagrad AdagradOptimizer DecayedAdagrad DecayedAdagradOptimizer "
                           "RMSPropOptimizer Adadelta AdadeltaOptimizer Adamax AdamaxOptimizer Ftrl FtrlOptimizer "
                           "LambOptimizer LarsMomentum LarsMomentumOptimizer ExponentialMovingAverage "
                           "ModelAverage",
        "fluid.metrics": "MetricBase Accuracy Precision Recall Auc ChunkEvaluator EditDistance CompositeMetric",
        "fluid.average": "WeightedAverage",
        "fluid.clip": "set_gradient_clip",
    },
    "[5/10]": {
        "fluid": "create_lod_tensor create_random_int_lodtensor",
        "fluid.nets": "sequence_conv_pool",
        "fluid.layers": "sequence_pool sequence_first_step sequence_last_step sequence_softmax sequence_conv "
                        "sequence_expand sequence_expand_as sequence_concat sequence_reshape sequence_slice "
                        "sequence_pad sequence_unpad sequence_mask sequence_reverse sequence_enumerate "
                        "lod_reset lod_append im2sequence row_conv dynamic_lstm dynamic_lstmp "
                        "dynamic_gru gru_unit lstm_unit linear_chain_crf crf_decoding chunk_eval",
    },
    "[6/10]": {
        "fluid": "LoDTensorArray",
        "fluid.layers": "While create_array array_write array_read array_length tensor_array_to_tensor "
                        "reorder_lod_tensor_by_rank cond case switch_case Switch IfElse DynamicRNN "
                        "RNNCell LSTMCell GRUCell rnn Decoder BeamSearchDecoder dynamic_decode beam_search "
                        "beam_search_decode gather_tree increment less_than less_equal greater_than greater_equal "
                        "equal not_equal reverse",
    },
    "[9/10]": {
        "fluid": "DistributeTranspiler DistributeTranspilerConfig",
        "fluid.transpiler": "DistributeTranspiler DistributeTranspilerConfig",
        "fluid.incubate.fleet.collective": "fleet Collective DistributedStrategy CollectiveOptimizer "
                                           "CollectiveOpBasedOptimizer TrainStatus",
        "fluid.incubate.fleet.base.role_maker": "Role RoleMakerBase MPISymetricRoleMaker PaddleCloudRoleMaker",
    },
    "[10/10]": {
        "fluid": "cuda_pinned_places is_compiled_with_cuda",
        "fluid.framework": "cuda_pinned_places is_compiled_with_cuda",
    },
}

_PS = "for parameter-server training, out of scope ([9/10] is collective only)"
_DYGRAPH = "fluidlite is static-graph only"
# Why a name no issue asks for will not come: (Fluid module, name or "*", reason); the first match wins.
NOT_PLANNED = [
    ("fluid.dygraph", "*", _DYGRAPH),
    ("fluid", "dygraph enable_dygraph disable_dygraph enable_imperative disable_imperative VarBase", _DYGRAPH),
    ("fluid.contrib", "*", "fluid.contrib is Paddle's experimental area; no issue ports it"),
    ("fluid", "contrib", "fluid.contrib is Paddle's experimental area; no issue ports it"),
    ("fluid.dataset", "*", "Fluid's C++ DataFeed datasets are " + _PS),
    ("fluid", "TrainerDesc MultiTrainer DistMultiTrainer PipelineTrainer DataFeedDesc",
     "train_from_dataset's trainer and data-feed descriptions are " + _PS),
    ("fluid", "HashName RoundRobin", "transpiler placement policies are " + _PS),
    ("fluid.transpiler", "HashName RoundRobin", "transpiler placement policies are " + _PS),
    ("fluid.incubate.fleet.base.role_maker", "*", "role makers other than [9/10]'s are " + _PS),
    ("fluid.incubate.fleet.collective", "*", "configuration of Paddle's own collective variants, not in [9/10]"),
    ("fluid.optimizer", "DGCMomentumOptimizer", "DGC is out of scope in [4/10]"),
    ("fluid.optimizer", "Dpsgd DpsgdOptimizer PipelineOptimizer LookaheadOptimizer RecomputeOptimizer",
     "not used by the model families of [4/10]"),
    ("fluid.metrics", "DetectionMAP", "detection models are out of scope of [4/10]"),
    ("fluid.layers@detection", "*", "detection models are out of scope of [4/10]"),
    ("fluid.layers@distributions", "*", "probability distributions are not used by the reference models"),
    ("fluid", "ComplexVariable", "Paddle 2.0-preview complex tensors, not Fluid 1.x"),
    ("fluid", "load_op_library", "loads Paddle's C++ custom-op libraries"),
    ("fluid", "install_check", "checks a Paddle installation"),
    ("fluid.framework", "ComplexVariable", "Paddle 2.0-preview complex tensors, not Fluid 1.x"),
    ("fluid.framework", "load_op_library", "loads Paddle's C++ custom-op libraries"),
    ("paddle.dataset", "*", "not used by the book chapters that [3/10] ports"),
    ("paddle.dataset.*", "*", "not used by the book chapters that [3/10] ports"),
    ("paddle.reader", "multiprocess_reader", "not used by the book chapters that [3/10] ports"),
    ("fluid.io", "multiprocess_reader", "not used by the book chapters that [3/10] ports"),
]
DEFAULT_REASON = "no issue schedules it (not used by the reference programs of [3/10]-[6/10])"


@functools.lru_cache(maxsize=None)
def api():
    """The extracted Fluid 1.8 API: {"source", "commit", "modules": {fluid module: [names]}, ...}."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fluid18_api.json")) as f:
        return json.load(f)


def fluidlite_module_name(fluid_module):
    """fluid.layers -> fluidlite.layers; paddle.dataset.mnist -> fluidlite.dataset.mnist; paddle -> fluidlite."""
    head, _, rest = fluid_module.partition(".")
    return "fluidlite" + ("." + rest if rest else "")


def fluid_modules_of(module_name):
    """The Fluid modules a fluidlite module mirrors (fluidlite mirrors both fluid and paddle)."""
    mods = api()["modules"]
    rest = module_name[len("fluidlite"):]
    return tuple(m for m in ("fluid" + rest, "paddle" + rest) if m in mods)


@functools.lru_cache(maxsize=None)
def _name_set(fluid_module):
    return frozenset(api()["modules"].get(fluid_module, ()))


@functools.lru_cache(maxsize=None)
def _modules_under(fluid_name):
    """The listed Fluid modules that are fluid_name or inside it."""
    return tuple(m for m in api()["modules"] if m == fluid_name or m.startswith(fluid_name + "."))


def _matches(spec, name):
    return spec == "*" or name in spec.split()


def plan(fluid_module, name):
    """("[5/10]", None) when an issue adds the name, else (None, reason)."""
    for issue, table in PLANNED.items():
        if _matches(table.get(fluid_module, ""), name):
            return issue, None
    origin = api().get("layers_origin", {}).get(name) if fluid_module == "fluid.layers" else None
    keys = {fluid_module, "fluid.layers@%s" % origin if origin else None}
    if fluid_module.startswith("paddle.dataset."):
        keys.add("paddle.dataset.*")
    for mod, spec, reason in NOT_PLANNED:
        if mod in keys and _matches(spec, name):
            return None, reason
    return None, DEFAULT_REASON


def plan_of(fluid_name):
    """(issues, reason) for a full Fluid name: the issues that add it, or () and why none will.

    A module (fluid.nets) is planned in every issue that adds one of its names."""
    mods = _modules_under(fluid_name)
    if not mods:
        issue, reason = plan(*fluid_name.rsplit(".", 1))
        return ((issue,) if issue else ()), reason
    plans = [plan(m, n) for m in mods for n in api()["modules"][m]]
    issues = tuple(sorted({i for i, _ in plans if i}, key=lambda i: int(i[1:].split("/")[0])))
    return issues, (None if issues else plans[0][1])


def message(fluid_name):
    """The AttributeError text for a Fluid 1.x name fluidlite lacks, e.g. 'fluid.layers.DynamicRNN'."""
    issues, reason = plan_of(fluid_name)
    if issues:
        return "%s is a Fluid 1.x API that fluidlite does not implement yet (planned in %s); see %s" % (
            fluid_name, ", ".join(issues), DOC)
    return "%s is a Fluid 1.x API that fluidlite does not implement (not planned: %s); see %s" % (
        fluid_name, reason, DOC)


def is_placeholder(obj):
    """An object a module exposes under a Fluid name without implementing it counts as missing."""
    return getattr(obj, "__fluidlite_not_implemented__", False) is True


def _make_getattr(module_name, fluid_modules):
    def __getattr__(name):
        if not name.startswith("__"):
            # A name listed in a module's __all__ first: fluidlite's "dataset" is paddle.dataset, not fluid.dataset.
            for fm in fluid_modules:
                if name in _name_set(fm):
                    raise AttributeError(message(fm + "." + name))
            for fm in fluid_modules:
                if _modules_under(fm + "." + name):
                    raise AttributeError(message(fm + "." + name))
        raise AttributeError("module %r has no attribute %r" % (module_name, name))
    __getattr__.__qualname__ = "__getattr__"
    return __getattr__


def install(module_globals):
    """Give a fluidlite module the Fluid-aware ``__getattr__`` (one line at the end of a module imported late)."""
    name = module_globals["__name__"]
    fluid_modules = fluid_modules_of(name)
    if fluid_modules and "__getattr__" not in module_globals:
        module_globals["__getattr__"] = _make_getattr(name, fluid_modules)


class MissingFluidModuleFinder:
    """Last on sys.meta_path, so asked only when no module was found: ``import fluidlite.incubate.fleet`` (a
    Fluid module fluidlite lacks) raises ModuleNotFoundError with the same message instead of "No module"."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith("fluidlite."):
            rest = fullname[len("fluidlite"):]
            for fluid_name in ("fluid" + rest, "paddle" + rest):
                if _modules_under(fluid_name):
                    raise ModuleNotFoundError(message(fluid_name), name=fullname)
        return None


def install_all():
    """Install it in every imported fluidlite module that mirrors a Fluid module (called by fluidlite/__init__)."""
    for name, mod in list(sys.modules.items()):
        if (name == "fluidlite" or name.startswith("fluidlite.")) and mod is not None:
            install(vars(mod))
    if not any(isinstance(f, MissingFluidModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MissingFluidModuleFinder())
