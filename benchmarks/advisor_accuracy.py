"""How right is fluid.profiler.advise()? Per model: its top finding against the one a person finds reading the
profile and the program, and, where the fix exists today, its estimated saving against the saving measured after
applying the fix.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/advisor_accuracy.py [--models mlp,lstm,...]
        [--steps 10] [--repeat 5]

Cases: every bench model (python -m fluidlite.bench --model all) as the bench builds it, plus
- prim_lstm: the primitive-op LSTM (StaticRNN, fc on [x_t, h_prev], split into 4 gates, sigmoid/tanh,
  elementwise_mul/add; seq 20, batch 32, hidden 128, SGD: benchmarks/rnn_profile.py's program); the two fixes the
  advisor names: fluid.layers.lstm_unit(x_t, h_prev, c_prev) (concat + one fc + the fused lstm_unit op), and the
  lstm_unit op appended on the fc's gates (fluidlite.bench.models.lstm.lstm_unit_cell: only the chain replaced).
- rebuilt_mlp: the bench MLP with its main program rebuilt before every exe.run (a common script mistake); fix:
  build it once.
Each case is profiled for --steps steps after warm-up; the "before" and "after" steps are then timed interleaved
(--repeat rounds of --steps steps each) so machine noise hits both alike; the measured saving is the median over
rounds of the round's before - after (the step times printed are the medians).
ratio = estimated / measured.
"""
import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench import models

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnn_profile import lstm_program, primitive_cell  # noqa: E402  (the primitive LSTM program)

from fluidlite.bench.models.lstm import lstm_unit_cell  # noqa: E402

# What a person finds reading each model's profile and program (the first rows of the report by self time and
# the ops in the program), and why. Kinds as fluid.profiler.advise() names them.
EXPECTED = {
    "mlp": ("hotspot", "three fc layers: mul/mul_grad GEMMs hold most of the step; nothing structural"),
    "lenet": ("hotspot", "conv2d/conv2d_grad are most of the step; nothing structural"),
    "resnet_small": ("hotspot", "conv2d_grad/conv2d are ~40% of the step, batch_norm next; compute-bound"),
    "vgg_small": ("hotspot", "conv2d_grad/conv2d dominate; compute-bound"),
    "mobilenet_v2": ("hotspot", "depthwise and pointwise convolutions dominate; compute-bound"),
    "lstm": ("hotspot", "the cell is already the fused lstm_unit and the input projection is hoisted: the GEMMs "
             "(mul_grad, mul) lead"),
    "text_lstm": ("hotspot", "dynamic_lstm (whole-sequence op) and its gradient lead: compute-bound"),
    "text_cnn": ("hotspot", "sequence_conv and its gradient lead"),
    "seq2seq": ("hotspot", "the GRU/attention GEMMs (mul, mul_grad) lead"),
    "transformer_encoder": ("hotspot", "the attention and FFN GEMMs (matmul/mul and grads) lead"),
    "ctr_dnn": ("hotspot", "the fc GEMMs and the embedding lookups lead"),
    "fit_a_line": ("dispatch_bound", "13 features, one fc: each op is a few microseconds; the executor's "
                   "per-op cost and Python around exe.run are the step"),
    "overhead": ("dispatch_bound", "a chain of scale ops on 16 floats: pure per-op cost (the model exists to "
                 "measure it)"),
    "prim_lstm": ("fusable_chain", "the cell is split + 3 sigmoid + 2 tanh + 4 elementwise ops per step (and "
                  "their gradients), each a separate op over [32, 128]: an LSTM cell that lstm_unit computes in "
                  "one op"),
    "rebuilt_mlp": ("python_time", "the main program is rebuilt before every exe.run: Python time between "
                    "runs and one prepare per run"),
}


class Case:
    """A runnable step before the fix and, where fixes exist, {fix name: the step after it}."""

    def __init__(self, name, before, after=None):
        self.name, self.before, self.after = name, before, after or {}


def _runner(main, startup, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    def step():
        exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    return step


def bench_case(name):
    mod = models.load(name)
    built = mod.build(mod.DEFAULTS["batch_size"], 0)
    return Case(name, _runner(built.main, built.startup, built.feed(), built.fetch_list))


# The primitive cell and the two fixes the advisor names: Fluid's layers.lstm_unit (concat + fc + lstm_unit), and the
# same fc as the primitive cell with the lstm_unit op on its gates.
CELLS = {
    "unfused": primitive_cell,
    "layers.lstm_unit": lambda x_t, h_prev, c_prev: fluid.layers.lstm_unit(x_t, h_prev, c_prev),
    "lstm_unit op": lambda x_t, h_prev, c_prev: lstm_unit_cell(
        fluid.layers.fc(input=[x_t, h_prev], size=4 * c_prev.shape[-1]), c_prev),
}


def prim_lstm_case():
    feed = {"x": np.random.RandomState(0).rand(20, 32, 128).astype("float32")}
    steps = {}
    for cell in ("unfused", "layers.lstm_unit", "lstm_unit op"):
        main, startup, loss = lstm_program(20, 32, 128, CELLS[cell])
        steps[cell] = _runner(main, startup, feed, [loss])
    before = steps.pop("unfused")
    return Case("prim_lstm", before, steps)


def rebuilt_mlp_case():
    mod = models.load("mlp")
    built = mod.build(mod.DEFAULTS["batch_size"], 0)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed = built.feed()

    def rebuilt():  # the same program (same names: the scope's parameters are reused), built again every step
        again = mod.build(mod.DEFAULTS["batch_size"], 0)
        exe.run(again.main, feed=feed, fetch_list=again.fetch_list, scope=scope)

    def once():
        exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)
    return Case("rebuilt_mlp", rebuilt, {"build once": once})


def measure(case, steps, repeat):
    gc.collect()  # the earlier cases' garbage: a collection inside the profile would be Python time
    for _ in range(3):
        case.before()
    with fluid.profiler.profiler("CPU", profile_path=None, print_report=False):
        for _ in range(steps):
            case.before()
    findings = fluid.profiler.advise(print_report=False)
    # The top finding after the preemption caveat (when the profile has one): that is the problem it names.
    ranked = [f for f in findings if f.kind != "preempted"]
    caveat = [f for f in findings if f.kind == "preempted"]
    row = {"case": case.name, "expected": EXPECTED.get(case.name, ("?", ""))[0],
           "top": ranked[0] if ranked else None, "fixes": {},
           "preempted_ms": caveat[0].evidence["lost_ms_per_step"] if caveat else 0.0}
    if case.after:
        fns = dict(case.after, before=case.before)
        times = {k: [] for k in fns}
        for fn in fns.values():
            for _ in range(3):
                fn()
        for _ in range(repeat):  # interleaved: a noisy moment hits all alike
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(steps):
                    fn()
                times[k].append((time.perf_counter() - t0) / steps * 1e3)
        # The saving is the median over rounds of (before - after) within the round: a noisy moment slows both
        # sides of a round alike, and the median drops the rounds where it did not.
        before = times.pop("before")
        row["before_ms"] = statistics.median(before)
        row["fixes"] = {k: (statistics.median(v), statistics.median(b - a for b, a in zip(before, v)))
                        for k, v in times.items()}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(list(models.MODELS) + ["prim_lstm", "rebuilt_mlp"]))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, help="fluidlite's pool threads (default: leave as is)")
    args = ap.parse_args()
    if args.threads:
        fluid.core.set_num_threads(args.threads)
    special = {"prim_lstm": prim_lstm_case, "rebuilt_mlp": rebuilt_mlp_case}
    print("%-20s %-16s %-16s %-5s %12s %12s %8s  %s" % ("model", "expected", "top finding", "match",
                                                       "est. ms/step", "meas. ms/step", "ratio", "title"))
    for name in args.models.split(","):
        case = special[name]() if name in special else bench_case(name)
        r = measure(case, args.steps, args.repeat)
        top = r["top"]
        est = top.estimated_saving_ms if top else 0.0
        fixes = r["fixes"] or {None: (None, None)}
        for k, (after, meas) in fixes.items():
            print("%-20s %-16s %-16s %-5s %12.3f %12s %8s  %s" % (
                name, r["expected"], top.kind if top else "-", "yes" if top and top.kind == r["expected"] else "NO",
                est, "%.3f" % meas if meas is not None else "-", "%.2f" % (est / meas) if meas else "-",
                top.title if top else ""))
            if k is not None:
                print("%-20s fix %r: before %.3f ms/step, after %.3f ms/step" % ("", k, r["before_ms"], after))
        if r["preempted_ms"]:
            print("%-20s (the profile lost %.3f ms/step to preemption: advise() lists that caveat first)"
                  % ("", r["preempted_ms"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
