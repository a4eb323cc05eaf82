"""Ctrl-C during Executor.run: SIGINT stops the run between two ops (also between the ops of a recurrent
step), raises KeyboardInterrupt, and the executor and scope work afterwards. Each case runs in a
subprocess that sends itself SIGINT while a long run is in progress."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, signal, sys, threading, time
import numpy as np
import fluidlite as fluid
from fluidlite import unique_name

kind = sys.argv[1]
main = fluid.Program()
with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
    if kind == "chain":  # 3,000 ops on a tensor fed small first (prepare), then big (several seconds)
        x = fluid.layers.data(name="x", shape=[-1], dtype="float32", append_batch_size=False)
        y = x
        for _ in range(3000):
            y = fluid.layers.scale(y, scale=1.0, bias=1.0)
    else:  # one recurrent op: 400,000 steps of a scale on the step input
        x = fluid.layers.data(name="x", shape=[-1, -1, -1], dtype="float32", append_batch_size=False)
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, 1], batch_ref=x_t)
            h = fluid.layers.elementwise_add(h_prev, fluid.layers.reduce_sum(x_t, dim=[1], keep_dim=True))
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        y = rnn()
scope = fluid.Scope()
exe = fluid.Executor(fluid.CPUPlace())
small = np.ones(4, "float32") if kind == "chain" else np.ones((3, 2, 4), "float32")
big = np.ones(1 << 22, "float32") if kind == "chain" else np.ones((400000, 1, 4), "float32")
(before,) = exe.run(main, feed={"x": small}, fetch_list=[y], scope=scope)
sent = []

def interrupt():
    time.sleep(0.2)  # the big runs take seconds (about 2 s for the chain on an idle 2-core machine)
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt).start()
start = time.monotonic()
result = {}
try:
    exe.run(main, feed={"x": big}, fetch_list=[y], scope=scope)
    result["outcome"] = "finished after %.2f s" % (time.monotonic() - start)
except KeyboardInterrupt:
    result["outcome"] = "KeyboardInterrupt"
    result["latency"] = time.monotonic() - sent[0]
(after,) = exe.run(main, feed={"x": small}, fetch_list=[y], scope=scope)
result["same_after"] = bool(np.array_equal(before, after))
result["value"] = float(after.ravel()[-1])
print(json.dumps(result))
"""


@pytest.mark.parametrize("kind, value", [("chain", 3001.0), ("recurrent", 12.0)])
def test_sigint_stops_a_long_run_promptly_and_the_executor_works_after(kind, value):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CHILD, kind], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "KeyboardInterrupt"
    assert result["latency"] < 2.0  # generous: typically under a millisecond (checked between ops)
    assert result["same_after"] and result["value"] == value
