"""One process of ``python -m fluidlite.bench --nproc N`` (see ``fluidlite.bench.distributed``).

    mpiexec -n N python -m fluidlite.bench._rank MODEL OUT.json [--batch_size B] [--threads T] ...
    python -m fluidlite.bench._rank MODEL OUT.json --single ...      # the 1-process baseline, no ring, no rewrite

A rank joins the job (``comm.init``), builds the model at the per-rank batch, rewrites it with
``collective.transpile`` and times ``repeat`` repetitions of ``iterations`` steps (a barrier before each, so the
ranks start together). Besides the step time it reads ring 0's counters around each repetition: the comm stream's
busy time (the collectives, including waiting for the slowest rank to join them), the main thread's waits for it
(exposed communication) and the bytes allreduced. Rank 0 gathers every rank's figures and writes OUT.json.
"""
import argparse
import json
import statistics
import time

import numpy as np


def spread(values):
    """{"median", "min", "max", "all"} of a list of numbers."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "all": list(values)}


def time_repeats(step, warmup, repeat, iterations, barrier, counters=None):
    """Runs `warmup` steps, then `repeat` x `iterations` timed steps, `barrier()` before each repetition.
    Returns (ms per step of each repetition, per-repetition deltas of `counters()` (a dict of numbers) per step)."""
    for _ in range(warmup):
        step()
    ms, deltas = [], []
    for _ in range(repeat):
        barrier()
        c0 = counters() if counters else None
        t0 = time.perf_counter()
        for _ in range(iterations):
            step()
        dt = time.perf_counter() - t0
        ms.append(dt * 1e3 / iterations)
        if counters:
            c1 = counters()
            deltas.append({k: (c1[k] - c0[k]) / iterations for k in c0})
    return ms, deltas


def grad_bytes(program, names):
    """Bytes of the variables `names` of `program` (the gradients in the buckets)."""
    from fluidlite.distributed.collective import _nbytes
    block = program.global_block()
    return [_nbytes(block.var(n)) for n in names]


def _ring_counters():
    from fluidlite import core
    s = core.comm_ring_stats(0)
    return {"busy_ns": s["busy_ns"], "wait_ns": s["wait_ns"], "bytes": s["bytes"], "collectives": s["collectives"]}


def communication_figures(ms, deltas):
    """The JSON "comm" block from time_repeats' step times and ring-counter deltas (per step)."""
    comm_ms = [d["busy_ns"] / 1e6 for d in deltas]
    exposed_ms = [d["wait_ns"] / 1e6 for d in deltas]
    overlap = [min(1.0, max(0.0, 1.0 - e / c)) if c > 0 else 1.0 for c, e in zip(comm_ms, exposed_ms)]
    bytes_per_step = [d["bytes"] for d in deltas]
    return {"ms_per_step": spread(comm_ms), "exposed_ms_per_step": spread(exposed_ms), "overlap": spread(overlap),
            "exposed_share": spread([e / s for e, s in zip(exposed_ms, ms)]),
            "bytes_per_step": statistics.median(bytes_per_step),
            "collectives_per_step": statistics.median(d["collectives"] for d in deltas),
            "gb_per_s": spread([b / (c * 1e6) if c > 0 else 0.0 for b, c in zip(bytes_per_step, comm_ms)])}


def build_model(args):
    """(model module, its settings with the command line's overrides, the built model) for a rank: what the
    fluidlite and the DDP ranks build alike."""
    from fluidlite.bench import models
    mod = models.load(args.model)
    cfg = dict(mod.DEFAULTS)
    for key in ("batch_size", "iterations", "warmup", "repeat"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    np.random.seed(args.seed)
    return mod, cfg, mod.build(cfg["batch_size"], args.seed)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fluidlite.bench._rank")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--batch_size", type=int)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fuse_grad_size_mb", type=float)
    ap.add_argument("--single", action="store_true", help="one process, the program as built (the baseline)")
    ap.add_argument("--profile", action="store_true", help="rank 0: profile one more repetition, report it")
    ap.add_argument("--timeline", help="rank 0: the profiled repetition's Chrome trace")
    args = ap.parse_args(argv)

    import fluidlite as fluid
    from fluidlite import core
    from fluidlite.distributed import collective, comm

    rank, nranks = 0, 1
    if not args.single:
        rank, nranks = comm.init()
    if args.threads:
        core.set_num_threads(args.threads)
    mod, cfg, built = build_model(args)
    buckets = []
    if not args.single:
        buckets = collective.transpile(built.main, built.startup, nranks, fuse_grad_size_mb=args.fuse_grad_size_mb)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed, fetch = built.feed(), built.fetch_list

    def step():
        exe.run(built.main, feed=feed, fetch_list=fetch, scope=scope)

    barrier = comm.barrier if not args.single else (lambda: None)
    ms, deltas = time_repeats(step, cfg["warmup"], cfg["repeat"], cfg["iterations"], barrier,
                              None if args.single else _ring_counters)
    result = {"framework": "fluidlite", "model": args.model, "nranks": nranks, "batch_per_rank": cfg["batch_size"],
              "global_batch": cfg["batch_size"] * nranks, "threads": core.get_num_threads(),
              "iterations": cfg["iterations"], "warmup": cfg["warmup"], "repeat": cfg["repeat"],
              "ms_per_step": spread(ms)}
    if not args.single:
        sizes = [grad_bytes(built.main, b) for b in buckets]
        result["comm"] = communication_figures(ms, deltas)
        result["buckets"] = {"count": len(buckets), "bytes": [sum(s) for s in sizes],
                             "gradients": [len(b) for b in buckets],
                             "fuse_grad_size_mb": args.fuse_grad_size_mb if args.fuse_grad_size_mb is not None
                             else collective.DEFAULT_FUSE_GRAD_SIZE_MB}
        result["grad_bytes"] = sum(sum(s) for s in sizes)
    if args.profile or args.timeline:
        result["profile"] = _profile(step, cfg["iterations"], barrier, args.timeline, rank)
    if not args.single:
        # Each rank's comm stream time includes waiting for the last rank to join: the smallest over the ranks is
        # nearest to the transfer itself, the differences are the ranks' skew.
        per_rank = comm.allgather_object((statistics.median(ms), result["comm"]["ms_per_step"]["median"]),
                                         "the bench's figures")
        result["rank_ms_per_step"] = [m for m, _ in per_rank]
        result["rank_comm_ms_per_step"] = [c for _, c in per_rank]
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


def _profile(step, iterations, barrier, timeline, rank):
    """Every rank runs `iterations` more steps (the collectives need them all); rank 0 profiles them."""
    from fluidlite import profiler
    barrier()
    if rank != 0:
        for _ in range(iterations):
            step()
        return None
    profiler.start_profiler("CPU")
    for _ in range(iterations):
        step()
    profiler.stop_profiler(profile_path=None, print_report=False)
    if timeline:
        profiler.export_chrome_trace(timeline)
    return {"report": profiler.report(), "communication": profiler.communication_summary(), "timeline": timeline,
            "advice": profiler.advisor.format_findings(profiler.advise(print_report=False))}


if __name__ == "__main__":
    raise SystemExit(main())

