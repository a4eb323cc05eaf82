"""Cost of returning fetched arrays as ScalarArray (fluidlite/numpy_compat.py) instead of plain ndarrays
(one view per fetched array of rank >= 1, whatever its size): the fixed cost of one exe.run of a 1-op
program fetching a [1, 1] array, both ways, measured alternately in this process; prints the ratio (goal:
within a few percent).

    PYTHONPATH=. python benchmarks/fetch_scalar.py [--runs 20000] [--repeat 5]
"""
import argparse
import timeit

import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.numpy_compat import ScalarArray


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    main_prog = fluid.Program()
    with fluid.program_guard(main_prog, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.ones((1, 1), "float32")

    def run():
        return exe.run(main_prog, feed={"x": xv}, fetch_list=[y])

    run()
    best = {}
    try:
        for kind in (ScalarArray, np.ndarray) * 2:
            core._set_fetch_scalar_type(kind)
            t = min(timeit.repeat(run, number=args.runs, repeat=args.repeat)) / args.runs * 1e6
            best[kind] = min(t, best.get(kind, t))
    finally:
        core._set_fetch_scalar_type(ScalarArray)
    print("exe.run (1 op, one [1, 1] fetch): %.2f us as ScalarArray, %.2f us as ndarray; ratio %.3f"
          % (best[ScalarArray], best[np.ndarray], best[ScalarArray] / best[np.ndarray]))


if __name__ == "__main__":
    main()
