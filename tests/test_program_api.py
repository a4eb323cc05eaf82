"""Small program-level Fluid names: framework.grad_var_name, initializer.init_on_cpu, the default programs,
and save_inference_model's Fluid 1.8 parameters (program_only, export_for_deployment, params_filename)."""
import os

import numpy as np
import pytest

import fluidlite as fluid


def test_grad_var_name_and_default_programs():
    assert fluid.framework.grad_var_name("fc_0.w_0") == "fc_0.w_0@GRAD"
    assert fluid.default_main_program() is fluid.framework.default_main_program()
    assert fluid.default_startup_program() is fluid.framework.default_startup_program()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        assert fluid.default_main_program() is main and fluid.default_startup_program() is startup
        x = fluid.layers.data(name="x", shape=[2], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.backward.append_backward(loss)
    assert fluid.framework.grad_var_name(loss.name) in main.global_block().vars


def test_init_on_cpu_sets_force_cpu_on_constant_initializers_inside_only():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        assert not fluid.initializer.force_init_on_cpu()
        with fluid.initializer.init_on_cpu():
            assert fluid.initializer.force_init_on_cpu()
            fluid.layers.create_global_var([1], 0.5, "float32", persistable=True, name="lr_inside")
        fluid.layers.create_global_var([1], 0.5, "float32", persistable=True, name="lr_outside")
        assert not fluid.initializer.force_init_on_cpu()
    force = {op.output("Out")[0]: op.attr("force_cpu") for op in startup.global_block().ops}
    assert force == {"lr_inside": True, "lr_outside": False}
    with pytest.raises(RuntimeError, match="boom"):
        with fluid.initializer.init_on_cpu():
            raise RuntimeError("boom")
    assert not fluid.initializer.force_init_on_cpu()


def _model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        pred = fluid.layers.fc(x, 1)
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(fluid.layers.square_error_cost(pred, y)))
    exe = fluid.Executor(fluid.CPUPlace())
    return main, startup, pred, exe


def test_save_inference_model_fluid_18_parameters(tmp_path):
    main, startup, pred, exe = _model()
    xv = np.random.RandomState(0).rand(2, 3).astype("float32")
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.warns(UserWarning, match="program_only=True, the parameters of the program are not saved"):
            fluid.io.save_inference_model(str(tmp_path / "p"), ["x"], [pred], exe, main, program_only=True)
        assert sorted(os.listdir(tmp_path / "p")) == ["__fluidlite_manifest__.json", "__model__",
                                                      "__model__.meta.json"]
        fluid.io.save_inference_model(str(tmp_path / "full"), ["x"], [pred], exe, main, export_for_deployment=False)
        assert "__model__.main_program" in os.listdir(tmp_path / "full")
        assert "__model__" not in os.listdir(tmp_path / "full")
        whole = fluid.Program.parse_from_string((tmp_path / "full" / "__model__.main_program").read_bytes())
        assert "sgd" in [op.type for op in whole.global_block().ops]
        fluid.io.save_inference_model(str(tmp_path / "c"), ["x"], [pred], exe, main,
                                      params_filename=str(tmp_path / "elsewhere" / "params"))
        assert "params" in os.listdir(tmp_path / "c") and not os.path.exists(tmp_path / "elsewhere")
        ref = exe.run(fluid.io.get_inference_program(pred, main), feed={"x": xv}, fetch_list=[pred])[0]
        with pytest.raises(ValueError, match="feeded_var_names should be a list of str, got \\[1\\]"):
            fluid.io.save_inference_model(str(tmp_path / "e"), [1], [pred], exe, main)
        with pytest.raises(ValueError, match="target_vars should be a Variable or a non-empty list of Variables"):
            fluid.io.save_inference_model(str(tmp_path / "e"), ["x"], ["fc_0.tmp_1"], exe, main)
        with pytest.raises(TypeError, match="main_program should be a Program or None, got str"):
            fluid.io.save_inference_model(str(tmp_path / "e"), ["x"], [pred], exe, "main")
    with fluid.scope_guard(fluid.Scope()):
        program, _, fetch = fluid.io.load_inference_model(str(tmp_path / "c"), exe, params_filename="params")
        np.testing.assert_allclose(exe.run(program, feed={"x": xv}, fetch_list=fetch)[0], ref, rtol=1e-6)
