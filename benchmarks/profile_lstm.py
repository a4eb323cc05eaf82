"""Print fluidlite's Profiling Report for 20 training steps of the StaticRNN LSTM in rnn_profile.py
(seq 20, batch 32, hidden 128, one BLAS thread) and write its Chrome trace to /tmp/lstm_trace.json.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/profile_lstm.py

docs/profiling.md walks through the tune loop with this script's output.
"""
import os
import sys

import numpy as np

import fluidlite as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnn_profile import lstm_program  # noqa: E402


def main():
    fluid.core.set_num_threads(1)
    prog, startup, loss = lstm_program(20, 32, 128)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.random.RandomState(0).rand(20, 32, 128).astype("float32")}
    for _ in range(5):
        exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
    with fluid.profiler.profiler("CPU", sorted_key="total", profile_path="/tmp/lstm_trace.json"):
        for _ in range(20):
            exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)


if __name__ == "__main__":
    main()
