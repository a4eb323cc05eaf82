"""fluid.ParallelExecutor: Fluid's legacy wrapper, a CompiledProgram with data parallelism run by an
Executor on one place (see compiler.py and docs/parallel.md for what N devices mean on one process)."""
import warnings

from . import core
from .compiler import BuildStrategy, CompiledProgram, ExecutionStrategy
from .places import cpu_num
from .executor import CPUPlace, CUDAPlace, Executor, global_scope
from .framework import Program, default_main_program

__all__ = ["ParallelExecutor"]


class ParallelExecutor:
    def __init__(self, use_cuda, loss_name=None, main_program=None, share_vars_from=None, exec_strategy=None,
                 build_strategy=None, num_trainers=1, trainer_id=0, scope=None):
        if not isinstance(use_cuda, bool):
            raise TypeError("ParallelExecutor: use_cuda must be True or False, got %r" % (use_cuda,))
        if use_cuda:
            n = core.get_cuda_device_count()
            if n == 0:
                raise RuntimeError("ParallelExecutor(use_cuda=True): no CUDA device (fluidlite was built without "
                                   "CUDA, or none is visible); use use_cuda=False")
            places = [CUDAPlace(i) for i in range(n)]
        else:
            places = [CPUPlace()] * cpu_num()
        if main_program is None:
            main_program = default_main_program()
        elif not isinstance(main_program, Program):
            raise TypeError("ParallelExecutor: main_program must be a fluid Program, got %s"
                            % type(main_program).__name__)
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise TypeError("ParallelExecutor: share_vars_from must be a ParallelExecutor, got %s"
                            % type(share_vars_from).__name__)
        if scope is not None and not isinstance(scope, core.Scope):
            raise TypeError("ParallelExecutor: scope must be a fluid Scope, got %s" % type(scope).__name__)
        build_strategy = build_strategy if build_strategy is not None else BuildStrategy()
        if not isinstance(build_strategy, BuildStrategy):
            raise TypeError("ParallelExecutor: build_strategy must be a fluid.BuildStrategy, got %s"
                            % type(build_strategy).__name__)
        build_strategy.num_trainers = num_trainers
        build_strategy.trainer_id = trainer_id
        self._places = places
        # Fluid shares the parameters of share_vars_from's scope; here that is its scope itself.
        self._scope = scope if scope is not None else (share_vars_from._scope if share_vars_from is not None
                                                       else global_scope())
        self._compiled_program = CompiledProgram(main_program).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy or ExecutionStrategy(),
            share_vars_from=share_vars_from._compiled_program if share_vars_from is not None else None,
            places=places)
        self._exe = Executor(places[0])

    @property
    def device_count(self):
        return len(self._places)

    def run(self, fetch_list, feed=None, feed_dict=None, return_numpy=True):
        """Fluid's ParallelExecutor.run: `feed` a dict (the global batch) or a list of one dict per device."""
        if feed is None and feed_dict is not None:
            warnings.warn("ParallelExecutor.run: `feed_dict` is deprecated, use `feed=`", DeprecationWarning,
                          stacklevel=2)
            feed = feed_dict
        return self._exe.run(program=self._compiled_program, feed=feed, fetch_list=fetch_list, scope=self._scope,
                             return_numpy=return_numpy)

    def drop_local_exe_scopes(self):
        """Drop the prepared programs of this executor's program and with them the scopes that hold their
        temporaries; the next run prepares again. Persistable variables stay in the scope."""
        self._compiled_program._drop_prepared()
