"""The op registry as a whole: forward signatures are stable, grad ops are derived from their forward op
(never restating it), and every op declares how it differentiates."""
import json
import os

import pytest

from fluidlite import core

SNAPSHOT = os.path.join(os.path.dirname(__file__), "data", "op_proto_snapshot.json")
TYPES = sorted(core.op_types())
PROTOS = {t: core.op_proto(t) for t in TYPES}
GRAD_OPS = sorted(t for t, p in PROTOS.items() if p["forward_op"])


def _signature(proto):
    return {"inputs": [{k: s[k] for k in ("name", "duplicable", "dispensable")} for s in proto["inputs"]],
            "outputs": [{k: s[k] for k in ("name", "duplicable", "dispensable")} for s in proto["outputs"]],
            "attrs": [{k: a[k] for k in ("name", "type", "default", "required")} for a in proto["attrs"]]}


def test_forward_signatures_match_the_snapshot():
    """Slots, attributes and defaults of every forward op, compared with tests/data/op_proto_snapshot.json
    (taken before the gradient clause replaced the hand-written grad ops). A forward op may be added; one in
    the snapshot may not change or disappear, except by gaining an optional attribute or a dispensable input
    (programs saved before still load and mean the same; e.g. gather's overwrite and slice's StartsTensor, which
    Fluid 1.8 has)."""
    with open(SNAPSHOT) as f:
        snapshot = json.load(f)
    for op_type, want in snapshot.items():
        assert op_type in PROTOS, "op %s disappeared" % op_type
        got = _signature(PROTOS[op_type])
        added = [a for a in got["attrs"] if a["name"] not in {w["name"] for w in want["attrs"]}]
        assert not any(a["required"] for a in added), "op %s gained a required attribute: %s" % (op_type, added)
        got["attrs"] = [a for a in got["attrs"] if a not in added]
        new_inputs = [i for i in got["inputs"] if i["name"] not in {w["name"] for w in want["inputs"]}]
        assert all(i["dispensable"] for i in new_inputs), "op %s gained a required input: %s" % (op_type, new_inputs)
        got["inputs"] = [i for i in got["inputs"] if i not in new_inputs]
        assert got == want, "op %s changed its signature" % op_type


@pytest.mark.parametrize("grad_type", GRAD_OPS)
def test_grad_op_inherits_the_forward_attributes(grad_type):
    grad = PROTOS[grad_type]
    fwd = PROTOS[grad["forward_op"]]
    assert fwd["grad"] == "grad_op" and fwd["grad_op"] == grad_type
    assert [_signature(grad)["attrs"][i] for i in range(len(fwd["attrs"]))] == _signature(fwd)["attrs"]
    assert len(grad["attrs"]) == len(fwd["attrs"]), "%s restates or adds attributes" % grad_type


@pytest.mark.parametrize("grad_type", GRAD_OPS)
def test_grad_op_slots_follow_the_forward_op(grad_type):
    """Inputs: forward slots or gradients of forward outputs; outputs: X@GRAD for differentiable inputs."""
    grad = PROTOS[grad_type]
    fwd = PROTOS[grad["forward_op"]]
    fwd_slots = {s["name"] for s in fwd["inputs"] + fwd["outputs"]}
    for s in grad["inputs"]:
        assert s["name"] in fwd_slots or s["name"][:-len("@GRAD")] in {o["name"] for o in fwd["outputs"]}
    outs = [s["name"] for s in grad["outputs"]]
    assert outs and all(o.endswith("@GRAD") and o[:-len("@GRAD")] in {i["name"] for i in fwd["inputs"]}
                        for o in outs)
    assert all(s["dispensable"] for s in grad["outputs"])


def test_every_grad_op_is_generated():
    """No *_grad op is registered by hand: each one names its forward op, or is the second derivative that
    the unary table (kernels/unary.cc) generates for a row, <op>_grad_grad."""
    # while_grad: while's grad maker reads the grad block backward built to find the gradients supplied from
    # outside the loop, which a GradOp clause cannot express (kernels/while.cc).
    custom = {"while_grad"}
    hand_written = [t for t in TYPES if t.endswith("_grad") and not PROTOS[t]["forward_op"] and t not in custom]
    assert hand_written and all(t.endswith("_grad_grad") and PROTOS[t[:-len("_grad")]]["forward_op"] == t[:-10]
                                for t in hand_written), hand_written
    assert PROTOS["while"]["grad"] == "composed"


def test_grad_kinds():
    kinds = {t: p["grad"] for t, p in PROTOS.items()}
    assert set(kinds.values()) <= {"composed", "grad_op", "no_gradient", "none"}
    assert kinds["mul"] == "grad_op" and kinds["mul_grad"] == "composed"  # double grad of mul is composed
    assert kinds["elementwise_div"] == "composed"
    assert kinds["less_than"] == "no_gradient"
    assert kinds["sgd"] == "none"
    for t, p in PROTOS.items():
        assert p["has_grad"] == (p["grad"] != "none"), t


def test_reserved_names_and_roles_come_from_cpp():
    names = core.names()
    assert names == {"grad_suffix": "@GRAD", "empty": "@EMPTY@", "rename": "@RENAME@", "temp": "@TEMP@"}
    assert core.op_roles() == {"Forward": 0, "Backward": 1, "Optimize": 2, "RPC": 4, "Dist": 8, "LRSched": 16,
                               "Loss": 256}
