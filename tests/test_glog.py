"""GLOG-style verbose tracing: line format, levels 3/4/5, GLOG_vmodule filtering, silence at level 0."""
import os
import re
import subprocess
import sys

import pytest

SCRIPT = r"""
import numpy as np
import fluidlite as fluid
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.layers.data(name="x", shape=[3], dtype="float32")
    y = fluid.layers.scale(x, scale=2.0)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
fluid.log.vlog(3, "python layer says %d", 7)
"""

LINE = re.compile(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6} [ \d]{5,} [^\s:]+:\d+\] .*$")


def _run(env_extra):
    env = dict(os.environ)
    env.pop("GLOG_v", None)
    env.pop("GLOG_vmodule", None)
    env.update(env_extra)
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stderr.splitlines()


def test_level_0_prints_nothing():
    assert _run({}) == []


def test_level_3_op_lines_and_kernel_key():
    lines = _run({"GLOG_v": "3"})
    assert lines and all(LINE.match(line) for line in lines), lines
    text = "\n".join(lines)
    assert re.search(r"operator\.cc:\d+\] CPUPlace Op\(scale\), inputs:\{X\[x:float\[2, 3\]\(\{\}\)\]\}, "
                     r"outputs:\{Out\[scale_0\.tmp_0:float\[2, 3\]\(\{\}\)\]\}\.$", text, re.M)
    assert "expected_kernel_key:data_type[float]:data_layout[ANY_LAYOUT]:place[CPUPlace]:library_type[PLAIN]" in text
    assert "Feed Var feed's 0 column to var x" in text
    assert "Fetch variable scale_0.tmp_0 to fetch" in text
    assert re.search(r"test_glog|<string>:\d+\] python layer says 7", text) or "python layer says 7" in text
    assert "memory::Copy" not in text  # that is level 4
    # after-run line only: the op line appears once per op at level 3
    assert len(re.findall(r"Op\(scale\)", text)) == 1


def test_level_4_adds_before_lines_and_memcpy():
    text = "\n".join(_run({"GLOG_v": "4"}))
    assert len(re.findall(r"Op\(scale\)", text)) == 2
    assert re.search(r"Op\(scale\), inputs:\{X\[x:float\[2, 3\]\(\{\}\)\]\}, "
                     r"outputs:\{Out\[scale_0\.tmp_0\[uninited\]\]\}", text)
    assert "memory::Copy 24 Bytes from CPUPlace to CPUPlace" in text
    assert "Alloc " not in text


def test_op_lines_come_from_operator_cc_at_fixed_lines():
    """As Fluid's OperatorBase::Run: GLOG_vmodule=operator=N selects the op lines, each kind from one line."""
    lines = [line for line in _run({"GLOG_vmodule": "operator=4", "GLOG_v": "0"}) if "Op(scale)" in line]
    assert len(lines) == 2 and all(re.search(r" operator\.cc:\d+\] CPUPlace Op\(scale\)", line) for line in lines)
    assert len({re.search(r"operator\.cc:(\d+)\]", line).group(1) for line in lines}) == 2  # before, after
    assert not any("Op(" in line for line in _run({"GLOG_vmodule": "executor=4", "GLOG_v": "0"}))
    # docs/profiling.md shows the before-line with its real line number
    doc = open(os.path.join(os.path.dirname(__file__), os.pardir, "docs", "profiling.md")).read()
    documented = re.search(r"operator\.cc:(\d+)\] CPUPlace Op\(scale\), inputs:\{X\[x:float\[2, 3\]\(\{\}\)\]\}, "
                           r"outputs:\{Out\[scale_0\.tmp_0\[uninited\]\]\}", doc).group(1)
    before = next(line for line in lines if "[uninited]" in line)
    assert re.search(r"operator\.cc:(\d+)\]", before).group(1) == documented


def test_level_5_adds_allocations():
    text = "\n".join(_run({"GLOG_v": "5"}))
    assert re.search(r"allocator\.cc:\d+\] Alloc 24 bytes on CPUPlace", text)


def test_vmodule_filters_by_file_and_first_match_wins():
    lines = _run({"GLOG_vmodule": "executor=3"})
    assert lines and all("executor.cc:" in line for line in lines)
    assert _run({"GLOG_vmodule": "exec*=0,executor=3", "GLOG_v": "0"}) == []
    lines = _run({"GLOG_vmodule": "feed_fetch=3", "GLOG_v": "0"})
    assert lines and all("feed_fetch.cc:" in line for line in lines)
    assert _run({"GLOG_vmodule": "ex?cutor=0", "GLOG_v": "3"}) != []  # other modules still at 3
    assert not any("executor.cc:" in line for line in _run({"GLOG_vmodule": "ex?cutor=0", "GLOG_v": "3"}))


def test_runtime_level_change_and_guard(capfd):
    import numpy as np

    import fluidlite as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])
    capfd.readouterr()
    with fluid.vlog_guard(3):
        exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])
    err = capfd.readouterr().err
    assert "Op(scale)" in err
    exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])
    assert capfd.readouterr().err == ""


def test_bad_vmodule_spec_is_a_clear_error():
    import fluidlite as fluid
    with pytest.raises(fluid.core.EnforceNotMet, match="pattern=N"):
        fluid.set_vmodule("executor")
