"""save/load persistables and params, inference models, atomic writes, corrupt and mismatched files."""
import os

import numpy as np
import pytest

import fluidlite as fluid


def _model(size=4):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(input=x, size=size, act="relu")
        pred = fluid.layers.fc(input=h, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return main, startup, pred, loss


FEED = {"x": np.random.RandomState(0).rand(5, 3).astype("float32"),
        "y": np.random.RandomState(1).rand(5, 1).astype("float32")}


def _train(main, startup, pred, scope, steps=3):
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(steps):
            exe.run(main, feed=FEED)
        return exe, exe.run(main, feed=FEED, fetch_list=[pred])[0]


@pytest.mark.parametrize("filename", [None, "all_params"])
def test_save_load_persistables_round_trip(tmp_path, filename):
    main, startup, pred, _ = _model()
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path), main, filename=filename)
        ref = exe.run(main, feed=FEED, fetch_list=[pred])[0]  # one more step updates the params
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        exe.run(startup)
        fluid.io.load_persistables(exe, str(tmp_path), main, filename=filename)
        got = exe.run(main, feed=FEED, fetch_list=[pred])[0]
    np.testing.assert_array_equal(got, ref)
    if filename is None:
        assert os.path.exists(tmp_path / "fc_0.w_0") and os.path.exists(tmp_path / "fc_0.w_0_moment1_0")


def test_save_params_saves_only_parameters(tmp_path):
    main, startup, pred, _ = _model()
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_params(exe, str(tmp_path), main)
    assert sorted(os.listdir(tmp_path)) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]


def test_inference_model_round_trip(tmp_path):
    main, startup, pred, _ = _model()
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main)
        ref = exe.run(main.clone(for_test=True), feed=FEED, fetch_list=[pred])[0]
    with fluid.scope_guard(fluid.Scope()):
        program, feed_names, fetch_targets = fluid.io.load_inference_model(str(tmp_path), exe)
        assert feed_names == ["x"] and [t.name for t in fetch_targets] == [pred.name]
        types = [op.type for op in program.global_block().ops]
        assert "sgd" not in types and "adam" not in types and not any(t.endswith("_grad") for t in types)
        got = exe.run(program, feed={"x": FEED["x"]}, fetch_list=fetch_targets)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_crash_mid_save_keeps_previous_files(tmp_path, monkeypatch):
    main, startup, pred, _ = _model()
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_params(exe, str(tmp_path), main)
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    with fluid.scope_guard(scope):
        exe.run(main, feed=FEED)  # params change
        calls = {"n": 0}
        real_fsync = os.fsync

        def dying_fsync(fd):
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt("simulated crash mid-save")
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", dying_fsync)
        with pytest.raises(KeyboardInterrupt):
            fluid.io.save_params(exe, str(tmp_path), main)
    monkeypatch.undo()
    after = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert set(after) == set(before)  # no temporary files left behind
    changed = [n for n in before if after[n] != before[n]]
    assert len(changed) <= 1  # at most the file that completed before the crash; the rest untouched
    for n in after:  # every file on disk is complete and loadable
        with fluid.scope_guard(fluid.Scope()):
            fluid.io.load_vars(exe, str(tmp_path), main, vars=[n])


def test_truncated_and_corrupt_files_raise_clear_errors(tmp_path):
    main, startup, pred, _ = _model()
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_params(exe, str(tmp_path), main)
    path = tmp_path / "fc_0.w_0"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with fluid.scope_guard(fluid.Scope()), pytest.raises(fluid.core.EnforceNotMet, match=r"fc_0\.w_0.*truncated"):
        fluid.io.load_params(exe, str(tmp_path), main)
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with fluid.scope_guard(fluid.Scope()), pytest.raises(fluid.core.EnforceNotMet, match=r"fc_0\.w_0.*checksum"):
        fluid.io.load_params(exe, str(tmp_path), main)


def test_loading_into_a_different_shape_names_var_and_shapes(tmp_path):
    main, startup, pred, _ = _model(size=4)
    scope = fluid.Scope()
    exe, _ = _train(main, startup, pred, scope)
    with fluid.scope_guard(scope):
        fluid.io.save_params(exe, str(tmp_path), main)
    other, other_startup, _, _ = _model(size=6)
    with fluid.scope_guard(fluid.Scope()), pytest.raises(fluid.core.EnforceNotMet,
                                                         match=r"fc_0\.w_0.*\[3, 4\].*\[3, 6\]"):
        fluid.io.load_params(exe, str(tmp_path), other)
