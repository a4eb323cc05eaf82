"""Does the fused lstm_unit op pay? One LSTM step, forward + backward + SGD, built two ways in one process:

    unfused: fc(concat([x, h])) -> split into 4 -> sigmoid x3, tanh -> c = f*c_prev + i*g, h = o*tanh(c)
             (elementwise_mul/add, tanh: 13 forward ops after the fc)
    fused:   fc(concat([x, h])) -> lstm_unit

    PYTHONPATH=. python benchmarks/lstm_cell.py [--batch 32] [--hidden 128] [--repeat 15] [--runs 200] [--threads 1]

Also times the cell alone (gate pre-activations fed in, no fc) so the cell's share is visible. Figures
are medians over --repeat repetitions (each the mean of --runs exe.run calls), measured interleaved.
"""
import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench.models.lstm import lstm_unit_cell as fused_cell, unfused_cell

L = fluid.layers


def build(cell, batch, hidden, with_fc):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1  # same fc weights both ways
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", shape=[batch, hidden], dtype="float32", append_batch_size=False)
        h0 = L.data("h0", shape=[batch, hidden], dtype="float32", append_batch_size=False)
        c0 = L.data("c0", shape=[batch, hidden], dtype="float32", append_batch_size=False)
        for v in (x, h0, c0):
            v.stop_gradient = False
        if with_fc:
            gates = L.fc(L.concat([x, h0], axis=1), size=4 * hidden)
        else:
            gates = L.data("gates", shape=[batch, 4 * hidden], dtype="float32", append_batch_size=False)
            gates.stop_gradient = False
        h, c = cell(gates, c0)
        loss = L.sums([L.mean(h), L.mean(c)])
        if with_fc:
            fluid.optimizer.SGD(0.01).minimize(loss)
        else:
            fluid.backward.append_backward(loss, parameter_list=[])  # no parameters: the input grads only
    n_ops = len(main.global_block().ops)
    return main, startup, loss, n_ops


def runner(cell, batch, hidden, with_fc, feed):
    main, startup, loss, n_ops = build(cell, batch, hidden, with_fc)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    grads = [main.global_block().var(n + "@GRAD") for n in (["gates"] if not with_fc else ["x"]) + ["c0"]]

    def step():
        return exe.run(main, feed=feed, fetch_list=[loss] + grads, scope=scope)
    return step, n_ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1,
                    help="fluidlite and torch threads (more than the free cores thrash)")
    args = ap.parse_args()
    fluid.core.set_num_threads(args.threads)
    rng = np.random.RandomState(0)
    b, hd = args.batch, args.hidden
    feed = {k: rng.uniform(-1, 1, (b, hd)).astype("float32") for k in ("x", "h0", "c0")}
    feed_cell = {"gates": rng.uniform(-2, 2, (b, 4 * hd)).astype("float32"), "c0": feed["c0"]}

    # Same results both ways (fused vs unfused), checked before timing.
    for with_fc, fd in ((True, feed), (False, feed_cell)):
        a, _ = runner(unfused_cell, b, hd, with_fc, fd)
        f, _ = runner(fused_cell, b, hd, with_fc, fd)
        for ra, rf in zip(a(), f()):
            np.testing.assert_allclose(ra, rf, rtol=2e-5, atol=2e-6)

    cases = {}
    for with_fc, fd, label in ((True, feed, "fc + cell"), (False, feed_cell, "cell only")):
        for cell, name in ((unfused_cell, "unfused"), (fused_cell, "lstm_unit")):
            step, n_ops = runner(cell, b, hd, with_fc, fd)
            for _ in range(50):
                step()
            cases[(label, name)] = (step, n_ops, [])
    for _ in range(args.repeat):  # interleaved, so load changes hit every case alike
        for step, _, samples in cases.values():
            t0 = time.perf_counter()
            for _ in range(args.runs):
                step()
            samples.append((time.perf_counter() - t0) / args.runs * 1e6)
    print("LSTM step fwd+bwd, batch %d, hidden %d, float32, %d BLAS thread(s) (median of %d x %d runs)"
          % (b, hd, args.threads, args.repeat, args.runs))
    for label in ("fc + cell", "cell only"):
        un = statistics.median(cases[(label, "unfused")][2])
        fu = statistics.median(cases[(label, "lstm_unit")][2])
        print("  %-10s unfused %7.1f us (%2d ops)   lstm_unit %7.1f us (%2d ops)   speedup %.2fx"
              % (label, un, cases[(label, "unfused")][1], fu, cases[(label, "lstm_unit")][1], un / fu))


if __name__ == "__main__":
    main()
