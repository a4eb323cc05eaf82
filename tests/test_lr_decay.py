"""LR schedules driven by @LR_DECAY_COUNTER@: an increment op first in the main program, first run sees 0.

Each schedule is checked bit for bit against numpy float32 arithmetic that replays Fluid 1.8's op sequence for
it (a scale op multiplies by its float32 attribute, elementwise_pow is powf, cos is cosf: the libm functions
Fluid's CPU kernels call for float32), over many steps."""
import ctypes
import ctypes.util
import math

import numpy as np
import pytest

import fluidlite as fluid

F = np.float32
_libm = ctypes.CDLL(ctypes.util.find_library("m"))
for _fn, _nargs in (("powf", 2), ("cosf", 1), ("expf", 1)):
    getattr(_libm, _fn).restype = ctypes.c_float
    getattr(_libm, _fn).argtypes = [ctypes.c_float] * _nargs


def powf(x, y):
    return F(_libm.powf(float(x), float(y)))


def cosf(x):
    return F(_libm.cosf(float(x)))


def expf(x):
    return F(_libm.expf(float(x)))


def scale(x, s=1.0, bias=0.0):
    """The scale op on float32 x: x * float32(s), then + float32(bias) (Variable arithmetic with a Python
    number emits one or the other, never both, except -x + b)."""
    out = F(x) * F(s)
    return out + F(bias) if bias else out


def _lrs(build, steps=6, first_step=0):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = build()
    assert main.global_block().ops[0].type == "increment"
    counter = main.global_block().var("@LR_DECAY_COUNTER@")
    assert counter.persistable and counter.shape == (1,) and counter.dtype == fluid.core.VarDesc.VarType.INT64
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    assert int(np.array(scope.find_var("@LR_DECAY_COUNTER@").get_tensor())[0]) == first_step - 1
    out = []
    for _ in range(steps):
        v = exe.run(main, fetch_list=[lr], scope=scope)[0]
        assert v.shape == (1,) and v.dtype == np.float32
        out.append(v[0])
    return np.array(out, dtype=np.float32), main


def _exact(got, want):
    want = np.array(want, dtype=np.float32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, "steps %s: got %s, want %s" % (bad[:5], got[bad[:5]], want[bad[:5]])


def _op_types(main):
    return [op.type for op in main.global_block().ops]


# ------------------------------------------------------------------ exponential / natural_exp / inverse_time

def _exp_ref(lr, steps, rate, staircase, n):
    out = []
    for s in range(n):
        div = scale(F(s), 1.0 / steps)
        if staircase:
            div = np.floor(div)
        out.append(scale(powf(rate, div), lr))
    return out


@pytest.mark.parametrize("lr,steps,rate,staircase", [(0.1, 2, 0.5, False), (0.1, 2, 0.5, True),
                                                     (0.01, 7, 0.96, False), (1.5, 3, 0.3, True),
                                                     (0.001, 1000, 0.1, False)])
def test_exponential_decay_is_fluids_pow(lr, steps, rate, staircase):
    got, main = _lrs(lambda: fluid.layers.exponential_decay(lr, decay_steps=steps, decay_rate=rate,
                                                            staircase=staircase), steps=200)
    _exact(got, _exp_ref(lr, steps, rate, staircase, 200))
    assert "elementwise_pow" in _op_types(main) and "exp" not in _op_types(main)


def test_exponential_decay_step_3_matches_the_python_formula():
    # exp(x * ln(rate)) was 1 ulp off here; powf is what Fluid computes.
    got, _ = _lrs(lambda: fluid.layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5), steps=4)
    assert got[3] == F(0.1) * powf(0.5, F(3) * F(0.5))
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (s / 2) for s in range(4)], rtol=1e-7)


def test_exponential_decay_takes_a_variable_learning_rate():
    def build():
        base = fluid.layers.fill_constant(shape=[1], dtype="float32", value=0.2)
        return fluid.layers.exponential_decay(base, decay_steps=3, decay_rate=0.7)
    got, main = _lrs(build, steps=20)
    _exact(got, [F(0.2) * powf(0.7, scale(F(s), 1.0 / 3)) for s in range(20)])
    assert "elementwise_mul" in _op_types(main)


@pytest.mark.parametrize("staircase", [False, True])
def test_natural_exp_decay(staircase):
    got, _ = _lrs(lambda: fluid.layers.natural_exp_decay(0.1, decay_steps=4, decay_rate=0.5, staircase=staircase),
                  steps=100)
    want = []
    for s in range(100):
        div = scale(F(s), 1.0 / 4)
        if staircase:
            div = np.floor(div)
        want.append(scale(expf(scale(div, -1 * 0.5)), 0.1))
    # The exp kernel is fluidlite's vectorised exp (helpers/vec_exp.h, ~1 ulp from expf), not libm's expf.
    np.testing.assert_array_max_ulp(got, np.array(want, np.float32), maxulp=2)


@pytest.mark.parametrize("staircase", [False, True])
def test_inverse_time_decay(staircase):
    got, _ = _lrs(lambda: fluid.layers.inverse_time_decay(1.0, decay_steps=3, decay_rate=0.5, staircase=staircase),
                  steps=100)
    want = []
    for s in range(100):
        div = scale(F(s), 1.0 / 3)
        if staircase:
            div = np.floor(div)
        want.append(F(1.0) / scale(scale(div, 0.5), bias=1.0))
    _exact(got, want)
    np.testing.assert_allclose(got, [1.0 / (1 + 0.5 * (math.floor(s / 3) if staircase else s / 3))
                                      for s in range(100)], rtol=2e-7)


# ------------------------------------------------------------------ piecewise

def test_piecewise_decay():
    got, main = _lrs(lambda: fluid.layers.piecewise_decay(boundaries=[2, 4], values=[1.0, 0.5, 0.1]), steps=8)
    _exact(got, [1.0, 1.0, 0.5, 0.5, 0.1, 0.1, 0.1, 0.1])
    var = main.global_block().var("learning_rate")  # Fluid's persistable result variable
    assert var.persistable and var.shape == (1,)
    # Fluid's Switch: a case per boundary and the default, each a conditional block assigning its value
    assert _op_types(main).count("conditional_block") == 3
    blocks = [main.block(op.attr("sub_block")) for op in main.global_block().ops if op.type == "conditional_block"]
    assert [[o.type for o in b.ops] for b in blocks] == [["assign"]] * 3


def test_piecewise_decay_values_are_exact_float32():
    values = [0.1, 0.03, 0.007, 0.0011, 3e-5]
    bounds = [3, 5, 6, 11]
    got, _ = _lrs(lambda: fluid.layers.piecewise_decay(boundaries=bounds, values=values), steps=15)
    _exact(got, [values[sum(s >= b for b in bounds)] for s in range(15)])


def test_piecewise_decay_checks_lengths():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(ValueError, match=r"piecewise_decay: len\(values\) - len\(boundaries\) should be 1, "
                                             r"got len\(values\) 2 and len\(boundaries\) 2"):
            fluid.layers.piecewise_decay(boundaries=[2, 4], values=[1.0, 0.5])
        with pytest.raises(ValueError, match=r"piecewise_decay: boundaries must be increasing, got \[4, 2\]"):
            fluid.layers.piecewise_decay(boundaries=[4, 2], values=[1.0, 0.5, 0.1])


# ------------------------------------------------------------------ polynomial

def _poly_ref(lr, steps, end, power, cycle, n):
    out = []
    for s in range(n):
        step = F(s)
        if cycle:
            div = max(np.ceil(scale(step, 1.0 / steps)), F(1.0))
            ds = scale(div, steps)
            frac = step / ds
        else:
            step = min(step, F(steps))
            frac = scale(step, 1.0 / steps)
        base = scale(frac, -1.0, 1.0)
        out.append(scale(scale(powf(base, power), lr - end), bias=end))
    return out


@pytest.mark.parametrize("lr,steps,end,power,cycle", [(0.1, 10, 0.0001, 1.0, False), (0.1, 10, 0.0001, 1.0, True),
                                                      (0.05, 7, 0.001, 2.0, False), (0.05, 7, 0.001, 0.9, True),
                                                      (1.0, 1, 0.0, 3.0, True)])
def test_polynomial_decay(lr, steps, end, power, cycle):
    got, main = _lrs(lambda: fluid.layers.polynomial_decay(lr, decay_steps=steps, end_learning_rate=end,
                                                           power=power, cycle=cycle), steps=60)
    _exact(got, _poly_ref(lr, steps, end, power, cycle, 60))
    assert ("ceil" in _op_types(main)) == cycle
    assert _op_types(main).count("conditional_block") == (1 if cycle else 0)  # Fluid's Switch for step 0


def test_polynomial_decay_formula():
    got, _ = _lrs(lambda: fluid.layers.polynomial_decay(0.1, decay_steps=4, end_learning_rate=0.0, power=2.0,
                                                        cycle=True), steps=10)
    # cycle: decay_steps grows to 4 * ceil(step / 4) (4 at step 0), so the decay restarts after each 4 steps
    want = [0.1 * (1 - s / (4 * max(math.ceil(s / 4), 1))) ** 2 for s in range(10)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert got[4] == 0 and got[5] > got[4]
    flat, _ = _lrs(lambda: fluid.layers.polynomial_decay(0.1, decay_steps=4, end_learning_rate=0.01), steps=10)
    _exact(flat[4:], [0.01] * 6)


# ------------------------------------------------------------------ cosine

@pytest.mark.parametrize("lr,each,epochs", [(0.1, 3, 10), (0.4, 1, 50), (1.0, 7, 4)])
def test_cosine_decay(lr, each, epochs):
    got, main = _lrs(lambda: fluid.layers.cosine_decay(lr, step_each_epoch=each, epochs=epochs), steps=60)
    want = []
    for s in range(60):
        epoch = np.floor(scale(F(s), 1.0 / each))
        c = cosf(scale(scale(epoch, math.pi), 1.0 / epochs))
        want.append(scale(scale(c, bias=1.0), lr * 0.5))
    _exact(got, want)
    np.testing.assert_allclose(got, [lr * 0.5 * (math.cos(math.floor(s / each) * math.pi / epochs) + 1)
                                     for s in range(60)], rtol=1e-6, atol=1e-7)
    assert "cos" in _op_types(main)


def test_cosine_decay_checks_learning_rate_type():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="The type of 'learning_rate' in cosine_decay must be "
                                            r"\(float, Variable\), but received <class 'int'>"):
            fluid.layers.cosine_decay(1, step_each_epoch=10, epochs=5)


# ------------------------------------------------------------------ noam

@pytest.mark.parametrize("d_model,warmup,lr", [(512, 4000, 1.0), (2, 20, 0.01), (64, 5, 2.0)])
def test_noam_decay(d_model, warmup, lr):
    n = 60
    got, main = _lrs(lambda: fluid.layers.noam_decay(d_model, warmup, learning_rate=lr), steps=n, first_step=1)
    want = []
    for s in range(1, n + 1):
        a = powf(F(s), -0.5)
        b = scale(F(s), warmup ** -1.5)
        want.append(scale(min(a, b), lr * d_model ** -0.5))
    _exact(got, want)
    np.testing.assert_allclose(got, [lr * d_model ** -0.5 * min(s ** -0.5, warmup ** -1.5 * s)
                                     for s in range(1, n + 1)], rtol=1e-6)
    assert "elementwise_pow" in _op_types(main) and "elementwise_min" in _op_types(main)


def test_noam_decay_variable_learning_rate():
    def build():
        base = fluid.layers.fill_constant(shape=[1], dtype="float32", value=0.5)
        return fluid.layers.noam_decay(16, 10, learning_rate=base)
    got, _ = _lrs(build, steps=30, first_step=1)
    _exact(got, [scale(F(0.5), 16 ** -0.5) * min(powf(F(s), -0.5), scale(F(s), 10 ** -1.5)) for s in range(1, 31)])


# ------------------------------------------------------------------ linear warm-up

def test_linear_lr_warmup_float():
    got, main = _lrs(lambda: fluid.layers.linear_lr_warmup(0.1, warmup_steps=7, start_lr=0.0, end_lr=0.1), steps=20)
    warm = [scale(scale(scale(F(s), 1.0 / 7), 0.1 - 0.0), bias=0.0) for s in range(7)]
    _exact(got, warm + [0.1] * 13)
    var = main.global_block().var("learning_rate_warmup")
    assert var.persistable and var.shape == (1,)
    assert _op_types(main).count("conditional_block") == 2  # Fluid's Switch: the warm-up case and the default


def test_linear_lr_warmup_wraps_another_schedule():
    def build():
        base = fluid.layers.piecewise_decay(boundaries=[10, 15], values=[0.5, 0.05, 0.005])
        return fluid.layers.linear_lr_warmup(base, warmup_steps=5, start_lr=0.01, end_lr=0.5)
    got, _ = _lrs(build, steps=20)
    warm = [scale(scale(scale(F(s), 1.0 / 5), 0.5 - 0.01), bias=0.01) for s in range(5)]
    _exact(got, warm + [0.5] * 5 + [0.05] * 5 + [0.005] * 5)


def test_linear_lr_warmup_float64_learning_rate():
    def build():
        base = fluid.layers.fill_constant(shape=[1], dtype="float64", value=0.25)
        return fluid.layers.linear_lr_warmup(base, warmup_steps=4, start_lr=0.0, end_lr=0.25)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = build()
    assert lr.dtype == fluid.core.VarDesc.VarType.FP64
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got = [exe.run(main, fetch_list=[lr], scope=scope)[0][0] for _ in range(6)]
    np.testing.assert_array_equal(got, [float(scale(scale(F(s), 0.25), 0.25)) for s in range(4)] + [0.25, 0.25])


def test_two_schedules_of_a_kind_get_their_own_result_variables():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.piecewise_decay(boundaries=[2], values=[1.0, 0.5])
        b = fluid.layers.piecewise_decay(boundaries=[1], values=[0.3, 0.2])
        c = fluid.layers.linear_lr_warmup(a, warmup_steps=2, start_lr=0.0, end_lr=1.0)
        d = fluid.layers.linear_lr_warmup(b, warmup_steps=2, start_lr=0.0, end_lr=0.3)
    assert a.name == "learning_rate" and b.name != a.name and b.persistable
    assert c.name == "learning_rate_warmup" and d.name != c.name and d.persistable
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got = [[v[0] for v in exe.run(main, fetch_list=[a, b, c, d], scope=scope)] for _ in range(3)]
    _exact(np.array(got, np.float32).T.reshape(-1), [1.0, 1.0, 0.5, 0.3, 0.2, 0.2, 0.0, 0.5, 0.5, 0.0, 0.15, 0.2])


def test_schedules_share_one_counter():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5)
        b = fluid.layers.cosine_decay(0.1, step_each_epoch=2, epochs=4)
    assert _op_types(main).count("increment") == 1
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for s in range(5):
        va, vb = exe.run(main, fetch_list=[a, b], scope=scope)
        assert va[0] == scale(powf(0.5, scale(F(s), 0.5)), 0.1)
        assert vb[0] == scale(scale(cosf(scale(scale(np.floor(scale(F(s), 0.5)), math.pi), 0.25)), bias=1.0), 0.05)


def test_variable_pow_operators():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32", append_batch_size=False)
        y = x ** 2.5
        z = 3.0 ** x
    assert [op.type for op in main.global_block().ops].count("elementwise_pow") == 2
    xv = np.array([0.5, 1.5, 2.0], np.float32)
    out_y, out_z = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[y, z])
    np.testing.assert_array_equal(out_y, [powf(v, 2.5) for v in xv])
    np.testing.assert_array_equal(out_z, [powf(3.0, v) for v in xv])


def test_decayed_lr_drives_sgd():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[1], dtype="float32")
        w = fluid.layers.create_parameter(shape=[1], dtype="float32", name="w",
                                          default_initializer=fluid.initializer.Constant(1.0))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(x, w))
        lr = fluid.layers.piecewise_decay(boundaries=[1], values=[1.0, 0.1])
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    ws = []
    for _ in range(3):
        exe.run(main, feed={"x": np.ones((1, 1), "float32")}, scope=scope)
        ws.append(float(np.array(scope.find_var("w").get_tensor())[0]))
    np.testing.assert_allclose(ws, [0.0, -0.1, -0.2], atol=1e-6)
