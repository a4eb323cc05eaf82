"""GEMM throughput: fluidlite `mul` vs numpy.matmul vs torch.mm, float32, in GFLOP/s, same process.

    python benchmarks/gemm.py [--n 1024] [--repeat 15] [--runs 5] [--threads N]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.

fluidlite's main figure runs a 1-op program whose inputs already live in the scope and whose output is
not fetched (the op itself, as torch.mm is timed); a second line adds feeding both inputs and fetching
the result through exe.run. Results are checked against numpy before timing. Every figure is the
median over --repeat repetitions (each the mean of --runs calls) after warm-up.
Goal (issue 2): fluidlite >= 0.9x torch.mm.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench import machine_info, seconds_per_call

GOAL_RATIO = 0.9


def fluidlite_runners(a, b, ref):
    """(op-only step, feed+fetch step) for Out = mul(X, Y)."""
    n, k = a.shape
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        x = block.create_var(name="gemm_x", shape=list(a.shape), dtype="float32", persistable=True)
        y = block.create_var(name="gemm_y", shape=list(b.shape), dtype="float32", persistable=True)
        out = fluid.layers.mul(x, y)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    scope = fluid.Scope()
    scope.var("gemm_x").get_tensor().set(a, place)
    scope.var("gemm_y").get_tensor().set(b, place)
    got, = exe.run(main, fetch_list=[out], scope=scope)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-2, err_msg="fluidlite mul disagrees with numpy")

    feed_main, feed_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(feed_main, feed_startup):
        fx = fluid.layers.data(name="x", shape=list(a.shape), dtype="float32", append_batch_size=False)
        fy = fluid.layers.data(name="y", shape=list(b.shape), dtype="float32", append_batch_size=False)
        fout = fluid.layers.mul(fx, fy)
    feed_scope = fluid.Scope()
    feed = {"x": a, "y": b}

    def op_only():
        exe.run(main, scope=scope)

    def feed_fetch():
        return exe.run(feed_main, feed=feed, fetch_list=[fout], scope=feed_scope)
    return op_only, feed_fetch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1024, help="M = N = K")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="threads for fluidlite's BLAS and torch")
    args = ap.parse_args()
    if args.threads:
        core.set_num_threads(args.threads)
    threads = core.get_num_threads()

    m = machine_info()
    print("machine: %s, %d cores, numpy %s, fluidlite %s, BLAS %s (%s)" % (
        m["cpu_model"], m["cpu_usable"], m["numpy"], m["fluidlite"], m["blas"].get("config", "?"),
        m["git_commit"] or "no git"))
    n = args.n
    flop = 2.0 * n * n * n
    print("%dx%d @ %dx%d float32 (%.2f GFLOP per call), fluidlite threads %d; median of %d x %d calls\n"
          % (n, n, n, n, flop / 1e9, threads, args.repeat, args.runs))

    rs = np.random.RandomState(0)
    a = rs.rand(n, n).astype("float32")
    b = rs.rand(n, n).astype("float32")
    ref = np.matmul(a, b)

    rows = []  # (name, seconds median, min, max)
    if core.has_op("mul"):
        op_only, feed_fetch = fluidlite_runners(a, b, ref)
        rows.append(("fluidlite mul", op_only))
        rows.append(("fluidlite mul +feed/fetch", feed_fetch))
    else:
        print("fluidlite mul: skipped: this build has no 'mul' op (fluidlite.core.has_op('mul') is False)")
    rows.append(("numpy.matmul", lambda: np.matmul(a, b)))
    try:
        import torch
        if args.threads:
            torch.set_num_threads(args.threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        np.testing.assert_allclose(torch.mm(ta, tb).numpy(), ref, rtol=1e-3, atol=1e-2)
        rows.append(("torch.mm %s (%d threads)" % (torch.__version__, torch.get_num_threads()),
                     lambda: torch.mm(ta, tb)))
    except ImportError:
        print("torch.mm: skipped: not installed")

    gflops = {}
    print("%-34s %10s %10s   %s" % ("", "GFLOP/s", "ms/call", "min-max GFLOP/s"))
    for name, fn in rows:
        med, lo, hi = seconds_per_call(fn, args.runs, args.repeat, warmup=2)
        gflops[name] = flop / med / 1e9
        print("%-34s %10.1f %10.2f   %.1f-%.1f" % (name, flop / med / 1e9, med * 1e3, flop / hi / 1e9,
                                                   flop / lo / 1e9))

    fl = gflops.get("fluidlite mul")
    torch_name = next((k for k in gflops if k.startswith("torch.mm")), None)
    print()
    if fl is not None:
        print("ratio fluidlite / numpy.matmul = %.2fx" % (fl / gflops["numpy.matmul"]))
    if fl is not None and torch_name:
        ratio = fl / gflops[torch_name]
        print("goal: >= %.1fx torch.mm: %.2fx  %s" % (GOAL_RATIO, ratio, "PASS" if ratio >= GOAL_RATIO else "MISS"))
    else:
        print("goal: >= %.1fx torch.mm: not measured (%s)" % (
            GOAL_RATIO, "no fluidlite mul op" if fl is None else "torch not installed"))


if __name__ == "__main__":
    main()
