"""Property-based tests (hypothesis): ops against numpy over generated shapes, broadcasting and attributes.
Each test builds one op on generated inputs and compares every output with a numpy reference; a shape or
attribute the op rejects must be rejected with fluidlite.core.EnforceNotMet, never crash or mislead.
FLUIDLITE_FUZZ_EXAMPLES=2000 FLUIDLITE_FUZZ_RANDOM=1 runs them longer (and tools/fuzz_programs.py the program
fuzzer of test_fuzz_programs.py)."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluidlite as fluid

L = fluid.layers
EXAMPLES = int(os.environ.get("FLUIDLITE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=os.environ.get("FLUIDLITE_FUZZ_RANDOM", "0") != "1")


def _run(build, feeds):
    """Builds `build(*vars)` on float64 data vars shaped like `feeds`; returns the fetched outputs."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = [L.data("x%d" % i, shape=list(a.shape), dtype=str(a.dtype), append_batch_size=False)
              for i, a in enumerate(feeds)]
        outs = build(*xs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return fluid.Executor(fluid.CPUPlace()).run(main, feed={"x%d" % i: a for i, a in enumerate(feeds)},
                                                fetch_list=list(outs))


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def arrays(shape, low=-2.0, high=2.0, seed=0):
    return np.random.RandomState(seed).uniform(low, high, shape)


@st.composite
def broadcast_pairs(draw):
    """(x shape, y shape) numpy-broadcastable with trailing alignment (Fluid's axis=-1), either side smaller."""
    big = draw(shapes)
    k = draw(st.integers(1, len(big)))
    small = tuple(d if draw(st.booleans()) else 1 for d in big[len(big) - k:])
    return (big, small) if draw(st.booleans()) else (small, big)


ELEMENTWISE = {"elementwise_add": np.add, "elementwise_sub": np.subtract, "elementwise_mul": np.multiply,
               "elementwise_max": np.maximum, "elementwise_min": np.minimum}


@FUZZ
@given(op=st.sampled_from(sorted(ELEMENTWISE)), pair=broadcast_pairs(), seed=st.integers(0, 2**16))
def test_elementwise_broadcasting(op, pair, seed):
    x, y = arrays(pair[0], seed=seed), arrays(pair[1], seed=seed + 1)
    got, = _run(lambda a, b: getattr(L, op)(a, b), [x, y])
    np.testing.assert_allclose(got, ELEMENTWISE[op](x, y), rtol=1e-12)


@FUZZ
@given(shape=shapes, data=st.data(), keep=st.booleans(), op=st.sampled_from(["reduce_sum", "reduce_mean",
                                                                               "reduce_max"]))
def test_reduce(shape, data, keep, op):
    dims = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                              unique_by=lambda d: d % len(shape)))
    x = arrays(shape, seed=len(dims))
    got, = _run(lambda a: getattr(L, op)(a, dim=dims, keep_dim=keep), [x])
    want = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max}[op](x, axis=tuple(dims),
                                                                                    keepdims=keep)
    if not keep and len({d % len(shape) for d in dims}) == len(shape):
        want = np.reshape(want, [1])  # Fluid: reducing every axis without keep_dim gives [1]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@FUZZ
@given(shape=shapes, data=st.data())
def test_transpose(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    x = arrays(shape)
    got, = _run(lambda a: L.transpose(a, perm), [x])
    np.testing.assert_array_equal(got, np.transpose(x, perm))


@FUZZ
@given(shape=shapes, data=st.data())
def test_reshape_to_a_factorisation(shape, data):
    n = int(np.prod(shape))
    new, rest = [], n
    while rest > 1 and len(new) < 4:
        d = data.draw(st.sampled_from([f for f in range(1, rest + 1) if rest % f == 0]))
        new.append(d)
        rest //= d
    new.append(rest)
    if data.draw(st.booleans()):
        new[data.draw(st.integers(0, len(new) - 1))] = -1
    x = arrays(shape)
    got, = _run(lambda a: L.reshape(a, new), [x])
    np.testing.assert_array_equal(got, x.reshape(new))


@FUZZ
@given(shape=shapes, data=st.data())
def test_concat_then_split_round_trips(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    parts = [arrays(shape[:axis] + (s,) + shape[axis + 1:], seed=i) for i, s in enumerate(sizes)]
    got = _run(lambda *vs: L.split(L.concat(list(vs), axis=axis), sizes, dim=axis), parts)
    for g, p in zip(got, parts):
        np.testing.assert_array_equal(g, p)


UNARY = {"abs": np.abs, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "exp": np.exp,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "square": np.square, "floor": np.floor, "sign": np.sign}


@FUZZ
@given(op=st.sampled_from(sorted(UNARY)), shape=shapes, seed=st.integers(0, 2**16))
def test_unary(op, shape, seed):
    x = arrays(shape, -5, 5, seed)
    got, = _run(lambda a: getattr(L, op)(a), [x])
    np.testing.assert_allclose(got, UNARY[op](x), rtol=1e-12, atol=1e-300)


@FUZZ
@given(m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4), batch=st.sampled_from([(), (2,), (3, 1)]),
       tx=st.booleans(), ty=st.booleans(), y_batched=st.booleans())
def test_matmul(m, k, n, batch, tx, ty, y_batched):
    x = arrays(batch + ((k, m) if tx else (m, k)))
    y = arrays((batch if y_batched else ()) + ((n, k) if ty else (k, n)), seed=1)
    got, = _run(lambda a, b: L.matmul(a, b, transpose_x=tx, transpose_y=ty), [x, y])
    xt = np.swapaxes(x, -1, -2) if tx else x
    yt = np.swapaxes(y, -1, -2) if ty else y
    np.testing.assert_allclose(got, np.matmul(xt, yt), rtol=1e-12)


@FUZZ
@given(shape=shapes, data=st.data())
def test_softmax_any_axis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = arrays(shape, -30, 30)
    got, = _run(lambda a: L.softmax(a, axis=axis), [x])
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=axis, keepdims=True), rtol=1e-12)
@FUZZ
@given(shape=shapes, data=st.data())
def test_out_of_range_axes_raise(shape, data):
    """Axes outside [-rank, rank) are errors naming the op, whatever the value."""
    bad = data.draw(st.one_of(st.integers(len(shape), 2**31 - 1), st.integers(-2**31, -len(shape) - 1)))
    op = data.draw(st.sampled_from(["softmax", "reduce_sum", "concat", "split"]))
    build = {"softmax": lambda a: L.softmax(a, axis=bad), "reduce_sum": lambda a: L.reduce_sum(a, dim=[bad]),
             "concat": lambda a: L.concat([a, a], axis=bad), "split": lambda a: L.split(a, 1, dim=bad)}[op]
    with pytest.raises(fluid.core.EnforceNotMet, match=op):
        _run(build, [arrays(shape)])
