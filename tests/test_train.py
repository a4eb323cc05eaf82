"""End-to-end training: Fluid's fit_a_line (unchanged but for the import) and an MLP classifier."""
import numpy as np

import fluidlite as fluid


def test_fit_a_line_reaches_low_mse():
    rng = np.random.RandomState(0)
    true_w = rng.uniform(-1, 1, size=(13, 1)).astype("float32")
    xs = rng.uniform(-1, 1, size=(400, 13)).astype("float32")
    ys = (xs @ true_w + 0.5).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y))
        fluid.optimizer.SGD(learning_rate=0.05).minimize(avg_cost)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    first = None
    for _epoch in range(30):
        for i in range(0, 400, 20):
            loss, = exe.run(main, feed={"x": xs[i:i + 20], "y": ys[i:i + 20]}, fetch_list=[avg_cost], scope=scope)
            first = float(loss[0]) if first is None else first
    assert float(loss[0]) < 0.01 < first


def test_mlp_classifier_reaches_90_percent():
    rng = np.random.RandomState(1)
    n, classes = 512, 10
    centers = rng.randn(classes, 784).astype("float32") * 0.5
    labels = rng.randint(0, classes, size=(n, 1)).astype("int64")
    images = (centers[labels[:, 0]] + rng.randn(n, 784).astype("float32") * 0.5).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        img = fluid.layers.data(name="img", shape=[784], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=img, size=512, act="relu")
        h = fluid.layers.fc(input=h, size=512, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(input=fluid.layers.softmax(logits), label=label)
        fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for _epoch in range(3):
        for i in range(0, n, 64):
            exe.run(main, feed={"img": images[i:i + 64], "label": labels[i:i + 64]}, scope=scope)
    accs = [exe.run(main, feed={"img": images[i:i + 64], "label": labels[i:i + 64]}, fetch_list=[acc],
                    scope=scope)[0][0] for i in range(0, n, 64)]
    assert np.mean(accs) > 0.9
