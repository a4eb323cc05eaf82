"""DataLoader overlap: steps/s of the MLP training loop fed by a Python generator, synchronously vs
through ``fluid.io.DataLoader`` (whose background thread prepares the next batch while the executor runs).

    python benchmarks/dataloader_overlap.py [--batch_size 64] [--steps 40] [--repeat 5] [--threads N]

The generator costs about as much as a training step (``--work`` times the measured step time): it spins
in pure Python (holding the GIL, like decoding or augmenting in Python) and then builds the batch with
numpy. The synchronous loop calls the generator and ``exe.run(feed=...)`` in turn; the DataLoader loop runs
``for data in loader(): exe.run(feed=data)``. Both run the same steps on the same model, alternating, and
the figures are the median (min-max) over the repeats. Issue-13 goal: ratio >= 1.6.
"""
import argparse
import statistics
import sys
import time

import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench import machine_info, machine_line
from fluidlite.bench.models import mlp

GOAL = 1.6
KINDS = ("io", "numpy", "python")


def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3]) + " (1, 5, 15 min; other processes share the cores)"
    except OSError:
        return "unknown"


def _spin(n):
    acc = 0
    for i in range(n):
        acc += i * i
    return acc


def _augment(images, rounds):
    # numpy work on the batch (normalise, clip, transcendental): numpy releases the GIL inside these loops
    out = images
    for _ in range(rounds):
        out = np.tanh(out * 1.01 - 0.005)
    return out


def make_reader(steps, batch_size, work, seed, kind):
    """A batch generator whose per-batch cost is `work` units of `kind` ('python': a pure-Python loop that
    holds the GIL; 'numpy': numpy passes over the batch)."""
    rng = np.random.RandomState(seed)
    images = rng.rand(batch_size, mlp.SIZES[0])  # float64: the loader casts to the variable's float32
    labels = rng.randint(0, mlp.SIZES[-1], size=(batch_size, 1))

    def reader():
        for i in range(steps):
            if kind == "python":
                _spin(work)
                yield images * (1.0 + 1e-3 * i), labels
            elif kind == "io":
                time.sleep(work * 1e-4)  # waiting on a file or socket: no CPU, no GIL
                yield images * (1.0 + 1e-3 * i), labels
            else:
                yield _augment(images, work), labels
    return reader


def _per_batch_s(reader, steps):
    t0 = time.perf_counter()
    for _ in reader():
        pass
    return (time.perf_counter() - t0) / steps


def calibrate(target_s, batch_size, seed, kind):
    """The work units that make one batch cost about `target_s` (two rounds of proportional correction)."""
    work = {"python": 2000, "numpy": 2, "io": 10}[kind]
    for _ in range(3):
        cost = _per_batch_s(make_reader(10, batch_size, work, seed, kind), 10)
        work = max(1, int(round(work * target_s / cost)))
    return work


def run_sync(exe, prog, scope, loss, reader):
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for img, label in reader():
        exe.run(prog, feed={"img": img.astype("float32"), "label": label.astype("int64")}, fetch_list=[loss],
                scope=scope)
        n += 1
    wall = time.perf_counter() - t0
    return n / wall, (time.process_time() - c0) / wall


def run_loader(exe, prog, scope, loss, reader, feed_list, capacity):
    loader = fluid.io.DataLoader.from_generator(feed_list=feed_list, capacity=capacity, iterable=True)
    loader.set_batch_generator(reader, places=[fluid.CPUPlace()])
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for data in loader():
        exe.run(prog, feed=data, fetch_list=[loss], scope=scope)
        n += 1
    wall = time.perf_counter() - t0
    return n / wall, (time.process_time() - c0) / wall


def measure(batch_size=64, steps=40, repeat=5, threads=None, work=1.0, capacity=4, seed=1, kind="python"):
    if threads is not None:
        core.set_num_threads(threads)
    built = mlp.build(batch_size, seed)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    loss = built.fetch_list[0]
    block = built.main.global_block()
    feed_list = [block.var("img"), block.var("label")]
    feed = built.feed()
    for _ in range(5):
        exe.run(built.main, feed=feed, fetch_list=[loss], scope=scope)
    step_s = []
    for _ in range(max(3, repeat)):
        t0 = time.perf_counter()
        for _ in range(steps):
            exe.run(built.main, feed=feed, fetch_list=[loss], scope=scope)
        step_s.append((time.perf_counter() - t0) / steps)
    step = statistics.median(step_s)
    units = calibrate(work * step, batch_size, seed, kind)
    reader = make_reader(steps, batch_size, units, seed, kind)
    gen = _per_batch_s(reader, steps)
    sync, loader, sync_cpu, loader_cpu = [], [], [], []
    run_loader(exe, built.main, scope, loss, make_reader(3, batch_size, units, seed, kind), feed_list, capacity)
    for _ in range(repeat):
        rate, cpu = run_sync(exe, built.main, scope, loss, reader)
        sync.append(rate)
        sync_cpu.append(cpu)
        rate, cpu = run_loader(exe, built.main, scope, loss, reader, feed_list, capacity)
        loader.append(rate)
        loader_cpu.append(cpu)
    ratios = [b / a for a, b in zip(sync, loader)]
    return {"kind": kind, "threads": core.get_num_threads(), "batch_size": batch_size, "steps": steps, "repeat": repeat,
            "step_ms": step * 1e3, "generator_ms": gen * 1e3, "sync": sync, "loader": loader, "ratios": ratios,
            "sync_cpu": sync_cpu, "loader_cpu": loader_cpu}


def _spread(xs, fmt="%.1f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def format_result(r):
    lines = ["== generator kind: %s" % r["kind"],
             "model       mlp (batch %d), %d steps per loop, %d repeats, %d executor threads"
             % (r["batch_size"], r["steps"], r["repeat"], r["threads"]),
             "step        %.2f ms (fixed feed)   generator (%s) %.2f ms per batch"
             % (r["step_ms"], r["kind"], r["generator_ms"]),
             "sync        %s steps/s   CPU use %s cores" % (_spread(r["sync"]), _spread(r["sync_cpu"], "%.2f")),
             "dataloader  %s steps/s   CPU use %s cores" % (_spread(r["loader"]), _spread(r["loader_cpu"], "%.2f")),
             "ratio       %s" % _spread(r["ratios"], "%.2f")]
    med = statistics.median(r["ratios"])
    lines.append("goal        DataLoader >= %.1fx sync steps/s (%s generator): %.2fx  %s"
                 % (GOAL, r["kind"], med, "PASS" if med >= GOAL else "MISS"))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="executor threads (default: fluidlite's)")
    ap.add_argument("--work", type=float, default=1.0, help="generator cost per batch, in step times")
    ap.add_argument("--capacity", type=int, default=4)
    ap.add_argument("--kind", default="io,numpy,python",
                    help="comma-separated generator kinds: 'io' (a sleep standing for file/network waits: no "
                         "CPU), 'numpy' (numpy passes over the batch; they release the GIL), 'python' (a "
                         "pure-Python loop holding the GIL)")
    ap.add_argument("--switch_interval", type=float, default=None,
                    help="sys.setswitchinterval for the run (seconds; Python's default is 0.005)")
    args = ap.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    kinds = args.kind.split(",")
    for kind in kinds:
        if kind not in KINDS:
            ap.error("--kind: %r is not one of %s" % (kind, ", ".join(KINDS)))
    print(machine_line(machine_info()))
    print("load average %s" % _loadavg())
    for kind in kinds:
        print()
        print(format_result(measure(args.batch_size, args.steps, args.repeat, args.threads, args.work,
                                    args.capacity, kind=kind)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
