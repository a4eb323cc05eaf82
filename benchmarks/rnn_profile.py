"""StaticRNN before/after: Fluid 1.x's recurrent strategy vs fluidlite's, seen through the profiler.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/rnn_profile.py [--seq 20 --batch 32 --hidden 128]

An LSTM (built from fc + split + sigmoid/tanh + elementwise ops inside a StaticRNN) trains with SGD on
dense [seq, batch, hidden] inputs. "fluid mode" (fluid.core.set_recurrent_fluid_mode(True)) runs the
recurrent op the way Fluid 1.x did: new step scopes every run, memories and outputs copied by
rnn_memory_helper, a sum into each parameter's gradient after every step. The default mode reuses the step
scopes, shares memories and adds each parameter's per-step gradients with one n-ary sum per run.
Prints ms/step, then the profiler's step-scope, memcpy and sum figures for one timed window per mode.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite import profiler
from fluidlite.bench import seconds_per_call
from fluidlite.bench.models.lstm_primitive import network, primitive_cell  # advisor_accuracy imports the cell here


def lstm_program(seq, batch, hidden, cell=primitive_cell):
    """A StaticRNN LSTM training step (SGD on the mean of the hidden states); `cell(x_t, h_prev, c_prev) -> (h, c)`.
    The lstm_primitive bench model's network at another size."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[seq, batch, hidden], dtype="float32", append_batch_size=False)
        loss = network(x, hidden, cell)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
    return main, startup, loss


def measure(fluid_mode, args, feed):
    fluid.core.set_recurrent_fluid_mode(fluid_mode)
    try:
        main, startup, loss = lstm_program(args.seq, args.batch, args.hidden)
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)

        def step():
            exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        seconds = seconds_per_call(step, args.steps, args.repeat, warmup=3)[0]
        with profiler.profiler("CPU", profile_path=None, print_report=False):
            for _ in range(args.steps):
                step()
        rows = {r["event"]: r for r in profiler.summary(merge_threads=True)}
        mem = {r["direction"]: r for r in profiler.memcpy_summary()}
        scopes = profiler.scope_summary()
        return {
            "ms_per_step": seconds * 1e3,
            "scopes_created": scopes["created"] / args.steps, "scopes_deleted": scopes["deleted"] / args.steps,
            "scope_ms": (scopes["create_ms"] + scopes["delete_ms"]) / args.steps,
            "memcpy": mem.get("CPU->CPU", {"count": 0, "bytes": 0, "total_ms": 0.0}),
            "sum": rows.get("sum", {"calls": 0, "total_ms": 0.0}),
            "recurrent": rows.get("recurrent", {"total_ms": 0.0}),
            "recurrent_grad": rows.get("recurrent_grad", {"total_ms": 0.0}),
        }
    finally:
        fluid.core.set_recurrent_fluid_mode(False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    feed = {"x": np.random.RandomState(0).rand(args.seq, args.batch, args.hidden).astype("float32")}
    results = {"fluid mode": measure(True, args, feed), "fluidlite": measure(False, args, feed)}
    print("LSTM StaticRNN training step: seq %d, batch %d, hidden %d (per step = one exe.run)"
          % (args.seq, args.batch, args.hidden))
    print("%-12s %10s %16s %12s %18s %16s %12s %14s" % ("mode", "ms/step", "scopes new/del", "scope ms",
                                                         "memcpy count", "memcpy MB", "sum calls", "sum ms"))
    for name, r in results.items():
        m = r["memcpy"]
        print("%-12s %10.3f %16s %12.3f %18.0f %16.2f %12.0f %14.3f" % (
            name, r["ms_per_step"], "%g / %g" % (r["scopes_created"], r["scopes_deleted"]), r["scope_ms"],
            m["count"] / args.steps, m["bytes"] / args.steps / 1e6, r["sum"]["calls"] / args.steps,
            r["sum"]["total_ms"] / args.steps))


if __name__ == "__main__":
    main()
