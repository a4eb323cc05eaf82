"""fluid.transpiler.DistributeTranspiler in its collective modes ("nccl2", and "collective" with
collective_mode "grad_allreduce"), for Fluid 1.x scripts that set up data-parallel training with it:

    config = fluid.DistributeTranspilerConfig(); config.mode = "nccl2"
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(trainer_id, trainers="ip0:port,ip1:port", current_endpoint=..., program=main, startup_program=s)

Both modes apply the same rewrite as fleet (fluidlite.distributed.collective): what Fluid split between the
transpiler and ParallelExecutor's allreduce is all in the program here, so the script's later
``CompiledProgram(...).with_data_parallel(num_trainers=..., trainer_id=...)`` or plain ``exe.run(main)`` runs it.
The parameter-server mode ("pserver", the default of Fluid's config) is out of scope and raises.
"""
from ..compiler import _Strategy
from ..framework import default_main_program, default_startup_program
from . import collective, comm

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig"]


class DistributeTranspilerConfig(_Strategy):
    """Fluid 1.8's fields and defaults; fluidlite reads mode, collective_mode, and (its own)
    fuse_grad_size_in_MB. The parameter-server fields are accepted and unused."""

    _FIELDS = {
        "slice_var_up": True,
        "split_method": None,
        "min_block_size": 8192,
        "enable_dc_asgd": False,
        "mode": "pserver",
        "print_log": False,
        "wait_port": True,
        "runtime_split_send_recv": False,
        "sync_mode": True,
        "geo_sgd_mode": False,
        "geo_sgd_need_push_nums": 100,
        "nccl_comm_num": 1,
        "use_hierarchical_allreduce": False,
        "hierarchical_allreduce_inter_nranks": 0,
        "collective_mode": None,
        "fuse_grad_size_in_MB": None,
    }


class DistributeTranspiler:
    def __init__(self, config=None):
        if config is not None and not isinstance(config, DistributeTranspilerConfig):
            raise TypeError("DistributeTranspiler: config must be a DistributeTranspilerConfig, got %s"
                            % type(config).__name__)
        self.config = config if config is not None else DistributeTranspilerConfig()
        self.origin_program = None
        self.startup_program = None
        self.buckets = []

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1, sync_mode=True,
                  startup_program=None, current_endpoint="127.0.0.1:6174"):
        mode = self.config.mode
        if mode == "pserver" or mode == "geo":
            raise NotImplementedError("DistributeTranspiler: mode %r (parameter-server training) is out of scope in "
                                      "fluidlite; set config.mode = 'nccl2' (or 'collective') for collective "
                                      "data-parallel training over MPI" % mode)
        if mode not in ("nccl2", "collective"):
            raise ValueError("DistributeTranspilerConfig.mode must be 'pserver', 'nccl2' or 'collective', got %r"
                             % (mode,))
        if mode == "collective" and self.config.collective_mode not in (None, "grad_allreduce"):
            raise NotImplementedError("DistributeTranspiler: collective_mode %r is not supported (grad_allreduce)"
                                      % (self.config.collective_mode,))
        if isinstance(trainers, str):
            endpoints = [e for e in trainers.split(",") if e]
            nranks = len(endpoints)
        else:
            nranks = int(trainers)
        rank, size = comm.init()
        if nranks != size:
            raise ValueError("DistributeTranspiler.transpile: %d trainers were given (trainers=%r) but MPI started %d "
                             "ranks: launch with mpiexec -n %d" % (nranks, trainers, size, nranks))
        if int(trainer_id) != rank:
            raise ValueError("DistributeTranspiler.transpile: trainer_id %d is not this process's MPI rank %d"
                             % (trainer_id, rank))
        program = program if program is not None else default_main_program()
        startup = startup_program if startup_program is not None else default_startup_program()
        self.origin_program = program.clone()
        self.startup_program = startup
        self._program = program
        if size > 1:
            self.buckets = collective.transpile(program, startup, size,
                                                fuse_grad_size_mb=self.config.fuse_grad_size_in_MB)

    def get_trainer_program(self, wait_port=True):
        if self.origin_program is None:
            raise RuntimeError("DistributeTranspiler: call transpile() first")
        return self._program

    def get_startup_program(self, endpoint=None, pserver_program=None, startup_program=None):
        return self.startup_program

    def get_pserver_program(self, endpoint):
        raise NotImplementedError("DistributeTranspiler.get_pserver_program: parameter-server training is out of "
                                  "scope in fluidlite")

    get_pserver_programs = get_pserver_program
