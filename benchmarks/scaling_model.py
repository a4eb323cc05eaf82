"""The scaling model of docs/distributed.md: step time on P machines = compute + exposed communication.

    python benchmarks/scaling_model.py --measure     # measure here (needs mpiexec), write scaling_inputs.json
    python benchmarks/scaling_model.py               # the tables from that file (markdown, stdout)
    python benchmarks/scaling_model.py --write-doc   # ... and put them into docs/distributed.md (between the markers)

Measured here (--measure):
- the allreduce: c_allreduce_sum of 4 B .. 64 MB (float32) on 2 ranks through fluidlite's comm layer (the comm
  stream's time per collective, ring 0's counters), fitted as t = 2 a + n / B (the ring model at P = 2): a is the
  per-message latency, B the bandwidth of this machine's transport (MPICH's shared memory);
- each model's compute: the 1-process step time at its bench batch with every core (one machine = one rank), and its
  gradient bytes (the parameters the rewrite allreduces);
- each model's overlap on 2 ranks (``python -m fluidlite.bench --nproc 2``: 1 - exposed / communication).
Assumed (constants below): the network's latency per message and the share of the link rate MPI reaches.

Ring allreduce on P ranks: each rank sends and receives 2 (P - 1) / P of the gradient bytes in 2 (P - 1) steps, each
paying the latency: T(P) = 2 (P - 1) a + 2 (P - 1) / P x bytes / B. A step is compute + (1 - overlap) x T(P); the
efficiency is compute / step (1.0: P machines train P times as fast as one).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INPUTS = os.path.join(ROOT, "benchmarks", "scaling_inputs.json")
DOC = os.path.join(ROOT, "docs", "distributed.md")
BEGIN, END = "<!-- scaling_model.py: begin -->", "<!-- scaling_model.py: end -->"

MODELS = ("mlp", "lenet", "lstm", "resnet_small", "vgg_small", "transformer_encoder")
SIZES = [4 * 4 ** k for k in range(13)]  # 4 B .. 64 MB
NODES = (8, 64, 256)
NETWORKS = (("25 Gbit/s", 25e9 / 8), ("100 Gbit/s", 100e9 / 8))  # bytes per second
# Assumed: MPI over TCP on Ethernet reaches ~90 % of the link rate and pays ~20 us per message (kernel stack and one
# switch hop); RDMA fabrics are faster on both counts. Both enter the table as stated here.
ASSUMED_LINK_EFFICIENCY = 0.9
ASSUMED_LATENCY_S = 20e-6


def ring_allreduce_s(nbytes, p, latency_s, bandwidth):
    """Seconds of a ring allreduce of `nbytes` per rank over `p` ranks."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * latency_s + 2 * (p - 1) / p * nbytes / bandwidth


def efficiency(compute_s, comm_s, overlap):
    return compute_s / (compute_s + (1.0 - overlap) * comm_s)


# ---- measuring (--measure)

def _allreduce_rank(out):
    """Under mpiexec -n 2: the comm stream's time per c_allreduce_sum for each size; rank 0 writes `out`."""
    import numpy as np

    import fluidlite as fluid
    from fluidlite import core
    from fluidlite.distributed import comm
    rank, size = comm.init()
    exe, place = fluid.Executor(fluid.CPUPlace()), fluid.CPUPlace()
    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        prog = fluid.Program()
        block = prog.global_block()
        block.create_var(name="x", shape=[n], dtype="float32", persistable=True)
        block.append_op(type="c_allreduce_sum", inputs={"X": ["x"]}, outputs={"Out": ["x"]},
                        attrs={"ring_id": 0, "use_calc_stream": True})
        scope = fluid.Scope()
        scope.var("x").get_tensor().set(np.zeros(n, dtype="float32"), place)
        reps = max(5, min(300, int(2e8 // max(nbytes, 1 << 16))))
        for _ in range(3):
            exe.run(prog, scope=scope)
        comm.barrier()
        s0, t0 = core.comm_ring_stats(0), time.perf_counter()
        for _ in range(reps):
            exe.run(prog, scope=scope)
        wall, s1 = time.perf_counter() - t0, core.comm_ring_stats(0)
        calls = s1["collectives"] - s0["collectives"]
        rows.append({"bytes": nbytes, "reps": reps, "stream_us": (s1["busy_ns"] - s0["busy_ns"]) / calls / 1e3,
                     "wall_us": wall / reps * 1e6})
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"ranks": size, "rows": rows}, f)


def _fit(rows):
    """Least squares t = c + n / B over the rows; returns (a = c / 2, B) as the ring model at P = 2 reads them."""
    xs = [r["bytes"] for r in rows]
    ys = [r["stream_us"] * 1e-6 for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    c = my - slope * mx
    small = min(r["stream_us"] for r in rows) * 1e-6  # the intercept of a fit over 7 decades is noisy: the floor
    return max(small, c) / 2, 1.0 / slope


def _run_json(cmd, path, timeout=1800):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    with open(path) as f:
        return json.load(f)


def _grad_bytes(name):
    from fluidlite.bench import models
    from fluidlite.distributed import collective
    built = models.load(name).build(models.load(name).DEFAULTS["batch_size"], 0)
    return sum(collective._nbytes(p) for p in built.main.global_block().all_parameters() if p.trainable)


def measure(models_=MODELS, overlap_models=("mlp", "lenet", "lstm", "resnet_small")):
    from fluidlite.bench import machine_info
    from fluidlite.bench.distributed import find_mpiexec
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise SystemExit("mpiexec not found: pip install 'fluidlite[mpi]'")
    cores = len(os.sched_getaffinity(0))
    doc = {"measured": time.strftime("%Y-%m-%d"), "machine": machine_info(), "cores": cores, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "allreduce.json")
        doc["allreduce"] = _run_json([mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__),
                                      "--allreduce-rank", path], path)
        for name in models_:
            path = os.path.join(tmp, name + ".json")
            res = _run_json([sys.executable, "-m", "fluidlite.bench", "--model", name, "--threads", str(cores),
                             "--json", path, "--no_progress"], path)["results"][0]
            entry = {"batch": res["batch_size"], "threads": res["threads"], "compute_ms": res["ms_per_step"],
                     "grad_bytes": _grad_bytes(name)}
            if name in overlap_models:
                path = os.path.join(tmp, name + ".nproc.json")
                d = _run_json([sys.executable, "-m", "fluidlite.bench", "--model", name, "--nproc", "2",
                               "--threads", "1", "--json", path, "--no_progress"], path)["results"][0]
                entry["overlap_2_ranks"] = d["ranks"]["comm"]["overlap"]["median"]
                entry["scaling_2_ranks"] = d["scaling"]
            doc["models"][name] = entry
            print("measured %s: %s" % (name, entry), file=sys.stderr)
    with open(INPUTS, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return doc


# ---- the tables

def tables(doc):
    a_local, b_local = _fit(doc["allreduce"]["rows"])
    lines = ["Measured here (%s, %s, %d cores; `python benchmarks/scaling_model.py --measure`):" % (
        doc["measured"], doc["machine"]["cpu_model"], doc["cores"]), "",
        "| allreduce bytes | " + " | ".join(_bytes(r["bytes"]) for r in doc["allreduce"]["rows"]) + " |",
        "|---|" + "---|" * len(doc["allreduce"]["rows"]),
        "| us (comm stream, 2 ranks) | " + " | ".join("%.0f" % r["stream_us"] if r["stream_us"] >= 10 else
                                                     "%.1f" % r["stream_us"] for r in doc["allreduce"]["rows"]) + " |",
        "",
        "Fit t = 2a + n/B on this machine (MPICH shared memory between 2 processes): a = %.1f us, B = %.2f GB/s. "
        "The network rows below do not use them: they assume a = %.0f us per message and %.0f %% of the link rate."
        % (a_local * 1e6, b_local / 1e9, ASSUMED_LATENCY_S * 1e6, 100 * ASSUMED_LINK_EFFICIENCY), "",
        "| model | batch/rank | compute ms (measured) | gradients MB | overlap (measured, 2 ranks) | network | "
        + " | ".join("P=%d: allreduce ms, efficiency" % p for p in NODES) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(NODES)]
    for name, m in doc["models"].items():
        compute = m["compute_ms"]["median"] / 1e3
        f = m.get("overlap_2_ranks")
        for net, rate in NETWORKS:
            bw = rate * ASSUMED_LINK_EFFICIENCY
            cells = []
            for p in NODES:
                t = ring_allreduce_s(m["grad_bytes"], p, ASSUMED_LATENCY_S, bw)
                e0, e1 = efficiency(compute, t, f or 0.0), efficiency(compute, t, 1.0) if t < compute else compute / t
                cells.append("%.2f ms: %.0f %% (full overlap %.0f %%)" % (t * 1e3, 100 * e0, 100 * min(1.0, e1)))
            lines.append("| %s | %d | %.1f (%.1f - %.1f) | %.2f | %s | %s | %s |" % (
                name, m["batch"], m["compute_ms"]["median"], m["compute_ms"]["min"], m["compute_ms"]["max"],
                m["grad_bytes"] / 1e6, "%.2f" % f if f is not None else "0 (assumed)", net, " | ".join(cells)))
    lines += ["", "Efficiency = compute / (compute + (1 - overlap) x allreduce), the overlap measured here with the "
              "default buckets; \"full overlap\": the allreduce wholly hidden behind compute (compute / max(compute, "
              "allreduce)), the bound smaller buckets approach."]
    return "\n".join(lines) + "\n"


def _bytes(n):
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return "%d %s" % (n // size, unit)
    return "%d B" % n


def write_doc(text):
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit("%s has no %s ... %s markers" % (DOC, BEGIN, END))
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true", help="measure here and rewrite %s" % INPUTS)
    ap.add_argument("--write-doc", action="store_true", help="put the tables into docs/distributed.md")
    ap.add_argument("--allreduce-rank", metavar="OUT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.allreduce_rank:
        _allreduce_rank(args.allreduce_rank)
        return 0
    if args.measure:
        doc = measure()
    else:
        with open(INPUTS) as f:
            doc = json.load(f)
    text = tables(doc)
    sys.stdout.write(text)
    if args.write_doc:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
