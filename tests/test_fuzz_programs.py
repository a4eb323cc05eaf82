"""Random edits of real serialized programs (an MLP, a StaticRNN and a convnet training step) must raise a
Python exception or run, never crash or hang: hypothesis draws the edits, tools/fuzz_programs.py applies
and runs them in a child process, so a segfault is an exit status here instead of killing pytest."""
import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZER = os.path.join(ROOT, "tools", "fuzz_programs.py")
BATCHES = int(os.environ.get("FLUIDLITE_FUZZ_PROGRAM_BATCHES", "20"))
PER_BATCH = 100

edit = st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "repeat"]),
                 st.floats(0, 1, exclude_max=True), st.integers(0, 255))
mutant = st.tuples(st.integers(0, 2), st.lists(edit, min_size=1, max_size=3))


def _run_child(mutants, tmp_path):
    path = tmp_path / "edits.json"
    path.write_text(json.dumps(mutants))
    r = subprocess.run([sys.executable, FUZZER, "--edits", str(path)], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    if r.returncode != 0:
        tried = [line for line in r.stderr.splitlines() if line.startswith("mutant ")]
        culprit = tried[-1].split(": ", 1)[1] if tried else "?"
        raise AssertionError("a mutated program crashed the process (exit %d): %s; replay it by writing [%s] to a "
                             "file and running %s --edits FILE\n%s" % (r.returncode, culprit, culprit, FUZZER,
                                                                      r.stderr[-2000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


@settings(max_examples=BATCHES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture],
          derandomize=os.environ.get("FLUIDLITE_FUZZ_RANDOM", "0") != "1",
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: the child names the culprit
@given(st.lists(mutant, min_size=PER_BATCH, max_size=PER_BATCH))
def test_mutated_programs_raise_or_run(tmp_path, mutants):
    stats = _run_child(mutants, tmp_path)
    assert stats["raised"] + stats["ran"] == len(mutants)


def test_unmutated_programs_run(tmp_path):
    stats = _run_child([[i, []] for i in range(3)], tmp_path)
    assert stats == {"parsed": 3, "ran": 3, "raised": 0, "by_error": {}}
