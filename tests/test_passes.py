"""The IR pass framework (csrc/pass.h): which passes a run applies (BuildStrategy, compiler.PASS_FLAGS), the
prepared program's pass log, FLUIDLITE_DISABLE_PASSES, GLOG level 2 and the errors. Each pass has its own test file."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import compiler, core

REGISTERED = [p["name"] for p in core.passes()]


def _mlp():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 8], "float32")
        h = fluid.layers.fc(x, 16, act="relu")
        y = fluid.layers.fc(h, 4)
        loss = fluid.layers.mean(fluid.layers.sigmoid(fluid.layers.elementwise_mul(y, y)))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def test_passes_are_listed_in_run_order_with_docs():
    passes = core.passes()
    assert [p["order"] for p in passes] == sorted(p["order"] for p in passes)
    for p in passes:
        assert p["doc"] and p["name"].isidentifier()
    # every registered pass is reachable from a BuildStrategy flag
    reachable = {n for names in compiler.PASS_FLAGS.values() for n in names}
    assert set(REGISTERED) <= reachable


def test_unknown_pass_names_the_known_ones():
    main, _, _ = _mlp()
    with pytest.raises(core.EnforceNotMet, match="unknown IR pass 'no_such_pass'; the passes are: "):
        core.apply_passes(main.desc, ["no_such_pass"])


def test_build_strategy_flags_choose_passes():
    main, _, _ = _mlp()
    bs = fluid.BuildStrategy()
    for flag in compiler.PASS_FLAGS:
        setattr(bs, flag, False)
    assert compiler.passes_for(main, bs) == ()
    for flag, names in compiler.PASS_FLAGS.items():
        bs = fluid.BuildStrategy()
        for other in compiler.PASS_FLAGS:
            setattr(bs, other, False)
        setattr(bs, flag, True)
        assert compiler.passes_for(main, bs) == tuple(n for n in names if n in REGISTERED)
    with pytest.raises(TypeError, match="BuildStrategy.fuse_reductions must be True or False, got 1"):
        fluid.BuildStrategy().fuse_reductions = 1
    with pytest.raises(core.EnforceNotMet, match="BuildStrategy.inference_optimize must be None, False or True"):
        fluid.BuildStrategy().inference_optimize = "yes"


def test_inference_optimize_defaults_to_inference_programs():
    main, _, _ = _mlp()
    bs = fluid.BuildStrategy()
    infer = [n for n in compiler.PASS_FLAGS["inference_optimize"] if n in REGISTERED]
    assert not set(infer) & set(compiler.passes_for(main, bs))
    main._is_inference = True
    assert set(infer) <= set(compiler.passes_for(main, bs))
    bs.inference_optimize = False
    assert not set(infer) & set(compiler.passes_for(main, bs))


def test_prepared_program_prints_the_pass_log_and_results_match_unfused():
    main, startup, loss = _mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.random.RandomState(0).rand(5, 8).astype("float32")}
    results = {}
    for on in (False, True):
        bs = fluid.BuildStrategy()
        for flag in compiler.PASS_FLAGS:
            if flag != "inference_optimize":
                setattr(bs, flag, on)
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe.run(startup)
            cp = fluid.CompiledProgram(main, build_strategy=bs)
            results[on] = [exe.run(cp, feed=feed, fetch_list=[loss])[0] for _ in range(3)]
        view = exe.prepared_program(main, feed=feed, fetch_list=[loss], scope=scope, build_strategy=bs)
        text = str(view)
        if on and view.pass_results:
            assert text.startswith("// IR passes: " + ", ".join(r["pass"] for r in view.pass_results))
            for r in view.pass_results:
                assert "//   %s: %d change" % (r["pass"], r["changes"]) in text
        else:
            assert text.startswith("// IR passes: none\n")
        ops = [op.type for op in view.global_block().ops]
        assert ops[0] == "feed" and ops[-1] == "fetch"
    np.testing.assert_allclose(np.array(results[True]), np.array(results[False]), rtol=1e-6)
    # the user's program is never rewritten
    assert "feed" not in [op.type for op in main.global_block().ops]


def _run_in_child(code, env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


CHILD = """
import numpy as np, fluidlite as fluid
from test_passes import _mlp
main, startup, loss = _mlp()
exe = fluid.Executor(fluid.CPUPlace()); exe.run(startup)
view = exe.prepared_program(main, feed=["x"], fetch_list=[loss])
print("RAN", [r["pass"] for r in view.pass_results])
"""


@pytest.mark.skipif(not REGISTERED, reason="no IR pass is built into this module")
def test_disable_passes_env_and_glog_level_2():
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    env = {"PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")])}
    on = _run_in_child(CHILD, dict(env, GLOG_vmodule="pass=2", FLUIDLITE_DISABLE_PASSES=""))
    assert on.returncode == 0, on.stderr
    ran = eval(on.stdout.split("RAN", 1)[1])
    assert ran, "the default strategy applies passes to a plain run"
    for name in ran:
        assert "pass %s: " % name in on.stderr  # the summary line at level 2
    off = _run_in_child(CHILD, dict(env, GLOG_vmodule="pass=2", FLUIDLITE_DISABLE_PASSES="all"))
    assert off.returncode == 0, off.stderr
    assert eval(off.stdout.split("RAN", 1)[1]) == []
    for name in ran:
        assert "pass %s: skipped (FLUIDLITE_DISABLE_PASSES)" % name in off.stderr
    one = _run_in_child(CHILD, dict(env, FLUIDLITE_DISABLE_PASSES=ran[0]))
    assert eval(one.stdout.split("RAN", 1)[1]) == ran[1:]
