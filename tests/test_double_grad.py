"""Gradients of gradients: fluid.gradients(fluid.gradients(y, x), x) against central differences of the
first gradient. Composed gradients are made of differentiable ops, and grad ops with a kernel carry a
composed gradient of their own (grad_op_maker.h), so any order works; here the second order is checked for
the elementwise, activation, mul/matmul, reduce and mean ops, and for the grad ops of the linear shape ops
(concat, reshape2, flatten2, squeeze2, unsqueeze2, slice, gather, lod_reset, lookup_table and lookup_table_v2), whose
gradient is composed.

Each test records (op_test.record_checked) the generated grad op whose own gradient it compared with central
differences: <op>_grad, present in the first pass and differentiated by the second one.

For inputs x_k and random weights w_k the checked quantity is H w = d(sum_k <dy/dx_k, w_k>)/dx, compared
with (L(x + d e_i) - L(x - d e_i)) / 2d, L = sum_k <dy/dx_k, w_k> computed by the first-order program."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import record_checked

L = fluid.layers
rng = np.random.RandomState(7)


def _check_double_grad(build, shapes, low=0.5, high=1.5, delta=1e-5, rtol=1e-6, atol=1e-8):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = []
        for i, s in enumerate(shapes):
            v = L.data("x%d" % i, shape=list(s), dtype="float64", append_batch_size=False)
            v.stop_gradient = False
            xs.append(v)
        first = fluid.gradients([L.reduce_sum(build(*xs))], xs)
        ws = [L.data("w%d" % i, shape=list(s), dtype="float64", append_batch_size=False) for i, s in enumerate(shapes)]
        terms = [L.reduce_sum(L.elementwise_mul(g, w)) for g, w in zip(first, ws) if g is not None]
        weighted = terms[0] if len(terms) == 1 else L.sums(terms)
        second = fluid.gradients([weighted], xs)
    assert all(g is not None for g in second)
    # the second pass writes fresh gradient names: it does not overwrite the first pass's x@GRAD
    assert {g.name for g in first if g is not None}.isdisjoint(g.name for g in second)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x%d" % i: rng.uniform(low, high, s) * rng.choice([-1, 1], s) if low < 0 else rng.uniform(low, high, s)
            for i, s in enumerate(shapes)}
    feed.update({"w%d" % i: rng.uniform(-1, 1, s) for i, s in enumerate(shapes)})
    got = exe.run(main, feed=feed, fetch_list=second)
    for x, analytic in zip(xs, got):
        numeric = np.zeros(analytic.shape)
        flat = numeric.reshape(-1)
        for i in range(flat.size):
            for sign in (1, -1):
                moved = feed[x.name].copy()
                moved.reshape(-1)[i] += sign * delta
                flat[i] += sign * exe.run(main, feed=dict(feed, **{x.name: moved}), fetch_list=[weighted])[0].sum()
        numeric /= 2 * delta
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg="second derivative for " + x.name)
    return main


def _record(main, grad_op):
    """main's first pass holds grad_op and its second pass, checked above, differentiated it: record that."""
    assert grad_op in {o.type for o in main.global_block().ops}, grad_op
    record_checked("grad", grad_op)


BINARY = {
    "elementwise_add": lambda a, b: L.square(L.elementwise_add(a, b, axis=1)),
    "elementwise_sub": lambda a, b: L.square(L.elementwise_sub(a, b, axis=1)),
    "elementwise_mul": lambda a, b: L.elementwise_mul(a, b, axis=1),
    "elementwise_div": lambda a, b: L.elementwise_div(a, b, axis=1),
    "elementwise_max": lambda a, b: L.elementwise_mul(L.elementwise_max(a, b, axis=1), a),
    "elementwise_min": lambda a, b: L.elementwise_mul(L.elementwise_min(a, b, axis=1), a),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [[(2, 3, 2), (3,)], [(2, 3), (2, 3)]], ids=["broadcast", "same"])
def test_elementwise(op, shapes):
    main = _check_double_grad(BINARY[op], shapes)
    if fluid.core.has_op(op + "_grad"):  # div, max and min have composed first gradients, made of other ops
        _record(main, op + "_grad")


# op: (layer, input range): ranges keep the kinks of the piecewise ops away
UNARY = {
    "abs": (lambda x: L.square(L.abs(x)), -1.5),
    "relu": (lambda x: L.square(L.relu(x)), -1.5),
    "sigmoid": (L.sigmoid, -1.5),
    "tanh": (L.tanh, -1.5),
    "exp": (L.exp, -1.5),
    "log": (L.log, 0.5),
    "sqrt": (L.sqrt, 0.5),
    "square": (L.square, -1.5),
    "leaky_relu": (lambda x: L.square(L.leaky_relu(x, alpha=0.3)), -1.5),
    "relu6": (lambda x: L.square(L.relu6(x, threshold=1.0)), 0.2),
    "clip": (lambda x: L.square(L.clip(x, min=-1.0, max=0.8)), -1.5),
    "gelu": (L.gelu, -1.5),
    "elu": (lambda x: L.elu(x, alpha=1.5), -1.5),
    "selu": (L.selu, -1.5),
    "swish": (lambda x: L.swish(x, beta=1.5), -1.5),
    "hard_swish": (L.hard_swish, -1.5),
    "hard_sigmoid": (lambda x: L.square(L.hard_sigmoid(x)), -1.5),
    "softplus": (L.softplus, -1.5),
    "softsign": (L.softsign, -1.5),
    "rsqrt": (L.rsqrt, 0.5),
    "reciprocal": (L.reciprocal, 0.5),
    "sin": (L.sin, -1.5),
    "cos": (L.cos, -1.5),
    "pow": (lambda x: L.pow(x, factor=2.5), 0.5),
}
SECOND_DERIVATIVE = ("sigmoid", "tanh", "exp", "log", "sqrt", "square", "gelu", "elu", "selu", "swish", "hard_swish",
                     "softplus", "softsign", "rsqrt", "reciprocal", "sin", "cos", "pow")


@pytest.mark.parametrize("op", sorted(UNARY))
def test_activation(op):
    build, low = UNARY[op]
    main = _check_double_grad(build, [(2, 3)], low=low, high=1.5 if op != "relu6" else 0.9)
    if op in SECOND_DERIVATIVE:  # a second derivative of their own
        assert op + "_grad_grad" in {o.type for o in main.global_block().ops}
    _record(main, op + "_grad")


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(tx, ty):
    main = _check_double_grad(lambda a, b: L.matmul(a, b, transpose_x=tx, transpose_y=ty, alpha=0.5),
                              [(3, 2) if tx else (2, 3), (4, 3) if ty else (3, 4)])
    _record(main, "matmul_grad")


def test_batched_matmul_with_a_broadcast_operand():
    _record(_check_double_grad(L.matmul, [(2, 2, 3), (3, 2)]), "matmul_grad")


def test_mul():
    _record(_check_double_grad(lambda a, b: L.mul(a, b, x_num_col_dims=2), [(2, 2, 3), (3, 2)]), "mul_grad")


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max"])
@pytest.mark.parametrize("dim,keep", [([1], False), ([0, 2], True), (None, False)])
def test_reduce(op, dim, keep):
    main = _check_double_grad(lambda x: L.square(getattr(L, op)(x, dim=dim, keep_dim=keep)), [(2, 3, 2)])
    _record(main, op + "_grad")


def test_mean():
    _check_double_grad(lambda x: L.square(L.mean(x)), [(2, 3)])


def _int64(value):
    """An int64 constant in the program (assign_value): indices for gather and lookup_table."""
    return L.assign(np.array(value, dtype="int64"))


def _lookup_table(w, ids, op_type="lookup_table"):
    block = fluid.default_main_program().current_block()
    out = block.create_var(name=fluid.unique_name.generate("lookup_table_out"), dtype=w.dtype)
    block.append_op(type=op_type, inputs={"W": [w], "Ids": [ids]}, outputs={"Out": [out]},
                    attrs={"padding_idx": -1})
    return out


# grad op: (network, input shapes). The ops are linear, so their gradient is linear in Out@GRAD and the second
# derivative of op(x) alone is zero: square(op(x)) makes Out@GRAD depend on x, so that the second pass goes
# through the grad op's own (composed) gradient.
LINEAR = {
    "concat_grad": (lambda a, b: L.square(L.concat([a, b], axis=1)), [(2, 3), (2, 2)]),
    "reshape2_grad": (lambda x: L.square(L.reshape(x, [3, 4])), [(2, 3, 2)]),
    "flatten2_grad": (lambda x: L.square(L.flatten(x, axis=2)), [(2, 3, 2)]),
    "squeeze2_grad": (lambda x: L.square(L.squeeze(x, axes=[1])), [(3, 1, 2)]),
    "unsqueeze2_grad": (lambda x: L.square(L.unsqueeze(x, axes=[0, 2])), [(3, 2)]),
    "slice_grad": (lambda x: L.square(L.slice(x, axes=[0, 1], starts=[1, 0], ends=[3, 2])), [(3, 4)]),
    "gather_grad": (lambda x: L.square(L.gather(x, _int64([2, 0, 2]))), [(3, 2)]),
    "lod_reset_grad": (lambda x: L.square(L.lod_reset(x, target_lod=[0, 1, 3])), [(3, 2)]),
    "lookup_table_grad": (lambda w: L.square(_lookup_table(w, _int64([[1], [3], [1]]))), [(4, 3)]),
    "lookup_table_v2_grad": (lambda w: L.square(_lookup_table(w, _int64([[1, 3], [1, 0]]), "lookup_table_v2")),
                             [(4, 3)]),
}


@pytest.mark.parametrize("grad_op", sorted(LINEAR))
def test_gradient_of_a_linear_ops_gradient(grad_op):
    build, shapes = LINEAR[grad_op]
    _record(_check_double_grad(build, shapes, low=-1.5), grad_op)


def test_third_order_through_composed_gradients():
    """d3/dx3 of sum(x^2 * y) in x: the second gradient (2y) is again differentiable, its gradient zeros."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", shape=[3], dtype="float64", append_batch_size=False)
        y = L.data("y", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        z = L.reduce_sum(L.elementwise_mul(L.elementwise_mul(x, x), y))
        g1, = fluid.gradients([z], [x])
        g2, = fluid.gradients([L.reduce_sum(g1)], [x])
        g3, = fluid.gradients([L.reduce_sum(L.elementwise_mul(g2, x))], [x])
    xv, yv = rng.uniform(0.5, 1.5, 3), rng.uniform(0.5, 1.5, 3)
    r1, r2, r3 = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "y": yv}, fetch_list=[g1, g2, g3])
    np.testing.assert_allclose(r1, 2 * xv * yv)
    np.testing.assert_allclose(r2, 2 * yv)
    np.testing.assert_allclose(r3, 2 * yv)  # d/dx sum(2y * x) = 2y


def test_second_derivative_of_a_unary_second_derivative_is_refused():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        g1, = fluid.gradients([L.reduce_sum(L.tanh(x))], [x])
        g2, = fluid.gradients([L.reduce_sum(g1)], [x])
        with pytest.raises(fluid.core.EnforceNotMet, match="op tanh_grad_grad has no gradient"):
            fluid.gradients([L.reduce_sum(g2)], [x])
