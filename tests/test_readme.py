"""README.md: its example runs, and it states the set-up commands that .ci/run relies on."""
import contextlib
import io
import os
import re

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def test_setup_commands():
    lines = readme().splitlines()
    assert 'pip install . && python -m fluidlite.bench' in lines
    assert 'pip install -e ".[test]" && python -m pytest' in lines


def test_example_runs():
    code, = re.findall(r"```python\n(.*?)```", readme(), re.S)
    env = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, "README.md", "exec"), env)
    res = env["res"]
    assert res.shape == (20,) and np.all(res >= 0)
    assert re.search(r"fc_\d+\.w_0", out.getvalue()), out.getvalue()
