"""fluid.incubate.fleet.collective: Fluid 1.x's collective (data-parallel) training API over MPI.

    from fluidlite.incubate.fleet.collective import fleet, DistributedStrategy
    from fluidlite.incubate.fleet.base import role_maker
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))   # or MPISymetricRoleMaker()
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
    opt.minimize(loss)
    exe.run(fleet.startup_program); exe.run(fleet.main_program, feed=my_shard, fetch_list=[loss])

``minimize`` appends backward and updates as the wrapped optimizer does, then rewrites the programs for the job
(fluidlite.distributed.collective): gradients allreduced in buckets while backward runs, parameters broadcast from
rank 0 at start-up, the ranks' programs compared once. Run under ``mpiexec -n N`` or
``python -m fluidlite.distributed.launch --nproc_per_node N``; alone, it trains as one process.
"""
from .... import io
from ....compiler import BuildStrategy, ExecutionStrategy
from ....framework import Variable, default_main_program, default_startup_program
from ....distributed import collective, comm
from ..base import role_maker as _role_maker

__all__ = ["fleet", "Collective", "DistributedStrategy", "CollectiveOptimizer", "CollectiveOpBasedOptimizer",
           "TrainStatus"]


class DistributedStrategy(BuildStrategy):
    """Fluid 1.8's DistributedStrategy: a BuildStrategy plus the collective settings. fluidlite reads mode
    ("nccl2" or "collective": the same rewrite here), collective_mode (None or "grad_allreduce"),
    fuse_all_reduce_ops (bucketed allreduce, on by default) and fuse_grad_size_in_MB (bucket size, default
    fluidlite.distributed.collective.DEFAULT_FUSE_GRAD_SIZE_MB). local SGD, dist FC, recompute and AMP raise at
    minimize."""

    _FIELDS = dict(BuildStrategy._FIELDS, **{
        "fuse_all_reduce_ops": True,
        "fuse_grad_size_in_MB": None,
        "use_local_sgd": False,
        "use_dist_fc": False,
        "dist_fc_config": None,
        "mode": "nccl2",
        "collective_mode": None,
        "forward_recompute": False,
        "recompute_checkpoints": [],
        "use_amp": False,
        "amp_loss_scaling": 2 ** 15,
        "exec_strategy": None,
    })

    def __init__(self):
        super().__init__()
        self.exec_strategy = ExecutionStrategy()

    def _check(self):
        for name in ("use_local_sgd", "use_dist_fc", "forward_recompute", "use_amp"):
            if getattr(self, name):
                raise NotImplementedError("DistributedStrategy.%s = True is not supported by fluidlite's collective "
                                          "training (gradient allreduce only; docs/compat.md)" % name)
        if self.mode not in ("nccl2", "collective"):
            raise ValueError("DistributedStrategy.mode must be 'nccl2' or 'collective', got %r" % (self.mode,))
        if self.collective_mode not in (None, "grad_allreduce"):
            raise NotImplementedError("DistributedStrategy.collective_mode %r is not supported (None or "
                                      "'grad_allreduce')" % (self.collective_mode,))
        mb = self.fuse_grad_size_in_MB
        if mb is not None and not (isinstance(mb, (int, float)) and not isinstance(mb, bool) and mb > 0):
            raise ValueError("DistributedStrategy.fuse_grad_size_in_MB must be a number > 0 (or None), got %r"
                             % (mb,))


class TrainStatus:
    """The epoch a checkpoint was taken after (fleet.save_checkpoint / load_checkpoint)."""

    def __init__(self, epoch_no=-1):
        self._epoch_no = int(epoch_no)

    def next(self):
        return self._epoch_no + 1

    def __eq__(self, other):
        return isinstance(other, TrainStatus) and other._epoch_no == self._epoch_no

    def __repr__(self):
        return "TrainStatus(epoch_no=%d)" % self._epoch_no


class Collective:
    """The ``fleet`` singleton of collective training."""

    def __init__(self):
        self._role_maker = None
        self._optimizer = None
        self.main_program = None
        self.startup_program = None
        self._origin_program = None
        self._buckets = []

    # ---- the job
    def init(self, role_maker=None):
        """Joins the job: `role_maker` (default PaddleCloudRoleMaker(is_collective=True), which uses MPI's rank
        when no launcher variables are set) generates the role, creating the MPI ring."""
        if role_maker is None:
            role_maker = _role_maker.PaddleCloudRoleMaker(is_collective=True)
        if not isinstance(role_maker, _role_maker.RoleMakerBase):
            raise TypeError("fleet.init: role_maker must be a RoleMakerBase (e.g. PaddleCloudRoleMaker), got %s"
                            % type(role_maker).__name__)
        role_maker.generate_role()
        self._role_maker = role_maker

    def _role(self):
        if self._role_maker is None:
            raise RuntimeError("fleet is not initialized: call fleet.init(role_maker) first")
        return self._role_maker

    def is_first_worker(self):
        return self._role().is_first_worker()

    def worker_index(self):
        return self._role().worker_index()

    def worker_num(self):
        return self._role().worker_num()

    def is_worker(self):
        return self._role().is_worker()

    def is_server(self):
        return False

    def server_num(self):
        return 0

    def worker_endpoints(self, to_string=False):
        eps = self._role().get_trainer_endpoints()
        return ",".join(eps) if to_string else eps

    def init_worker(self):
        self._role()

    def init_server(self, model_dir=None):
        raise NotImplementedError("fleet.init_server: parameter-server training is out of scope in fluidlite")

    run_server = init_server

    def stop_worker(self):
        self.barrier_worker()

    def barrier_worker(self):
        self._role()
        comm.barrier()

    def split_files(self, files):
        """This worker's share of `files` (a contiguous block, the first ones one longer), as Fluid's
        fleet.split_files: every file goes to exactly one worker."""
        if not isinstance(files, list):
            raise TypeError("fleet.split_files: files must be a list, got %s" % type(files).__name__)
        n, i = self.worker_num(), self.worker_index()
        per, extra = divmod(len(files), n)
        begin = i * per + min(i, extra)
        return files[begin:begin + per + (1 if i < extra else 0)]

    # ---- training
    def distributed_optimizer(self, optimizer, strategy=None):
        self._optimizer = CollectiveOptimizer(optimizer, strategy)
        return self._optimizer

    # ---- saving: rank 0 writes, the others wait (and learn whether it worked)
    def _on_first_worker(self, what, fn):
        error = None
        if self.worker_index() == 0:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 -- re-raised on every rank below
                error = "%s: %s" % (type(e).__name__, e)
        errors = comm.allgather_object(error, "fleet.%s" % what) if self.worker_num() > 1 else [error]
        if errors[0] is not None:
            raise RuntimeError("fleet.%s: rank 0 failed to write: %s" % (what, errors[0]))

    def save_persistables(self, executor, dirname, main_program=None, filename=None):
        program = main_program if main_program is not None else (self.main_program or default_main_program())
        self._on_first_worker("save_persistables",
                              lambda: io.save_persistables(executor, dirname, program, filename))

    def save_inference_model(self, executor, dirname, feeded_var_names=None, target_vars=None, main_program=None,
                             export_for_deployment=True):
        program = main_program if main_program is not None else (self._origin_program or default_main_program())
        self._on_first_worker("save_inference_model", lambda: io.save_inference_model(
            dirname, feeded_var_names, target_vars, executor, program, export_for_deployment=export_for_deployment))

    def save_checkpoint(self, executor, path, trainer_id, train_status, fs=None, main_program=None,
                        local_cache_path=".cache", remain_all_checkpoint=True):
        """Fluid's signature: persistables of `main_program` (default the training program) and `train_status`
        under `path`, written by rank 0 while the others wait. Only the local file system (`fs` None or a LocalFS)
        is supported. Returns (path, 0)."""
        import json
        import os
        _local_fs_only(fs, "save_checkpoint")
        program = main_program if main_program is not None else (self.main_program or default_main_program())

        def write():
            io.save_persistables(executor, path, program)
            tmp = os.path.join(path, "train_status.json.tmp")
            with open(tmp, "w") as f:
                json.dump({"epoch_no": train_status._epoch_no}, f)
            os.replace(tmp, os.path.join(path, "train_status.json"))
        self._on_first_worker("save_checkpoint", write)
        return path, 0

    def load_checkpoint(self, executor, path, trainer_id, train_status, fs=None, main_program=None,
                        local_cache_path=".cache", ignore_empty=True):
        """Loads what save_checkpoint wrote (every rank reads it) into the scope and `train_status`; returns
        `train_status`. A missing checkpoint with ignore_empty=True leaves both as they are (Fluid's)."""
        import json
        import os
        _local_fs_only(fs, "load_checkpoint")
        program = main_program if main_program is not None else (self.main_program or default_main_program())
        status_file = os.path.join(path, "train_status.json")
        if ignore_empty and not os.path.exists(status_file):
            return train_status
        io.load_persistables(executor, path, program)
        with open(status_file) as f:
            train_status._epoch_no = int(json.load(f)["epoch_no"])
        return train_status


def _local_fs_only(fs, what):
    if fs is not None and type(fs).__name__ != "LocalFS":
        raise NotImplementedError("fleet.%s: fs=%s is not supported; fluidlite checkpoints go to the local file "
                                  "system (fs=None)" % (what, type(fs).__name__))


class CollectiveOptimizer:
    """fleet.distributed_optimizer's result: minimize = the wrapped optimizer's minimize + the collective rewrite."""

    def __init__(self, optimizer, strategy=None):
        if strategy is None:
            strategy = DistributedStrategy()
        if not isinstance(strategy, BuildStrategy):
            raise TypeError("fleet.distributed_optimizer: strategy must be a DistributedStrategy, got %s"
                            % type(strategy).__name__)
        self._optimizer = optimizer
        self._strategy = strategy

    def __getattr__(self, name):  # learning rate and the like come from the wrapped optimizer
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._optimizer, name)

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        if not isinstance(loss, Variable):
            raise TypeError("minimize: loss must be a Variable, got %s" % type(loss).__name__)
        strategy = self._strategy
        if isinstance(strategy, DistributedStrategy):
            strategy._check()
        fuse = bool(getattr(strategy, "fuse_all_reduce_ops", True))
        mb = getattr(strategy, "fuse_grad_size_in_MB", None)
        if fleet._role_maker is None:
            fleet.init()
        startup = startup_program or default_startup_program()
        main = loss.block.program
        optimize_ops, params_grads = self._optimizer.minimize(loss, startup, parameter_list, no_grad_set)
        fleet._origin_program = main.clone()
        nranks = fleet.worker_num()
        if nranks > 1:
            fleet._buckets = collective.transpile(main, startup, nranks, fuse=fuse, fuse_grad_size_mb=mb,
                                                  loss_name=loss.name, params_grads=params_grads)
        fleet.main_program = main
        fleet.startup_program = startup
        return optimize_ops, params_grads


# Fluid 1.8 names the op-based variant separately; here both are the same rewrite.
CollectiveOpBasedOptimizer = CollectiveOptimizer

fleet = Collective()
