"""The problem the optimizer tests share (tests/test_optimizers.py, tests/ops/test_{sgd,momentum,adam}.py):
an fc regression from fixed weights, its loss, and numpy's gradients of it."""
import numpy as np

import fluidlite as fluid

# float32-representable: NumpyArrayInitializer stores values as fp32 (Fluid's assign_value)
W0 = np.array([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.8]], dtype=np.float32).astype(np.float64)
B0 = np.array([0.05, -0.1], dtype=np.float32).astype(np.float64)
X = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [0.0, 1.0, 1.0], [2.0, 0.1, -0.3]])
Y = np.array([[0.3, -0.7], [1.2, 0.4], [-0.5, 0.9], [0.1, 0.2]])


def _build(opt_factory, dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype=dtype)
        y = fluid.layers.data(name="y", shape=[2], dtype=dtype)
        pred = fluid.layers.fc(input=x, size=2, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(W0)),
            bias_attr=fluid.ParamAttr(name="b", initializer=fluid.initializer.NumpyArrayInitializer(B0)))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        opt = opt_factory()
        ops, params_grads = opt.minimize(loss)
    return main, startup, loss, ops, params_grads


F32 = lambda v: float(np.float32(v))  # attributes and the LR variable are float32, as in Fluid


def _numpy_grads(w, b):
    pred = X @ w + b
    d = 2 * (pred - Y) / pred.size
    return X.T @ d, d.sum(0)


def _run(main, startup, steps):
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, scope=scope, fetch_list=[])
    return (np.array(scope.find_var("w").get_tensor()), np.array(scope.find_var("b").get_tensor()), scope)
