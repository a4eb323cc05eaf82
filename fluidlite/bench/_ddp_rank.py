"""One rank of PyTorch DDP (gloo) for ``python -m fluidlite.bench --nproc N --compare torch``.

    mpiexec -n N python -m fluidlite.bench._ddp_rank MODEL OUT.json STORE_FILE [--batch_size B] [--threads T] ...

The rank and world size come from the variables mpiexec (hydra) sets, PMI_RANK and PMI_SIZE; the ranks meet through
torch's own file store (STORE_FILE, a path none of them has created). Each rank builds the fluidlite model at the
per-rank batch only to take its initial weights and batch, makes the model's torch reference from them
(``reference_torch``, as ``--compare torch`` does), wraps its network in DistributedDataParallel (default bucket
size) and times the same steps as ``_rank``. Rank 0 writes OUT.json.
"""
import argparse
import json
import os


def ddp_wrap(ref, ddp):
    """Makes `ref` (a bench torch reference) run its network through `ddp` (a DistributedDataParallel factory):
    references with a ``model`` module (TorchDense, TorchClassifier) get it wrapped; those with a ``forward()``
    over several modules (the LSTM classifier) get one module holding them, whose forward is theirs. Returns None
    when the reference has neither (the model is then skipped)."""
    import torch
    if isinstance(getattr(ref, "model", None), torch.nn.Module):
        ref.model = ddp(ref.model)
        return ref
    forward = getattr(ref, "forward", None)
    parts = [m for m in vars(ref).values() if isinstance(m, torch.nn.Module) and any(
        p.requires_grad for p in m.parameters())]
    if not callable(forward) or not parts:
        return None

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = torch.nn.ModuleList(parts)

        def forward(self):
            return forward()

    wrapped = ddp(Net())
    ref.forward = wrapped
    return ref


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fluidlite.bench._ddp_rank")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("store")
    ap.add_argument("--batch_size", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    import torch.distributed as dist

    import fluidlite as fluid
    from fluidlite.bench import reference
    from fluidlite.bench._rank import build_model, spread, time_repeats

    rank, size = int(os.environ.get("PMI_RANK", "0")), int(os.environ.get("PMI_SIZE", "1"))
    torch.set_num_threads(args.threads)
    store = dist.FileStore(args.store, size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
    mod, cfg, built = build_model(args)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(built.startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in built.main.global_block().all_parameters()}
    ref = ddp_wrap(mod.reference_torch(params, reference.plain_feed(built.feed())),
                   lambda m: torch.nn.parallel.DistributedDataParallel(m))
    result = {"framework": "torch-ddp", "model": args.model, "nranks": size, "batch_per_rank": cfg["batch_size"],
              "global_batch": cfg["batch_size"] * size, "threads": torch.get_num_threads(),
              "torch": torch.__version__, "backend": "gloo"}
    if ref is None:
        result["skipped"] = "its torch reference has no module to wrap in DistributedDataParallel"
    else:
        ms, _ = time_repeats(ref.step, cfg["warmup"], cfg["repeat"], cfg["iterations"], dist.barrier)
        result.update(iterations=cfg["iterations"], warmup=cfg["warmup"], repeat=cfg["repeat"],
                      ms_per_step=spread(ms))
    dist.barrier()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
