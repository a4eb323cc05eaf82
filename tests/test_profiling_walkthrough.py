"""docs/profiling.md "The tune loop, automated": its four snippets run as printed, as one script, and do what the
text says: the profile prints Fluid's report, the advisor's top finding is the hand-written LSTM cell with the
lstm_unit fix, the diff shows the cell's ops replaced by lstm_unit, and the interleaved timing measures a saving."""
import contextlib
import io
import math
import os
import re

import pytest

import fluidlite as fluid


@pytest.fixture(autouse=True)
def _programs_as_written(monkeypatch):
    """These tests read profiles of their programs' ops as written: elementwise fusion (on by default) would turn
    their chains into fused_elementwise ops (subprocesses inherit the variable)."""
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", "fuse_elementwise_chains")


DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "profiling.md")


def _snippets():
    text = open(DOC).read()
    section = text[text.index("## The tune loop, automated"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_walkthrough_runs_as_printed(tmp_path, monkeypatch):
    snippets = _snippets()
    assert len(snippets) == 4
    monkeypatch.chdir(tmp_path)
    threads = fluid.core.get_num_threads()
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            for i, code in enumerate(snippets):
                exec(compile(code, "docs/profiling.md snippet %d" % (i + 1), "exec"), namespace)
    finally:
        fluid.core.set_num_threads(threads)
    text = out.getvalue()
    assert "------------------------->     Profiling Report     <-------------------------" in text
    assert os.path.exists(tmp_path / "lstm_trace.json") and os.path.exists(tmp_path / "before.json")
    # The top finding of the program's structure. Where findings about the machine's state rank (preemption, a
    # dispatch-bound step, idle pool threads) depends on how busy the machine is: a timing, not tested here.
    machine_state = {"preempted", "dispatch_bound", "thread_utilisation"}
    top = next(f for f in namespace["advice"] if f.kind not in machine_state)
    assert top.kind == "fusable_chain" and "lstm_unit" in top.fix
    assert top.evidence["fix_replaces_ops"] == 21 and top.estimated_saving_ms > 0
    change = namespace["change"]
    assert {"lstm_unit", "lstm_unit_grad"} <= set(change.added)
    assert {"split", "sigmoid", "sigmoid_grad", "tanh", "tanh_grad", "elementwise_mul"} <= set(change.removed)
    assert math.isfinite(namespace["saving"])
    assert re.search(r"measured saving -?\d+\.\d+ ms per step \(advisor's estimate \d+\.\d+ ms\)", text)
