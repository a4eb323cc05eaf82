"""Peak RSS growth of one framework running one model, in a fresh process (used by ``--compare``).

    python -m fluidlite.bench._memprobe MODEL FRAMEWORK BATCH_SIZE SEED THREADS STEPS

Prints one JSON line ``{"bytes": ..., "method": ..., "steps": ...}``. Every framework goes through the
same sequence, so the figures compare: import fluidlite, numpy and the framework; build the fluidlite
model once to read its initial weights and batch (copied to numpy), drop it; collect garbage; reset
VmHWM; then build the model in FRAMEWORK from those weights (fluidlite: build it again from the same
seed and run its startup program) and run STEPS training steps. The figure is VmHWM at the end minus
VmRSS at the reset: weights, gradients, optimizer state, activations and workspace -- what the model
costs in that framework, without the libraries' import cost.
"""
import gc
import json
import sys


def main(argv):
    model, framework, batch_size, seed, threads, steps = argv
    batch_size, seed, threads, steps = int(batch_size), int(seed), int(threads), int(steps)
    import fluidlite as fluid
    from fluidlite import core
    from . import _Fluidlite, _measure, models, reference

    core.set_num_threads(threads)
    reference.import_framework(framework if framework != "fluidlite" else "numpy")
    mod = models.load(model)
    fl = _Fluidlite(mod, batch_size, seed, fluid.CPUPlace())
    params = {k: v.copy() for k, v in fl.params().items()}
    feed = reference.plain_feed(fl.feed_dict)
    del fl
    gc.collect()

    peak = _measure.PeakRSS()
    peak.start()
    if framework == "fluidlite":
        runner = _Fluidlite(mod, batch_size, seed, fluid.CPUPlace())
    else:
        if framework == "torch":
            reference.set_torch_threads(threads)
        elif framework == "numpy":
            reference.set_numpy_threads(threads)
        elif framework == "paddle":
            reference.set_paddle_threads(threads)
        runner = reference.factory(mod, framework)(params, feed)
    for _ in range(steps):
        runner.step()
    grown = peak.stop()
    print(json.dumps({"bytes": grown, "method": peak.method, "steps": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
