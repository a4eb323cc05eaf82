"""CompiledProgram / BuildStrategy / ExecutionStrategy / ParallelExecutor on one process: strategy fields,
the data-parallel feed, gradient-scale and fetch rules of docs/parallel.md against numpy."""
import numpy as np
import pytest

import fluidlite as fluid

LR = 0.1
X = np.random.RandomState(0).rand(4, 3).astype("float32")
Y = np.random.RandomState(1).rand(4, 1).astype("float32")


def _linear():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(
            0.5)), bias_attr=fluid.ParamAttr(name="b", initializer=fluid.initializer.Constant(0.1)))
        loss = fluid.layers.mean(fluid.layers.square(pred - y))
        fluid.optimizer.SGD(LR).minimize(loss)
    return main, startup, pred, loss


def _sgd_reference(x, y, grad_scale):
    """One SGD step of mean((x w + b - y)^2) from w=0.5, b=0.1, the gradient multiplied by grad_scale."""
    w, b = np.full((3, 1), 0.5, "float64"), 0.1
    err = x @ w + b - y
    gw, gb = 2 * x.T @ err / len(x), 2 * err.mean()
    return w - LR * grad_scale * gw, b - LR * grad_scale * gb, (err ** 2).mean()


def _run_one_step(compiled_of, feed):
    main, startup, pred, loss = _linear()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        out = exe.run(compiled_of(main, loss), feed=feed, fetch_list=[loss, pred])
        w, b = (np.array(scope.find_var(n).get_tensor()) for n in ("w", "b"))
    return out, w, b


def test_build_strategy_fields_defaults_and_enums():
    bs = fluid.BuildStrategy()
    assert bs.reduce_strategy == fluid.BuildStrategy.ReduceStrategy.AllReduce
    assert bs.gradient_scale_strategy == fluid.BuildStrategy.GradientScaleStrategy.CoeffNumDevice
    assert (bs.fuse_all_reduce_ops, bs.fuse_elewise_add_act_ops, bs.memory_optimize, bs.enable_inplace) == \
        (False, False, None, False)
    assert bs.remove_unnecessary_lock is True and bs.num_trainers == 1 and bs.debug_graphviz_path == ""
    bs.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    bs.fuse_all_optimizer_ops = True
    assert bs.reduce_strategy == fluid.BuildStrategy.ReduceStrategy.Reduce
    with pytest.raises(AttributeError, match="'BuildStrategy' object has no attribute 'fuse_all_reduce_op' "):
        bs.fuse_all_reduce_op = True
    with pytest.raises(TypeError, match=r"BuildStrategy.reduce_strategy must be a BuildStrategy.ReduceStrategy "
                                        r"\(Reduce, AllReduce\), got 'Reduce'"):
        bs.reduce_strategy = "Reduce"
    with pytest.raises(fluid.core.EnforceNotMet, match="memory_optimize must be None, False or True, got 1"):
        bs.memory_optimize = 1
    es = fluid.ExecutionStrategy()
    assert (es.num_threads, es.num_iteration_per_drop_scope, es.allow_op_delay) == (0, 100, False)
    es.num_threads = 4
    with pytest.raises(AttributeError, match="'ExecutionStrategy' object has no attribute 'num_thread' "):
        es.num_thread = 4


def test_build_strategy_is_finalized_after_the_first_run():
    bs = fluid.BuildStrategy()
    main, startup, _, loss = _linear()
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, build_strategy=bs,
                                                              places=[fluid.CPUPlace()])
    bs.fuse_elewise_add_act_ops = True  # not run yet: still open
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        exe.run(compiled, feed={"x": X, "y": Y})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"^BuildStrategy is finlaized\.$"):
        bs.fuse_elewise_add_act_ops = False
    plain = fluid.BuildStrategy()  # without with_data_parallel too, as Fluid compiles it all the same
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        exe.run(fluid.CompiledProgram(main, build_strategy=plain), feed={"x": X, "y": Y})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"^BuildStrategy is finlaized\.$"):
        plain.enable_inplace = True


def test_one_place_is_the_plain_program():
    (loss, pred), w, b = _run_one_step(lambda m, lo: fluid.CompiledProgram(m), {"x": X, "y": Y})
    ref_w, ref_b, ref_loss = _sgd_reference(X.astype("float64"), Y.astype("float64"), 1)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5)
    np.testing.assert_allclose(b, [ref_b], rtol=1e-5)
    np.testing.assert_allclose(loss, [ref_loss], rtol=1e-5)
    assert pred.shape == (4, 1)


@pytest.mark.parametrize("strategy,scale", [("CoeffNumDevice", 1), ("One", 2)])
@pytest.mark.parametrize("feed_kind", ["dict", "list"])
def test_two_places_scale_the_gradient_and_tile_non_batch_fetches(strategy, scale, feed_kind):
    # Fluid on 2 devices with equal halves: CoeffNumDevice sums 1/2 of each half's gradient (the whole-batch
    # gradient); One sums both (twice it). A [1] loss comes back once per device, the batch-shaped pred whole.
    def compiled(main, loss):
        bs = fluid.BuildStrategy()
        bs.gradient_scale_strategy = getattr(fluid.BuildStrategy.GradientScaleStrategy, strategy)
        return fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, build_strategy=bs,
                                                              places=[fluid.CPUPlace()] * 2)
    feed = {"x": X, "y": Y} if feed_kind == "dict" else [{"x": X[:2], "y": Y[:2]}, {"x": X[2:], "y": Y[2:]}]
    (loss, pred), w, b = _run_one_step(compiled, feed)
    ref_w, ref_b, ref_loss = _sgd_reference(X.astype("float64"), Y.astype("float64"), scale)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5)
    np.testing.assert_allclose(b, [ref_b], rtol=1e-5)
    np.testing.assert_allclose(loss, [ref_loss, ref_loss], rtol=1e-5)
    np.testing.assert_allclose(pred, X @ np.full((3, 1), 0.5) + 0.1, rtol=1e-5)


def test_customized_gradient_scale_uses_the_fed_loss_grad():
    def compiled(main, loss):
        bs = fluid.BuildStrategy()
        bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.Customized
        return fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, build_strategy=bs,
                                                              places=[fluid.CPUPlace()] * 2)
    feed = {"x": X, "y": Y, "mean_0.tmp_0@GRAD": np.array([0.25, 0.25], "float32")}
    _, w, b = _run_one_step(compiled, feed)
    ref_w, ref_b, _ = _sgd_reference(X.astype("float64"), Y.astype("float64"), 0.5)  # 0.25 on each of 2 devices
    np.testing.assert_allclose(w, ref_w, rtol=1e-5)
    np.testing.assert_allclose(b, [ref_b], rtol=1e-5)
    feed["mean_0.tmp_0@GRAD"] = np.array([0.25, 1.0], "float32")
    with pytest.raises(ValueError, match=r"feed: mean_0.tmp_0@GRAD differs between the 2 devices \(\[0.25, 1.0\]\)"):
        _run_one_step(compiled, feed)
    del feed["mean_0.tmp_0@GRAD"]
    with pytest.raises(ValueError, match="Customized, so mean_0.tmp_0@GRAD must be fed"):
        _run_one_step(compiled, feed)

    def one_place(main, loss):  # one device: the fed value is the seed itself
        bs = fluid.BuildStrategy()
        bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.Customized
        return fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, build_strategy=bs,
                                                              places=[fluid.CPUPlace()])
    _, w, _ = _run_one_step(one_place, dict(feed, **{"mean_0.tmp_0@GRAD": np.array([0.5], "float32")}))
    np.testing.assert_allclose(w, ref_w, rtol=1e-5)


def test_cpu_num_sets_the_default_device_count(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    (loss, _), _, _ = _run_one_step(lambda m, lo: fluid.CompiledProgram(m).with_data_parallel(lo.name),
                                    {"x": X, "y": Y})
    assert loss.shape == (2,)
    monkeypatch.setenv("CPU_NUM", "two")
    with pytest.raises(ValueError, match="the CPU_NUM environment variable must be a positive integer, got 'two'"):
        _run_one_step(lambda m, lo: fluid.CompiledProgram(m).with_data_parallel(lo.name), {"x": X, "y": Y})


def test_data_parallel_errors():
    main, startup, _, loss = _linear()
    with pytest.raises(TypeError, match=r"places must be fluid.CPUPlace\(\) / fluid.CUDAPlace\(i\) objects, got str"):
        fluid.CompiledProgram(main).with_data_parallel(loss.name, places=["cpu"])
    with pytest.raises(TypeError, match="places must be a non-empty list of places"):
        fluid.CompiledProgram(main).with_data_parallel(loss.name, places=[])
    with pytest.raises(ValueError, match="loss_name 'nope' is not a variable of the program"):
        fluid.CompiledProgram(main).with_data_parallel("nope")
    with pytest.raises(TypeError, match="CompiledProgram: expects a fluid Program"):
        fluid.CompiledProgram("main")
    with pytest.raises(NotImplementedError, match="with_inference_optimize: fluidlite has no inference engine"):
        fluid.CompiledProgram(main).with_inference_optimize(None)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss.name, places=[fluid.CPUPlace()] * 3)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(ValueError, match="feed: variable 'x' has 2 rows, fewer than the 3 devices"):
            exe.run(compiled, feed={"x": X[:2], "y": Y[:2]}, fetch_list=[loss])
        with pytest.raises(ValueError, match="feed: a list of 2 feed dicts for 3 devices"):
            exe.run(compiled, feed=[{"x": X, "y": Y}] * 2, fetch_list=[loss])


def test_parallel_executor_runs_and_drops_its_scopes(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, pred, loss = _linear()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
    pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main, scope=scope)
    assert pe.device_count == 2
    loss_v, = pe.run(fetch_list=[loss.name], feed={"x": X, "y": Y})
    _, _, ref_loss = _sgd_reference(X.astype("float64"), Y.astype("float64"), 1)
    np.testing.assert_allclose(loss_v, [ref_loss, ref_loss], rtol=1e-5)
    ref_w, _, _ = _sgd_reference(X.astype("float64"), Y.astype("float64"), 1)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), ref_w, rtol=1e-5)
    assert main._exec_cache
    pe.drop_local_exe_scopes()
    assert not main._exec_cache
    with pytest.warns(DeprecationWarning, match="feed_dict` is deprecated"):
        pe.run([loss], feed_dict={"x": X, "y": Y})
    with pytest.raises(TypeError, match="use_cuda must be True or False, got 'no'"):
        fluid.ParallelExecutor("no", loss_name=loss.name, main_program=main)


@pytest.mark.skipif(fluid.core.get_cuda_device_count() > 0, reason="checks the CPU-only error")
def test_parallel_executor_use_cuda_without_cuda_is_a_clear_error():
    main, _, _, loss = _linear()
    with pytest.raises(RuntimeError, match=r"ParallelExecutor\(use_cuda=True\): no CUDA device"):
        fluid.ParallelExecutor(use_cuda=True, loss_name=loss.name, main_program=main)


def test_memory_optimize_and_release_memory_warn_and_leave_the_program_unchanged():
    main, startup, _, loss = _linear()
    before = main.serialize_to_string()
    with pytest.warns(UserWarning, match=r"fluid.memory_optimize\(\) is deprecated .* \(eager deletion\)"):
        fluid.memory_optimize(main, skip_opt_set={loss.name}, print_log=True, level=1)
    with pytest.warns(UserWarning, match=r"fluid.release_memory\(\) is deprecated"):
        fluid.release_memory(main)
    assert main.serialize_to_string() == before
    with pytest.raises(TypeError, match="memory_optimize: input_program must be a fluid Program, got str"):
        fluid.memory_optimize("main")
    with pytest.raises(ValueError, match="memory_optimize: level must be 0 or 1, got 2"):
        fluid.memory_optimize(main, level=2)
