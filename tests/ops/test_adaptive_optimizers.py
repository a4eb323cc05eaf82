"""The adaptive optimizer ops (kernels/adaptive_optimizers.cc): one update from random state equals a numpy
reference (float64 exactly to rounding, float32 within 1e-5), plus the shape/dtype/attribute errors.
decayed_adagrad, adadelta, adamax, lamb (trust ratio, its zero-norm fallback), lars_momentum (its zero-norm
fallback) and average_accumulates (the 16384-update spill and the window restart)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest

RNG = np.random.RandomState(7)
SHAPE = (4, 5)


def _state(dtype, *names, positive=()):
    out = {}
    for n in names:
        a = RNG.uniform(-1, 1, SHAPE)
        out[n] = (np.abs(a) + 0.1 if n in positive else a).astype(dtype)
    return out


def _tol(dtype):
    return dict(atol=1e-12, rtol=1e-12) if dtype == "float64" else dict(atol=1e-5, rtol=1e-5)


def _f(dtype, v):
    """An attribute's value as the kernel sees it: float32, then T."""
    return np.dtype(dtype).type(np.float32(v))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_decayed_adagrad(dtype):
    s = _state(dtype, "Param", "Grad", "Moment", positive=("Moment",))
    lr = np.array([0.05], dtype=dtype)
    decay, eps = _f(dtype, 0.9), _f(dtype, 1e-6)
    m = decay * s["Moment"] + (1 - decay) * s["Grad"] ** 2
    p = s["Param"] - lr[0] * s["Grad"] / (np.sqrt(m) + eps)
    OpTest("decayed_adagrad", dict(s, LearningRate=lr), {"ParamOut": p, "MomentOut": m},
           {"decay": 0.9, "epsilon": 1e-6}).check_output(**_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adadelta(dtype):
    s = _state(dtype, "Param", "Grad", "AvgSquaredGrad", "AvgSquaredUpdate",
               positive=("AvgSquaredGrad", "AvgSquaredUpdate"))
    rho, eps = _f(dtype, 0.9), _f(dtype, 1e-6)
    eg = rho * s["AvgSquaredGrad"] + (1 - rho) * s["Grad"] ** 2
    u = -np.sqrt((s["AvgSquaredUpdate"] + eps) / (eg + eps)) * s["Grad"]
    eu = rho * s["AvgSquaredUpdate"] + (1 - rho) * u * u
    OpTest("adadelta", s, {"ParamOut": s["Param"] + u, "AvgSquaredGradOut": eg, "AvgSquaredUpdateOut": eu},
           {"rho": 0.9, "epsilon": 1e-6}).check_output(**_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adamax(dtype):
    s = _state(dtype, "Param", "Grad", "Moment", "InfNorm", positive=("InfNorm",))
    lr, b1p = np.array([0.01], dtype=dtype), np.array([0.9 ** 3], dtype=dtype)
    b1, b2, eps = _f(dtype, 0.9), _f(dtype, 0.99), _f(dtype, 1e-8)
    m = b1 * s["Moment"] + (1 - b1) * s["Grad"]
    u = np.maximum(b2 * s["InfNorm"] + eps, np.abs(s["Grad"]))
    p = s["Param"] - lr[0] / (1 - b1p[0]) * m / u
    OpTest("adamax", dict(s, LearningRate=lr, Beta1Pow=b1p), {"ParamOut": p, "MomentOut": m, "InfNormOut": u},
           {"beta1": 0.9, "beta2": 0.99, "epsilon": 1e-8}).check_output(**_tol(dtype))


def _np_lamb(s, lr, wd, b1, b2, eps):
    m1 = b1 * s["Moment1"] + (1 - b1) * s["Grad"]
    m2 = b2 * s["Moment2"] + (1 - b2) * s["Grad"] ** 2
    r = m1 / (np.sqrt(m2) + eps) + wd * s["Param"]
    pn, rn = np.linalg.norm(s["Param"]), np.linalg.norm(r)
    ratio = pn / rn if pn > 0 and rn > 0 else 1.0
    return s["Param"] - lr * ratio * r, m1, m2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("zero_param", [False, True], ids=["trust_ratio", "zero_param_norm"])
def test_lamb(dtype, zero_param):
    s = _state(dtype, "Param", "Grad", "Moment1", "Moment2", positive=("Moment2",))
    if zero_param:
        s["Param"][:] = 0  # ||p|| = 0: the trust ratio is 1
    lr = np.array([0.02], dtype=dtype)
    p, m1, m2 = _np_lamb(s, lr[0], _f(dtype, 0.01), _f(dtype, 0.9), _f(dtype, 0.999), _f(dtype, 1e-6))
    # Beta1Pow/Beta2Pow are not read (Fluid 1.8): any values give the same update
    ins = dict(s, LearningRate=lr, Beta1Pow=np.array([0.5], dtype), Beta2Pow=np.array([0.25], dtype))
    OpTest("lamb", ins, {"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2},
           {"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}).check_output(**_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("zero_grad", [False, True], ids=["lars", "zero_grad_norm"])
def test_lars_momentum(dtype, zero_grad):
    s = _state(dtype, "Param", "Grad", "Velocity")
    if zero_grad:
        s["Grad"][:] = 0  # ||g|| = 0: plain lr
    lr = np.array([0.1], dtype=dtype)
    mu, coeff, wd = _f(dtype, 0.9), _f(dtype, 0.001), _f(dtype, 0.0005)
    pn, gn = np.linalg.norm(s["Param"]), np.linalg.norm(s["Grad"])
    local = lr[0] * coeff * pn / (gn + wd * pn) if pn > 0 and gn > 0 else lr[0]
    v = s["Velocity"] * mu + local * (s["Grad"] + wd * s["Param"])
    OpTest("lars_momentum", dict(s, LearningRate=lr), {"ParamOut": s["Param"] - v, "VelocityOut": v},
           {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}).check_output(**_tol(dtype))


def _np_average_accumulates(p, s1, s2, s3, n_acc, old_acc, n_upd, window, max_w, min_w):
    n_upd, n_acc = n_upd + 1, n_acc + 1
    s1 = s1 + p
    if n_upd % 16384 == 0:
        s2, s1 = s2 + s1, np.zeros_like(s1)
    if n_acc >= min_w and n_acc >= min(max_w, int(np.float32(n_upd) * np.float32(window))):  # Fluid: in float
        s3, s1, s2 = s1 + s2, np.zeros_like(s1), np.zeros_like(s2)
        old_acc, n_acc = n_acc, 0
    return s1, s2, s3, n_acc, old_acc, n_upd


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", [(0, 0, 0, 10, 3), (5, 2, 16383, 100, 10), (14, 4, 99, 20, 10),
                                  (14, 4, 16383, 15, 10)],
                         ids=["accumulate", "spill", "restart", "spill_and_restart"])
def test_average_accumulates(dtype, case):
    n_acc, old_acc, n_upd, max_w, min_w = case
    s = _state(dtype, "param", "in_sum_1", "in_sum_2", "in_sum_3")
    window = 0.15
    exp = _np_average_accumulates(s["param"], s["in_sum_1"], s["in_sum_2"], s["in_sum_3"], n_acc, old_acc, n_upd,
                                  window, max_w, min_w)
    i64 = lambda v: np.array([v], dtype="int64")
    ins = dict(s, in_num_accumulates=i64(n_acc), in_old_num_accumulates=i64(old_acc), in_num_updates=i64(n_upd))
    outs = {"out_sum_1": exp[0], "out_sum_2": exp[1], "out_sum_3": exp[2], "out_num_accumulates": i64(exp[3]),
            "out_old_num_accumulates": i64(exp[4]), "out_num_updates": i64(exp[5])}
    OpTest("average_accumulates", ins, outs, {"average_window": window, "max_average_window": max_w,
                                              "min_average_window": min_w}).check_output(**_tol(dtype))


# ------------------------------------------------------------------ errors


def _append(op_type, shapes, attrs=None, dtypes=None):
    main = fluid.Program()
    block = main.global_block()
    ins = {}
    for slot, shape in shapes.items():
        dtype = (dtypes or {}).get(slot, "int64" if slot.startswith("in_num") or slot.startswith("in_old")
                                    else "float32")
        ins[slot] = block.create_var(name=slot.lower(), shape=shape, dtype=dtype, persistable=True)
    return block, ins, attrs or {}


@pytest.mark.parametrize("op_type,slots,outs", [
    ("decayed_adagrad", ["Grad", "Moment"], {"ParamOut": "Param", "MomentOut": "Moment"}),
    ("adadelta", ["Grad", "AvgSquaredGrad", "AvgSquaredUpdate"],
     {"ParamOut": "Param", "AvgSquaredGradOut": "AvgSquaredGrad", "AvgSquaredUpdateOut": "AvgSquaredUpdate"}),
    ("adamax", ["Grad", "Moment", "InfNorm"], {"ParamOut": "Param", "MomentOut": "Moment", "InfNormOut": "InfNorm"}),
    ("lamb", ["Grad", "Moment1", "Moment2"], {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2"}),
    ("lars_momentum", ["Grad", "Velocity"], {"ParamOut": "Param", "VelocityOut": "Velocity"}),
])
@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_accumulator_shape_and_dtype_errors(op_type, slots, outs, bad):
    extra = {"decayed_adagrad": ["LearningRate"], "adadelta": [], "adamax": ["LearningRate", "Beta1Pow"],
             "lamb": ["LearningRate", "Beta1Pow", "Beta2Pow"], "lars_momentum": ["LearningRate"]}[op_type]
    wrong = slots[-1]
    shapes = {"Param": [3, 2]}
    shapes.update({s: ([2, 3] if bad == "shape" and s == wrong else [3, 2]) for s in slots})
    shapes.update({s: [1] for s in extra})
    dtypes = {wrong: "float64"} if bad == "dtype" else {}
    block, ins, _ = _append(op_type, shapes, dtypes=dtypes)
    msg = (r"%s: .*%s.* must have the shape of .*Param" % (op_type, wrong) if bad == "shape" else
           r"%s: .*%s.* must have Param's dtype float32, got float64" % (op_type, wrong))
    with pytest.raises(Exception, match=msg):
        block.append_op(type=op_type, inputs=ins, outputs={k: ins[v] for k, v in outs.items()},
                        attrs={"mu": 0.9} if op_type == "lars_momentum" else {})


def test_learning_rate_must_hold_one_element():
    block, ins, _ = _append("decayed_adagrad", {"Param": [3], "Grad": [3], "Moment": [3], "LearningRate": [2]})
    with pytest.raises(Exception, match=r"decayed_adagrad: .*LearningRate.* must hold exactly one element"):
        block.append_op(type="decayed_adagrad", inputs=ins, outputs={"ParamOut": ins["Param"],
                                                                     "MomentOut": ins["Moment"]})


def test_lars_momentum_requires_mu():
    block, ins, _ = _append("lars_momentum", {"Param": [3], "Grad": [3], "Velocity": [3], "LearningRate": [1]})
    with pytest.raises(Exception, match=r"lars_momentum.*mu"):
        block.append_op(type="lars_momentum", inputs=ins, outputs={"ParamOut": ins["Param"],
                                                                   "VelocityOut": ins["Velocity"]})


def _avg_inputs(block_shapes=None, counter_dtype="int64"):
    shapes = {"param": [3], "in_sum_1": [3], "in_sum_2": [3], "in_sum_3": [3], "in_num_accumulates": [1],
              "in_old_num_accumulates": [1], "in_num_updates": [1]}
    shapes.update(block_shapes or {})
    dtypes = {"in_num_updates": counter_dtype}
    return _append("average_accumulates", shapes, dtypes=dtypes)


def _avg_outputs(ins):
    return {"out_" + k[3:]: v for k, v in ins.items() if k.startswith("in_")}


def test_average_accumulates_window_order_error():
    block, ins, _ = _avg_inputs()
    with pytest.raises(Exception, match=r"average_accumulates: min_average_window \(20\) must not be larger than "
                                        r"max_average_window \(10\)"):
        block.append_op(type="average_accumulates", inputs=ins, outputs=_avg_outputs(ins),
                        attrs={"min_average_window": 20, "max_average_window": 10})


def test_average_accumulates_counter_and_sum_errors():
    block, ins, _ = _avg_inputs(counter_dtype="float32")
    with pytest.raises(Exception, match=r"average_accumulates: .*in_num_updates.* must be int64, got float32"):
        block.append_op(type="average_accumulates", inputs=ins, outputs=_avg_outputs(ins))
    block, ins, _ = _avg_inputs({"in_sum_2": [4]})
    with pytest.raises(Exception, match=r"average_accumulates: .*in_sum_2.* must have the shape of .*param"):
        block.append_op(type="average_accumulates", inputs=ins, outputs=_avg_outputs(ins))
