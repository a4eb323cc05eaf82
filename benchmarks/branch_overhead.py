"""What a branch costs: a conditional_block running a one-op block, skipping it, a whole layers.cond, and IfElse's
row routing, against the same work in a flat block.

    python benchmarks/branch_overhead.py [--ops 1000] [--size 16] [--repeat 15] [--runs 200]

with fluidlite installed (pip install -e .); for an in-place build prefix PYTHONPATH=. from the repo root.

Chains of OPS steps on a [SIZE] float32 tensor, one exe.run per sample (feed, fetch the last output):
- flat: OPS chained `scale` ops (benchmarks/op_overhead.py's chain);
- taken / skipped: OPS conditional blocks (is_scalar_condition on one fed bool), each block one `scale` op writing
  the next outer variable; with the condition true every block runs, with it false none does (the chain's values
  are then the previous run's: only the time is of interest);
- cond: OPS chained layers.cond(p, scale, scale): two conditional blocks (one runs), logical_not, cast, the
  branch's assign to the enclosing block and select_input, per step.
Per-step figures subtract the fixed cost of a 1-step program of the same kind. Then IfElse on a [ROWS, WIDTH]
batch, an fc in each branch, against the same two fcs in a flat block fed the rows already split.
Every figure is the median over --repeat repetitions (each the mean of --runs calls) after warm-up; the cases are
interleaved (each repetition times every case once), so a busy machine slows them alike.
"""
import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench import machine_info
from fluidlite.bench.models.overhead import BIAS, SCALE, build_chain
from fluidlite.layers.branches import ConditionalBlock

L = fluid.layers


def build_blocks(num_ops, size):
    """num_ops conditional blocks on the bool `p`, block i computing h[i+1] = scale(h[i]) into an outer variable."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h = L.data(name="x", shape=[size], dtype="float32", append_batch_size=False)
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        block = main.global_block()
        for i in range(num_ops):
            nxt = block.create_var(name="h%d" % i, dtype="float32", shape=[size])
            with ConditionalBlock([p], is_scalar_condition=True).block():
                main.current_block().append_op(type="scale", inputs={"X": [h]}, outputs={"Out": [nxt]},
                                               attrs={"scale": SCALE, "bias": BIAS})
            h = nxt
    return main, startup, h


def build_conds(num_ops, size):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h = L.data(name="x", shape=[size], dtype="float32", append_batch_size=False)
        p = L.data(name="p", shape=[1], dtype="bool", append_batch_size=False)
        for _ in range(num_ops):
            h = L.cond(p, lambda h=h: L.scale(h, scale=SCALE, bias=BIAS), lambda h=h: L.scale(h, scale=-SCALE))
    return main, startup, h


def runner(build, num_ops, size, feed, prime=None):
    """One exe.run of the built program; `prime`: a feed run once first (the skipped blocks' outputs then hold
    that run's values, so the fetch finds them)."""
    main, startup, out = build(num_ops, size)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    fetch = [out]
    if prime is not None:
        exe.run(main, feed=prime, fetch_list=fetch, scope=scope)
    return lambda: exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


def ifelse_runners(rows, width, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(rows, width).astype("float32")
    mask = rng.rand(rows, 1) < 0.5
    exe = fluid.Executor(fluid.CPUPlace())

    def fc(v, name):
        return L.fc(v, width, act="tanh", param_attr=fluid.ParamAttr(name=name), bias_attr=False)

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = L.data(name="x", shape=[-1, width], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        ie = L.IfElse(c)
        with ie.true_block():
            ie.output(fc(ie.input(xv), "wt"))
        with ie.false_block():
            ie.output(fc(ie.input(xv), "wf"))
        out, = ie()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    flat, fstartup = fluid.Program(), fluid.Program()
    with fluid.program_guard(flat, fstartup):
        xt = L.data(name="xt", shape=[-1, width], dtype="float32", append_batch_size=False)
        xf = L.data(name="xf", shape=[-1, width], dtype="float32", append_batch_size=False)
        fout = L.concat([fc(xt, "wt"), fc(xf, "wf")], axis=0)
    fscope = fluid.Scope()
    exe.run(fstartup, scope=fscope)
    for n in ("wt", "wf"):
        fscope.var(n).get_tensor().set(np.array(scope.find_var(n).get_tensor()), fluid.CPUPlace())
    sel = mask.reshape(-1)
    got = exe.run(main, feed={"x": x, "c": mask}, fetch_list=[out], scope=scope)[0]
    ref = exe.run(flat, feed={"xt": x[sel], "xf": x[~sel]}, fetch_list=[fout], scope=fscope)[0]
    np.testing.assert_allclose(got[sel], ref[:sel.sum()], rtol=1e-5, err_msg="IfElse and the flat fcs disagree")
    np.testing.assert_allclose(got[~sel], ref[sel.sum():], rtol=1e-5, err_msg="IfElse and the flat fcs disagree")
    return (lambda: exe.run(main, feed={"x": x, "c": mask}, fetch_list=[out], scope=scope),
            lambda: exe.run(flat, feed={"xt": x[sel], "xf": x[~sel]}, fetch_list=[fout], scope=fscope))


def interleaved(fns, runs, repeat, warmup):
    """{name: (median, min)} seconds per call of each fn, the repetitions taken in turns (fn 1, fn 2, ..., fn 1)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(runs):
                fn()
            samples[name].append((time.perf_counter() - t0) / runs)
    return {name: (statistics.median(v), min(v)) for name, v in samples.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=15, help="repetitions; the median is reported")
    ap.add_argument("--runs", type=int, default=200, help="calls per repetition")
    args = ap.parse_args()

    m = machine_info()
    print("machine: %s, %d cores, python %s, numpy %s, fluidlite %s (%s)" % (
        m["cpu_model"], m["cpu_usable"], m["python"], m["numpy"], m["fluidlite"], m["git_commit"] or "no git"))
    print("chains of %d steps on a [%d] float32 tensor; median of %d repetitions x %d runs after warm-up\n"
          % (args.ops, args.size, args.repeat, args.runs))

    x = np.random.RandomState(0).rand(args.size).astype("float32")
    true, false = {"x": x, "p": np.array([True])}, {"x": x, "p": np.array([False])}
    flat = lambda n: runner(lambda k, s: build_chain(k, s), n, args.size, {"x": x})  # noqa: E731
    cases = [("flat scale ops", flat),
             ("conditional blocks, taken", lambda n: runner(build_blocks, n, args.size, true)),
             ("conditional blocks, skipped", lambda n: runner(build_blocks, n, args.size, false, prime=true)),
             ("layers.cond (one branch runs)", lambda n: runner(build_conds, n, args.size, true))]
    ref = runner(lambda k, s: build_chain(k, s), args.ops, args.size, {"x": x})()[0]
    np.testing.assert_allclose(runner(build_blocks, args.ops, args.size, true)()[0], ref, rtol=1e-5,
                               err_msg="the conditional blocks and the flat chain disagree: not timing")
    warm = max(3, args.runs // 10)
    fns = {}
    for name, make in cases:
        fns[name + " (1 step)"] = make(1)
        fns[name] = make(args.ops)
    t = interleaved(fns, args.runs, args.repeat, warm)
    per_step = {}
    for name, _ in cases:
        med, lo = t[name]
        per_step[name] = (med - t[name + " (1 step)"][0]) / args.ops
        print("%-32s %8.1f us per run (min %.1f); %.3f us per step" % (name, med * 1e6, lo * 1e6,
                                                                      per_step[name] * 1e6))
    base = per_step["flat scale ops"]
    print("\nper step, relative to one flat op: taken %.2fx, skipped %.2fx, layers.cond %.2fx" % (
        per_step["conditional blocks, taken"] / base, per_step["conditional blocks, skipped"] / base,
        per_step["layers.cond (one branch runs)"] / base))

    ie, flat_fc = ifelse_runners(args.rows, args.width)
    t = interleaved({"ifelse": ie, "flat": flat_fc}, max(1, args.runs // 4), args.repeat, warm)
    print("\nIfElse, [%d, %d] rows split between two fc+tanh branches: %.1f us per run (min %.1f); the two fcs in a "
          "flat block fed the split rows: %.1f us (min %.1f); routing (split, two blocks, merge) %.1f us"
          % (args.rows, args.width, t["ifelse"][0] * 1e6, t["ifelse"][1] * 1e6, t["flat"][0] * 1e6,
             t["flat"][1] * 1e6, (t["ifelse"][0] - t["flat"][0]) * 1e6))


if __name__ == "__main__":
    main()
