"""One rank of a data-parallel training run, or the single-process run it must match (tests/test_distributed.py,
tests/test_distributed_faults.py, tests/test_distributed_checkpoint.py).

    python tests/distributed/train_worker.py MODEL STEPS GLOBAL_BATCH OUT.npz [--fleet] [options]

Builds MODEL (a fluidlite.bench model: mlp, lenet, lstm) for the whole GLOBAL_BATCH, then trains STEPS steps on
fixed batches. With --fleet (under mpiexec -n P) each rank feeds its contiguous 1/P of every batch through
fleet.distributed_optimizer's rewrite; without it one process feeds all of it. Rank 0 (or the single process)
writes the parameters to OUT.npz.

Options for the fault and checkpoint tests: --role paddlecloud (PaddleCloudRoleMaker instead of
MPISymetricRoleMaker), --optimizer momentum|adam (instead of the model's SGD, same learning rate), --hidden H (mlp's
hidden sizes), --load DIR / --save DIR (fleet.load_checkpoint before / fleet.save_checkpoint after training),
--first_step K (train on batches K.. of the fixed sequence, as a resumed job does), --fault kill|raise|exit with
--fault_rank R --fault_step S (rank R SIGKILLs itself, raises, or sys.exit(0)s before step S; it prints
"fault: rank R pid P at T" first), --catch (a failed step is caught, printed, and the script exits normally with
status 3).
"""
import argparse
import importlib
import os
import signal
import sys
import time

import numpy as np

import fluidlite as fluid
from fluidlite.incubate.fleet.base import role_maker
from fluidlite.incubate.fleet.collective import DistributedStrategy, TrainStatus, fleet

# The axis of each fed variable that holds the batch (lstm's words are time-major).
BATCH_AXIS = {"lstm": {"words": 1}}


def batches(feed, steps, seed):
    """`steps` batches shaped like `feed`: each a fresh draw (ints below the feed's max, floats normal)."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(steps):
        b = {}
        for k, v in feed.items():
            if v.dtype.kind == "i":
                b[k] = rng.randint(0, int(v.max()) + 1, size=v.shape).astype(v.dtype)
            else:
                b[k] = rng.standard_normal(v.shape).astype(v.dtype)
        out.append(b)
    return out


def shard(feed, model, rank, nranks):
    out = {}
    for k, v in feed.items():
        axis = BATCH_AXIS.get(model, {}).get(k, 0)
        n = v.shape[axis] // nranks
        out[k] = np.take(v, range(rank * n, (rank + 1) * n), axis=axis)
    return out


def fault(kind, rank):
    print("fault: rank %d pid %d at %.3f" % (rank, os.getpid(), time.time()), flush=True)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "raise":
        raise ValueError("an injected fault on rank %d" % rank)
    sys.exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("steps", type=int)
    ap.add_argument("batch", type=int)
    ap.add_argument("out")
    ap.add_argument("--fleet", action="store_true")
    ap.add_argument("--fuse_mb", type=float, default=None)
    ap.add_argument("--no_fuse", action="store_true")
    ap.add_argument("--transpiler", action="store_true", help="fluid.DistributeTranspiler (nccl2 mode), not fleet")
    ap.add_argument("--role", choices=("mpi", "paddlecloud"), default="mpi")
    ap.add_argument("--optimizer", choices=("sgd", "momentum", "adam"), default="sgd")
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--load", default=None)
    ap.add_argument("--save", default=None)
    ap.add_argument("--first_step", type=int, default=0)
    ap.add_argument("--fault", choices=("kill", "raise", "exit"), default=None)
    ap.add_argument("--fault_rank", type=int, default=1)
    ap.add_argument("--fault_step", type=int, default=3)
    ap.add_argument("--catch", action="store_true")
    args = ap.parse_args()

    mod = importlib.import_module("fluidlite.bench.models." + args.model)
    if args.hidden is not None:
        mod.SIZES = (mod.SIZES[0], args.hidden, args.hidden, mod.SIZES[-1])
    rank, nranks = 0, 1
    strategy = None
    if args.fleet:
        paddlecloud = args.role == "paddlecloud"
        fleet.init(role_maker.PaddleCloudRoleMaker() if paddlecloud else role_maker.MPISymetricRoleMaker())
        rank, nranks = fleet.worker_index(), fleet.worker_num()
        strategy = DistributedStrategy()
        strategy.fuse_all_reduce_ops = not args.no_fuse
        strategy.fuse_grad_size_in_MB = args.fuse_mb
    real_minimize = fluid.optimizer.Optimizer.minimize

    def minimize(self, loss, *a, **kw):  # the bench model's optimizer: replaced (--optimizer), wrapped by fleet
        fluid.optimizer.Optimizer.minimize = real_minimize
        try:
            if args.optimizer == "momentum":
                self = fluid.optimizer.Momentum(learning_rate=self._learning_rate, momentum=0.9)
            elif args.optimizer == "adam":
                self = fluid.optimizer.Adam(learning_rate=self._learning_rate)
            if args.fleet:
                return fleet.distributed_optimizer(self, strategy).minimize(loss, *a, **kw)
            return self.minimize(loss, *a, **kw)
        finally:
            fluid.optimizer.Optimizer.minimize = minimize
    fluid.optimizer.Optimizer.minimize = minimize
    built = mod.build(args.batch, 7)
    main_prog = fleet.main_program if args.fleet else built.main
    if args.transpiler:
        from fluidlite.distributed import comm
        rank, nranks = comm.init()
        config = fluid.DistributeTranspilerConfig()
        config.mode = "nccl2"
        t = fluid.DistributeTranspiler(config=config)
        t.transpile(rank, program=built.main, startup_program=built.startup,
                    trainers=",".join("127.0.0.1:%d" % (6170 + r) for r in range(nranks)),
                    current_endpoint="127.0.0.1:%d" % (6170 + rank))
        main_prog = t.get_trainer_program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(built.startup)
        if args.load:
            fleet.load_checkpoint(exe, args.load, rank, TrainStatus(), main_program=main_prog)
        try:
            for step, b in enumerate(batches(built.feed(), args.first_step + args.steps, 11)[args.first_step:]):
                if args.fault and rank == args.fault_rank and step == args.fault_step:
                    fault(args.fault, rank)
                exe.run(main_prog, feed=shard(b, args.model, rank, nranks), fetch_list=built.fetch_list)
        except fluid.core.EnforceNotMet as e:
            if not args.catch:
                raise
            print("caught on rank %d: %s" % (rank, e), flush=True)  # then a normal exit: MPI_Finalize must return
            return 3
        if args.save:
            fleet.save_checkpoint(exe, args.save, rank, TrainStatus(args.first_step + args.steps - 1),
                                  main_program=main_prog)
        if rank == 0:
            params = {p.name: np.array(scope.find_var(p.name).get_tensor())
                      for p in built.main.global_block().all_parameters()}
            np.savez(args.out, **params)
    if args.fleet:
        fleet.barrier_worker()
    elif args.transpiler:
        comm.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
