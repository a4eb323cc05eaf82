"""fluid.save / fluid.load / fluid.io.load_program_state / set_program_state in Fluid 1.6's formats:
round trips against numpy, plain pickles as real Fluid writes them, mismatches, corrupt files, crashes."""
import os
import pickle

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import io as fio

FEED = {"x": np.random.RandomState(0).rand(5, 3).astype("float32"),
        "y": np.random.RandomState(1).rand(5, 1).astype("float32")}


def _model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        pred = fluid.layers.fc(input=fluid.layers.fc(input=x, size=4, act="relu"), size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    return main, startup, pred


def _trained(steps=2):
    main, startup, pred = _model()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(steps):
            exe.run(main, feed=FEED)
    return main, startup, pred, scope, exe


def _scope_state(scope, names):
    return {n: np.array(scope.find_var(n).get_tensor()) for n in names}


PARAMS = ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]


def test_save_writes_fluids_three_files_and_load_restores_training(tmp_path):
    main, startup, pred, scope, exe = _trained()
    path = str(tmp_path / "ckpt" / "model")
    with fluid.scope_guard(scope):
        fluid.save(main, path)
        saved_params = _scope_state(scope, PARAMS)
        ref = exe.run(main, feed=FEED, fetch_list=[pred])[0]  # the next step, from the saved state
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["__fluidlite_manifest__.json", "model.pdmodel", "model.pdopt",
                                                     "model.pdparams"]
    with open(path + ".pdparams", "rb") as f:
        params = pickle.load(f)  # a plain pickle, as Fluid writes it
    assert sorted(params) == PARAMS
    with open(path + ".pdopt", "rb") as f:
        opt = pickle.load(f)
    assert {"fc_0.w_0_moment1_0", "fc_0.w_0_moment2_0", "fc_0.w_0_beta1_pow_acc_0"} <= set(opt)
    assert not set(opt) & set(PARAMS) and "x" not in opt
    with open(path + ".pdmodel", "rb") as f:
        program = fluid.Program.parse_from_string(f.read())
    assert [op.type for op in program.global_block().ops] == [op.type for op in main.global_block().ops]
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        exe.run(startup)
        assert not np.array_equal(np.array(fresh.find_var("fc_0.w_0").get_tensor()), saved_params["fc_0.w_0"])
        fluid.load(main, path + ".pdparams", exe)  # any of the three names, or the prefix
        for n in PARAMS:
            np.testing.assert_array_equal(np.array(fresh.find_var(n).get_tensor()), saved_params[n])
        fluid.load(main, path, exe)
        got = exe.run(main, feed=FEED, fetch_list=[pred])[0]
    np.testing.assert_array_equal(got, ref)


def test_load_reads_plain_pickles_written_by_fluid(tmp_path):
    main, startup, pred, scope, exe = _trained()
    with fluid.scope_guard(scope):
        state = _scope_state(scope, [v.name for v in main.list_vars() if fio.is_persistable(v)])
    params = {n: state[n] for n in PARAMS}
    opt = {n: v for n, v in state.items() if n not in PARAMS}
    params["fc_0.w_0"] = np.arange(12, dtype="float32").reshape(3, 4)
    for suffix, d in ((".pdparams", params), (".pdopt", opt)):
        with open(str(tmp_path / "fluid") + suffix, "wb") as f:
            pickle.dump(d, f, protocol=2)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.load(main, str(tmp_path / "fluid"))  # executor=None: Fluid allows it
        np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()),
                                      params["fc_0.w_0"])
    got = fluid.io.load_program_state(str(tmp_path / "fluid"))
    assert sorted(got) == sorted(state)
    for n, v in got.items():
        np.testing.assert_array_equal(v, params.get(n, state[n]))


def _write_pickles(prefix, params, opt=None):
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump(params, f, protocol=2)
    if opt is not None:
        with open(prefix + ".pdopt", "wb") as f:
            pickle.dump(opt, f, protocol=2)


def test_load_names_the_missing_or_mismatched_variable(tmp_path):
    main, startup, pred, scope, exe = _trained()
    with fluid.scope_guard(scope):
        fluid.save(main, str(tmp_path / "good"))
    params = fluid.io.load_program_state(str(tmp_path / "good"))
    opt = {n: params.pop(n) for n in list(params) if n not in PARAMS}
    prefix = str(tmp_path / "bad")
    cases = [
        (dict(params, **{"fc_1.w_0": np.zeros((4, 2), "float32")}),
         r"fluid.load: variable fc_1.w_0 has shape \[4, 2\] in .*bad.pdparams, the program declares \[4, 1\]"),
        (dict(params, **{"fc_1.w_0": params["fc_1.w_0"].astype("float64")}),
         r"fluid.load: variable fc_1.w_0 is float64 in .*bad.pdparams, the program declares float32"),
        ({n: v for n, v in params.items() if n != "fc_0.b_0"},
         r"fluid.load: can not find variable fc_0.b_0 in the model file .*bad.pdparams"),
    ]
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        before = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
        for bad, msg in cases:
            _write_pickles(prefix, bad, opt)
            with pytest.raises(ValueError, match=msg):
                fluid.load(main, prefix, exe)
            # nothing was set: every file is checked first
            np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()), before)
        _write_pickles(prefix, params)
        os.remove(prefix + ".pdopt")
        with pytest.raises(ValueError, match=r"the program has optimizer variables .* but .*bad.pdopt does not exist"):
            fluid.load(main, prefix, exe)


def test_truncated_corrupt_and_foreign_pickles_raise_naming_the_file(tmp_path):
    main, startup, pred, scope, exe = _trained()
    prefix = str(tmp_path / "plain")
    with fluid.scope_guard(scope):
        params = _scope_state(scope, PARAMS)
    _write_pickles(prefix, params)
    data = open(prefix + ".pdparams", "rb").read()
    with open(prefix + ".pdparams", "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"cannot load the saved state from .*plain.pdparams: the file "
                                                       r"is truncated or corrupt"):
        fluid.io.load_program_state(prefix)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump({"fc_0.w_0": Evil()}, f, protocol=2)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"it names posix.system; only dicts of numpy arrays"):
        fluid.io.load_program_state(prefix)
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump([1, 2], f, protocol=2)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"it holds list, not a dict of \{name: ndarray\}"):
        fluid.io.load_program_state(prefix)
    # A file of fluid.save is checked against its manifest: a truncation is caught before unpickling.
    with fluid.scope_guard(scope):
        fluid.save(main, str(tmp_path / "saved"))
    path = str(tmp_path / "saved.pdopt")
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-10])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"the file has \d+ bytes, the save manifest .* records \d+"):
        fluid.io.load_program_state(str(tmp_path / "saved"))


def test_a_crash_mid_save_keeps_the_previous_save(tmp_path, monkeypatch):
    main, startup, pred, scope, exe = _trained()
    path = str(tmp_path / "model")
    with fluid.scope_guard(scope):
        fluid.save(main, path)
        first = _scope_state(scope, PARAMS)
        exe.run(main, feed=FEED)  # the parameters move on
        real_write = fio._write_file

        def dies_on_pdopt(p, chunks):
            if ".pdopt" in p:
                raise KeyboardInterrupt("killed mid-save")
            return real_write(p, chunks)
        monkeypatch.setattr(fio, "_write_file", dies_on_pdopt)
        with pytest.raises(KeyboardInterrupt):
            fluid.save(main, path)
        monkeypatch.setattr(fio, "_write_file", real_write)
    state = fluid.io.load_program_state(path)
    for n in PARAMS:
        np.testing.assert_array_equal(state[n], first[n])
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # its temporary files are gone


def test_set_program_state_checks_and_warns(tmp_path):
    main, startup, pred, scope, exe = _trained()
    with fluid.scope_guard(scope):
        fluid.save(main, str(tmp_path / "m"))
        ref = exe.run(main.clone(for_test=True), feed=FEED, fetch_list=[pred])[0]
    state = fluid.io.load_program_state(str(tmp_path / "m"))
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.set_program_state(main, state)
        got = exe.run(main.clone(for_test=True), feed=FEED, fetch_list=[pred])[0]
        np.testing.assert_array_equal(got, ref)
        with pytest.warns(UserWarning, match="the program has no such persistable variable: extra_var"):
            fluid.io.set_program_state(main, dict(state, extra_var=np.zeros(2)))
        w = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
        with pytest.raises(ValueError, match=r"set_program_state: shape mismatch for variable fc_0.w_0: the program's "
                                             r"tensor has shape \[3, 4\], the state has \[4, 3\]"):
            fluid.io.set_program_state(main, dict(state, **{"fc_0.w_0": np.zeros((4, 3), "float32"),
                                                            "fc_0.b_0": np.ones(4, "float32")}))
        with pytest.raises(ValueError, match="dtype mismatch for variable fc_0.w_0: the program's tensor is float32, "
                                             "the state has float64"):
            fluid.io.set_program_state(main, {"fc_0.w_0": np.zeros((3, 4))})
        np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()), w)
        assert not np.array_equal(np.array(fluid.global_scope().find_var("fc_0.b_0").get_tensor()), np.ones(4))
    with fluid.scope_guard(fluid.Scope()):
        with pytest.warns(UserWarning, match="variable fc_0.w_0 is not set: it is not in the scope"):
            fluid.io.set_program_state(main, {"fc_0.w_0": state["fc_0.w_0"]})


def test_load_falls_back_to_save_persistables_directories(tmp_path):
    main, startup, pred, scope, exe = _trained()
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path / "dir"), main)
        fluid.io.save_persistables(exe, str(tmp_path / "one"), main, filename="all")
        ref = _scope_state(scope, PARAMS)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.load(main, str(tmp_path / "dir"), exe)
        for n in PARAMS:
            np.testing.assert_array_equal(np.array(fluid.global_scope().find_var(n).get_tensor()), ref[n])
        with pytest.raises(ValueError, match="needs an executor"):
            fluid.load(main, str(tmp_path / "dir"))
        with pytest.raises(ValueError, match=r"one/all is a single file .* pass var_list"):
            fluid.load(main, str(tmp_path / "one" / "all"), exe)
    state = fluid.io.load_program_state(str(tmp_path / "dir"))
    assert set(PARAMS) <= set(state) and "fc_0.w_0_moment1_0" in state
    for n in PARAMS:
        np.testing.assert_array_equal(state[n], ref[n])
    params = [main.global_block().var(n) for n in PARAMS]
    one = fluid.io.load_program_state(str(tmp_path / "one" / "all"), var_list=params)
    for n in PARAMS:
        np.testing.assert_array_equal(one[n], ref[n])


def test_get_inference_program_is_the_pruned_test_program():
    main, _, pred = _model()
    infer = fluid.io.get_inference_program(pred, main)
    types = [op.type for op in infer.global_block().ops]
    assert types == ["mul", "elementwise_add", "relu", "mul", "elementwise_add"]
    assert "y" not in infer.global_block().vars
