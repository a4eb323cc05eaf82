"""append_backward / gradients: structure (one sum per aggregated gradient, @GRAD naming, pruning) and
values against hand-derived numpy gradients."""
import numpy as np
import pytest

import fluidlite as fluid


def _ops(program):
    return [op.type for op in program.global_block().ops]


def test_diamond_aggregates_with_exactly_one_sum():
    # x feeds three ops; its gradient is the sum of three contributions, added by ONE n-ary sum op.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        a = fluid.layers.scale(x, scale=2.0)
        b = fluid.layers.elementwise_mul(x, x)
        c = fluid.layers.exp(x)
        loss = fluid.layers.mean(fluid.layers.sums([a, b, c]))
        grads = fluid.backward.gradients([loss], [x])
    sums_into_x = [op for op in main.global_block().ops
                   if op.type == "sum" and op.output("Out") == ["x@GRAD"]]
    assert len(sums_into_x) == 1
    assert len(sums_into_x[0].input("X")) == 4  # scale, mul (x twice: X and Y), exp
    assert all("@RENAME@" in n for n in sums_into_x[0].input("X"))
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([0.1, -0.5, 1.5, 2.0])
    g, = exe.run(main, feed={"x": xv}, fetch_list=grads)
    np.testing.assert_allclose(g, (2.0 + 2 * xv + np.exp(xv)) / 4.0, rtol=1e-12)


def test_append_backward_returns_param_grads_and_seeds_with_fill_constant():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.fc(input=x, size=2)
        loss = fluid.layers.mean(y)
        pg = fluid.append_backward(loss)
    names = sorted((p.name, g.name) for p, g in pg)
    assert names == [("fc_0.b_0", "fc_0.b_0@GRAD"), ("fc_0.w_0", "fc_0.w_0@GRAD")]
    seed = [op for op in main.global_block().ops if op.output_arg_names == [loss.name + "@GRAD"]]
    assert seed and seed[0].type == "fill_constant" and seed[0].attr("value") == 1.0
    # the data var is stop_gradient: no x@GRAD is computed
    assert not main.global_block().has_var("x@GRAD")


def test_fc_gradients_match_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[5], dtype="float64")
        y = fluid.layers.fc(input=x, size=3, act="tanh")
        loss = fluid.layers.mean(y)
        pg = dict((p.name, g) for p, g in fluid.append_backward(loss))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.RandomState(0).randn(4, 5)
    gw, gb, w, b = exe.run(main, feed={"x": xv}, scope=scope,
                           fetch_list=[pg["fc_0.w_0"], pg["fc_0.b_0"], "fc_0.w_0", "fc_0.b_0"])
    h = np.tanh(xv @ w + b)
    dh = (1 - h ** 2) / h.size
    np.testing.assert_allclose(gw, xv.T @ dh, rtol=1e-10)
    np.testing.assert_allclose(gb, dh.sum(0), rtol=1e-10)


def test_no_grad_set_prunes_branch_and_fills_zeros():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        w = fluid.layers.data(name="w", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        w.stop_gradient = False
        y = fluid.layers.elementwise_mul(x, w)
        loss = fluid.layers.reduce_sum(y)
        gx, gw = fluid.gradients([loss], [x, w], no_grad_set={"w"})
    assert gw is None or not main.global_block().has_var("w@GRAD") or gw.name == "w@GRAD"
    exe = fluid.Executor(fluid.CPUPlace())
    xv, wv = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    r, = exe.run(main, feed={"x": xv, "w": wv}, fetch_list=[gx])
    np.testing.assert_allclose(r, wv)


def test_stop_gradient_var_gets_no_grad_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        frozen = fluid.layers.scale(x, scale=3.0)
        frozen.stop_gradient = True
        y = fluid.layers.elementwise_add(fluid.layers.scale(x, scale=2.0), frozen)
        loss = fluid.layers.reduce_sum(y)
        g, = fluid.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    r, = exe.run(main, feed={"x": np.ones(3)}, fetch_list=[g])
    np.testing.assert_allclose(r, [2.0, 2.0, 2.0])  # the frozen branch contributes nothing
    assert "sum" not in _ops(main)  # only one contribution reaches x@GRAD


def test_gradients_with_target_gradients():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        dy = fluid.layers.data(name="dy", shape=[3], dtype="float64", append_batch_size=False)
        y = fluid.layers.square(x)
        g, = fluid.gradients([y], [x], target_gradients=[dy])
    exe = fluid.Executor(fluid.CPUPlace())
    xv, dyv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    r, = exe.run(main, feed={"x": xv, "dy": dyv}, fetch_list=[g])
    np.testing.assert_allclose(r, 2 * xv * dyv)


def test_op_without_gradient_on_the_path_is_a_clear_error():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32", append_batch_size=False)
        x.stop_gradient = False
        y = fluid.layers.clip_by_norm(x, max_norm=1.0)
        y.stop_gradient = False
        loss = fluid.layers.mean(y)
        assert not fluid.core.op_proto("clip_by_norm")["has_grad"]
        with pytest.raises(fluid.core.EnforceNotMet, match="clip_by_norm has no gradient"):
            fluid.gradients([loss], [x])


def test_same_var_twice_in_one_op_gets_both_gradients():
    # mul(x, x) is the only consumer: its grad op writes x@GRAD through X@GRAD and Y@GRAD
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(x, x))
        g, = fluid.gradients([loss], [x])
    sums = [op for op in main.global_block().ops if op.type == "sum" and op.output("Out") == ["x@GRAD"]]
    assert len(sums) == 1 and len(sums[0].input("X")) == 2
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([1.0, -2.0, 3.0])
    r, = exe.run(main, feed={"x": xv}, fetch_list=[g])
    np.testing.assert_allclose(r, 2 * xv)


def test_op_role_var_marks_the_last_writer_of_each_parameter_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        w1 = fluid.layers.create_parameter(shape=[4], dtype="float32", name="w1")
        w2 = fluid.layers.create_parameter(shape=[4], dtype="float32", name="w2")
        h = fluid.layers.fc(input=x, size=3)
        y = fluid.layers.elementwise_add(w1, w2)  # one grad op is the last writer of w1@GRAD and w2@GRAD
        loss = fluid.layers.mean(fluid.layers.elementwise_mul(fluid.layers.reduce_sum(h), fluid.layers.reduce_sum(y)))
        pg = fluid.backward.append_backward(loss)
    assert [(p.name, g.name) for p, g in pg] == [("w1", "w1@GRAD"), ("w2", "w2@GRAD"), ("fc_0.w_0", "fc_0.w_0@GRAD"),
                                                  ("fc_0.b_0", "fc_0.b_0@GRAD")]
    marked = [(op.type, op.attr("op_role_var")) for op in main.global_block().ops
              if op.has_attr("op_role_var") and op.attr("op_role_var")]
    # the shared writer records the grad listed last (w2), as one attribute can name one pair
    assert marked == [("elementwise_add_grad", ["w2", "w2@GRAD"]),
                      ("elementwise_add_grad", ["fc_0.b_0", "fc_0.b_0@GRAD"]),
                      ("mul_grad", ["fc_0.w_0", "fc_0.w_0@GRAD"])]
    ops = list(main.global_block().ops)
    for i, op in enumerate(ops):  # each marked op is the last writer of the grad it names
        if op.has_attr("op_role_var") and op.attr("op_role_var"):
            grad = op.attr("op_role_var")[1]
            assert grad in op.output_arg_names and not any(grad in o.output_arg_names for o in ops[i + 1:])



def _gather_model(index_fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=x, size=3)
        g = fluid.layers.gather(h, index_fn(label, h))
        loss = fluid.layers.mean(g)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup


@pytest.mark.parametrize("index_fn, index_of", [
    # Fluid's classifier idiom: an int64 label reshaped and cast into gather's Index.
    (lambda lab, h: fluid.layers.cast(fluid.layers.reshape(lab, [-1]), "int32"),
     lambda lv, hv: lv.reshape(-1)),
    # The integer output of a differentiable op (top_k's Indices) of the very tensor gathered from.
    (lambda lab, h: fluid.layers.reshape(fluid.layers.topk(h, k=1)[1], [-1]),
     lambda lv, hv: hv.argmax(1)),
    # An op without gradient (increment) on the integer path.
    (lambda lab, h: fluid.layers.increment(fluid.layers.fill_constant([1], "int64", 1), value=1.0, in_place=False),
     lambda lv, hv: np.array([2])),
])
def test_no_gradient_flows_into_integer_index_paths(index_fn, index_of):
    main, startup = _gather_model(index_fn)
    # Grad ops only for the float path: no cast/reshape/top_k/increment grads, no zeros for int gradients.
    grad_ops = [op.type for op in main.global_block().ops if op.attr("op_role") & 1]
    assert sorted(grad_ops) == ["elementwise_add_grad", "fill_constant", "gather_grad", "mul_grad",
                                "reduce_mean_grad"]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.core.Scope()
    exe.run(startup, scope=scope)
    w0 = np.array(scope.find_var("fc_0.w_0").get_tensor())
    b0 = np.array(scope.find_var("fc_0.b_0").get_tensor())
    xv = np.random.RandomState(0).rand(6, 4).astype("float32")
    lv = np.array([[0], [2], [2], [5], [1], [2]], "int64")
    # d mean(gather(x @ W + b, idx)) / dW = x^T @ dH, dH[i] = (count of i in idx) / (len(idx) * 3).
    idx = index_of(lv, xv @ w0 + b0)
    dh = np.zeros((6, 3), "float32")
    np.add.at(dh, idx, 1.0 / (len(idx) * 3))
    gw, gb = exe.run(main, feed={"x": xv, "label": lv}, fetch_list=["fc_0.w_0@GRAD", "fc_0.b_0@GRAD"], scope=scope)
    np.testing.assert_allclose(gw, xv.T @ dh, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gb, dh.sum(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.array(scope.find_var("fc_0.w_0").get_tensor()), w0 - 0.1 * xv.T @ dh, rtol=1e-5,
                               atol=1e-7)


def test_calc_gradient_returns_one_variable_for_one_input_and_gradients_always_a_list():
    # Fluid 1.8: calc_gradient unwraps a result of length 1 (a single x or a list of one); gradients never does.
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        z = fluid.layers.data(name="z", shape=[3], dtype="float64", append_batch_size=False)
        z.stop_gradient = False
        y = fluid.layers.elementwise_mul(fluid.layers.square(x), z)
        g = fluid.backward.calc_gradient(y, x)
        g_list_of_one = fluid.backward.calc_gradient([y], [x])
        both = fluid.backward.calc_gradient(y, [x, z])
        listed = fluid.gradients(y, x)
    assert isinstance(g, fluid.Variable) and isinstance(g_list_of_one, fluid.Variable)
    assert isinstance(both, list) and len(both) == 2
    assert isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], fluid.Variable)
    xv, zv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    r, rz = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "z": zv}, fetch_list=[g, both[1]])
    np.testing.assert_allclose(r, 2 * xv * zv)
    np.testing.assert_allclose(rz, xv ** 2)
