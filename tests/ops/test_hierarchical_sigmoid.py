"""hierarchical_sigmoid (kernels/hierarchical_sigmoid.cc, layers.hsigmoid): default and custom trees against a
numpy reference (Fluid's: positions beyond a short path add log 2), gradients for X, W and Bias against
central differences, a model that learns, and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def default_path(label, num_classes):
    c = label + num_classes
    length = int(np.floor(np.log2(c)))
    return [(c >> (j + 1)) - 1 for j in range(length)], [(c >> j) & 1 for j in range(length)]


def np_hsigmoid(x, w, label, bias, num_classes, table=None, code=None):
    n = x.shape[0]
    width = table.shape[1] if table is not None else int(num_classes - 1).bit_length()
    pre = np.zeros((n, width))
    out = np.zeros((n, 1))
    for i in range(n):
        if table is not None:
            length = int(np.argmax(table[i] < 0)) if (table[i] < 0).any() else width
            nodes, bits = table[i][:length], code[i][:length]
        else:
            nodes, bits = default_path(int(label[i, 0]), num_classes)
        for j, (node, bit) in enumerate(zip(nodes, bits)):
            s = x[i] @ w[node] + (bias[node, 0] if bias is not None else 0.0)
            pre[i, j] = np.clip(s, -40, 40)
            if bit:
                out[i, 0] -= pre[i, j]
    pre = np.log1p(np.exp(pre))
    return out + pre.sum(1, keepdims=True), pre


@pytest.mark.parametrize("num_classes", [2, 6, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hsigmoid_default_tree_forward(num_classes, dtype):
    rng = np.random.RandomState(num_classes)
    x = rng.uniform(-1, 1, (5, 4)).astype(dtype)
    w = rng.uniform(-1, 1, (num_classes - 1, 4)).astype(dtype)
    bias = rng.uniform(-1, 1, (num_classes - 1, 1)).astype(dtype)
    label = rng.randint(0, num_classes, (5, 1)).astype("int64")
    out, pre = np_hsigmoid(x.astype("float64"), w.astype("float64"), label, bias.astype("float64"), num_classes)
    OpTest("hierarchical_sigmoid", {"X": x, "W": w, "Label": label, "Bias": bias},
           {"Out": out.astype(dtype), "PreOut": pre.astype(dtype)}, {"num_classes": num_classes}).check_output(
        rtol=1e-5, atol=1e-6)


def _custom_tree():
    # 4 classes over 3 nodes: paths of lengths 2, 2, 1, 2 padded with -1
    table = np.array([[0, 1, -1], [0, 1, -1], [0, -1, -1], [0, 2, -1]], "int64")
    code = np.array([[0, 0, -1], [0, 1, -1], [1, -1, -1], [1, 1, -1]], "int64")
    return table, code


def test_hsigmoid_custom_tree_forward_and_grad():
    rng = np.random.RandomState(1)
    table, code = _custom_tree()
    x = rng.uniform(-1, 1, (4, 3))
    w = rng.uniform(-1, 1, (3, 3))
    bias = rng.uniform(-1, 1, (3, 1))
    label = np.array([[0], [1], [2], [3]], "int64")
    out, pre = np_hsigmoid(x, w, label, bias, 3, table, code)
    t = OpTest("hierarchical_sigmoid", {"X": x, "W": w, "Label": label, "PathTable": table, "PathCode": code,
                                        "Bias": bias}, {"Out": out, "PreOut": pre}, {"num_classes": 3})
    t.check_output()
    t.check_grad(["X", "W", "Bias"], "Out")


def test_hsigmoid_default_tree_grad_no_bias():
    rng = np.random.RandomState(2)
    x = rng.uniform(-1, 1, (4, 3))
    w = rng.uniform(-1, 1, (5, 3))
    label = np.array([[0], [5], [3], [2]], "int64")
    out, pre = np_hsigmoid(x, w, label, None, 6)
    OpTest("hierarchical_sigmoid", {"X": x, "W": w, "Label": label}, {"Out": out, "PreOut": pre},
           {"num_classes": 6}).check_grad(["X", "W"], "Out")


def test_hsigmoid_layer_trains():
    rng = np.random.RandomState(3)
    classes, d = 8, 6
    centers = rng.randn(classes, d).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[d], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        loss = fluid.layers.mean(fluid.layers.hsigmoid(x, lbl, classes))
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    losses = []
    for _ in range(40):
        lv = rng.randint(0, classes, (32, 1)).astype("int64")
        xv = centers[lv[:, 0]] + 0.1 * rng.randn(32, d).astype("float32")
        losses.append(exe.run(main, feed={"x": xv, "lbl": lv}, fetch_list=[loss])[0][0])
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses


def test_hsigmoid_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        table = fluid.layers.data(name="table", shape=[3], dtype="int64")
        with pytest.raises(ValueError, match=r"hsigmoid: num_classes must not be less than 2 with the default tree"):
            fluid.layers.hsigmoid(x, lbl, 1)
        with pytest.raises(ValueError, match=r"hsigmoid: is_custom=True needs both path_table and path_code"):
            fluid.layers.hsigmoid(x, lbl, 3, path_table=table, is_custom=True)
        with pytest.raises(ValueError, match=r"hsigmoid: path_table and path_code are only used with is_custom"):
            fluid.layers.hsigmoid(x, lbl, 3, path_table=table, path_code=table)
        flbl = fluid.layers.data(name="flbl", shape=[1], dtype="float32")
        with pytest.raises(TypeError, match=r"hsigmoid: 'label' \(flbl\) must be int64, got float32"):
            fluid.layers.hsigmoid(x, flbl, 3)
        block = main.global_block()
        w = block.create_var(name="w", shape=[4, 5], dtype="float32")
        outs = {"Out": [block.create_var(name="o", dtype="float32")],
                "PreOut": [block.create_var(name="p", dtype="float32")]}
        with pytest.raises(fluid.core.EnforceNotMet, match=r"hierarchical_sigmoid: W 'w' \[4, 5\] must have the "
                                                           r"width of X 'x' \[-1, 3\]"):
            block.append_op(type="hierarchical_sigmoid", inputs={"X": [x], "W": [w], "Label": [lbl]}, outputs=outs,
                            attrs={"num_classes": 5})
        out = fluid.layers.hsigmoid(x, lbl, 4)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"hierarchical_sigmoid: Label 'lbl' holds 4 at row 1, out "
                                                       r"of range \[0, 4\) \(num_classes\)"):
        exe.run(main, feed={"x": np.ones((2, 3), "float32"), "lbl": np.array([[0], [4]], "int64")}, fetch_list=[out])


def _fluid_style_program(with_w_out):
    """hsigmoid as Fluid 1.8's layer writes it (W_Out = W, the parameter-server alias), or without W_Out."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        w = fluid.layers.create_parameter(shape=[5, 3], dtype="float32", name="hs_w",
                                          default_initializer=fluid.initializer.Constant(0.1))
        block = main.global_block()
        out = block.create_var(name="hs_out", dtype="float32")
        pre = block.create_var(name="hs_pre", dtype="float32")
        outputs = {"Out": [out], "PreOut": [pre]}
        if with_w_out:
            outputs["W_Out"] = [w]
        block.append_op(type="hierarchical_sigmoid", inputs={"X": [x], "W": [w], "Label": [lbl]}, outputs=outputs,
                        attrs={"num_classes": 6, "is_sparse": False, "remote_prefetch": False})
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    return main, startup, loss


def test_hsigmoid_w_out_alias_trains_like_without_it():
    rng = np.random.RandomState(4)
    feeds = [{"x": rng.randn(8, 3).astype("float32"), "lbl": rng.randint(0, 6, (8, 1)).astype("int64")}
             for _ in range(5)]
    results = []
    for with_w_out in (True, False):
        main, startup, loss = _fluid_style_program(with_w_out)
        scope = fluid.Scope()
        exe = fluid.Executor(fluid.CPUPlace())
        with fluid.scope_guard(scope):
            exe.run(startup)
            losses = [exe.run(main, feed=f, fetch_list=[loss])[0][0] for f in feeds]
            results.append((losses, np.array(scope.find_var("hs_w").get_tensor())))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert not np.allclose(results[0][1], 0.1)  # W was trained through the alias


def test_hsigmoid_w_out_must_be_w():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        lbl = fluid.layers.data(name="lbl", shape=[1], dtype="int64")
        block = main.global_block()
        w = block.create_var(name="w", shape=[5, 3], dtype="float32")
        other = block.create_var(name="other", shape=[5, 3], dtype="float32")
        outs = {"Out": [block.create_var(name="o", dtype="float32")],
                "PreOut": [block.create_var(name="p", dtype="float32")], "W_Out": [other]}
        with pytest.raises(fluid.core.EnforceNotMet, match=r"hierarchical_sigmoid: W_Out 'other' must be W 'w' "
                                                           r"itself"):
            block.append_op(type="hierarchical_sigmoid", inputs={"X": [x], "W": [w], "Label": [lbl]}, outputs=outs,
                            attrs={"num_classes": 6})
