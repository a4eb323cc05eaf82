"""Every registered op is checked numerically: its forward values against numpy and, when it is differentiable,
its gradient against central differences. The op tests record what they checked as they run (op_test.CHECKED:
OpTest.check_output / check_grad, or op_test.record_checked for tests that compare without OpTest); this file
runs after all of them (tests/conftest.py) and reads the record. It skips when the session did not run every
file that records (a single file, -k, --lf), since the record is then partial.

The layout is checked too: tests/ops/test_<name>.py for every kernels/<name>.cc, and nothing else there."""
import glob
import os

import pytest

import op_test
from fluidlite import core

OPS_DIR = os.path.dirname(os.path.abspath(__file__))
TESTS_DIR = os.path.dirname(OPS_DIR)
KERNELS_DIR = os.path.join(os.path.dirname(TESTS_DIR), "kernels")

# Test files outside tests/ops that record checks (test_every_recording_file_is_listed keeps this complete).
RECORDING_FILES = ["test_double_grad.py", "test_fuse_bn_act.py", "test_fuse_optimizer.py"]

# ------------------------------------------------------------------ exemptions
# Forward ops whose values are checked against the distribution they sample rather than against a numpy array;
# their tests record them as "statistical" (an "output" record does not stand in for it).
STATISTICAL = {
    "uniform_random": "random: 100k samples' range, mean, std and decile histogram against U(min, max)",
    "gaussian_random": "random: 100k samples' mean, std, 1- and 2-sigma mass, skew and kurtosis against N(mean, std)",
}
# Forward ops with no numpy-checked test, each with the reason. Empty: every forward op has one.
NO_OUTPUT_CHECK = {}
# Differentiable ops (grad kind "grad_op" or "composed") with no numeric gradient check, each with the reason.
# Otherwise every differentiable op has one (generated grad ops with a composed gradient: tests/test_double_grad.py).
NO_GRAD_CHECK = {
    "increment": "its gradient is Fluid's inverse update (increment by -step, stepping a While loop's counter back "
                 "in the grad block), not a derivative; tests/ops/test_while.py checks loops that index arrays by it",
}


def checked_through(op_type, protos):
    """The op whose gradient check compares `op_type`'s values, for a grad op; None for a forward op.

    A generated grad op (forward_op F) computes F's gradient: F's gradient check compares its values. The second
    derivatives of the unary table, <op>_grad_grad (registered by hand, tests/test_op_registry.py), compute the
    gradient of <op>_grad: the double-grad check of <op>_grad compares them."""
    forward = protos[op_type]["forward_op"]
    if forward:
        return forward
    if op_type.endswith("_grad_grad") and protos.get(op_type[:-len("_grad")], {}).get("forward_op"):
        return op_type[:-len("_grad")]
    return None


def unchecked(protos, checked, statistical=(), no_output_check=(), no_grad_check=()):
    """(ops whose values nothing checked, differentiable ops whose gradient nothing checked), sorted.

    protos: {op type: {"grad": kind, "forward_op": name or ""}}; checked: op_test.CHECKED's shape."""
    values, grads = [], []
    for t in sorted(protos):
        through = checked_through(t, protos)
        if through is not None:
            ok = through in checked["grad"]
        elif t in statistical:
            ok = t in checked["statistical"]
        else:
            ok = t in checked["output"] or t in no_output_check
        if not ok:
            values.append(t)
        if protos[t]["grad"] in ("grad_op", "composed") and t not in checked["grad"] and t not in no_grad_check:
            grads.append(t)
    return values, grads


def _registry():
    return {t: core.op_proto(t) for t in core.op_types()}


def _recording_files():
    files = {f for f in glob.glob(os.path.join(OPS_DIR, "test_*.py")) if os.path.basename(f) != "test_coverage.py"}
    return files | {os.path.join(TESTS_DIR, f) for f in RECORDING_FILES}


# ------------------------------------------------------------------ the check itself

def test_every_registered_op_is_checked():
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("the checks are recorded per process; under pytest-xdist no worker sees them all")
    needed = _recording_files()
    missing = sorted(os.path.relpath(f, TESTS_DIR) for f in needed - op_test.SESSION["ran"])
    partial = sorted(os.path.relpath(f, TESTS_DIR) for f in needed & op_test.SESSION["deselected"])
    if missing or partial:
        def few(names):
            if not names:
                return "none"
            return "%d (%s%s)" % (len(names), ", ".join(names[:3]), ", ..." if len(names) > 3 else "")
        pytest.skip("the record is partial: this session did not run every test file that records checks (not run: "
                    "%s; partly deselected: %s); run the whole suite" % (few(missing), few(partial)))
    values, grads = unchecked(_registry(), op_test.CHECKED, STATISTICAL, NO_OUTPUT_CHECK, NO_GRAD_CHECK)
    failed = op_test.SESSION["failed"]
    assert not values and not grads, (
        "registered ops without a numerical check:\n"
        "  values never compared with numpy (OpTest.check_output or op_test.record_checked): %s\n"
        "  gradients never compared with central differences (OpTest.check_grad or op_test.record_checked): %s\n"
        "Add a test in tests/ops/test_<kernel file>.py (or, with a reason, an exemption in %s).%s"
        % (values, grads, os.path.relpath(__file__, TESTS_DIR),
           "\n(%d tests failed earlier in this session, which may have stopped them recording: %s)"
           % (len(failed), failed[:5]) if failed else ""))


def test_exemptions_name_registered_ops():
    protos = _registry()
    for table in (STATISTICAL, NO_OUTPUT_CHECK, NO_GRAD_CHECK):
        for t, why in table.items():
            assert t in protos and why, t
    for t in STATISTICAL:
        assert checked_through(t, protos) is None and protos[t]["grad"] == "none", t
    for t in NO_GRAD_CHECK:
        assert protos[t]["grad"] in ("grad_op", "composed"), t


# ------------------------------------------------------------------ layout

def test_layout_mirrors_kernels():
    if not os.path.isdir(KERNELS_DIR):
        pytest.skip("no kernels/ next to tests/ (not a source checkout)")
    kernels = {os.path.splitext(f)[0] for f in os.listdir(KERNELS_DIR) if f.endswith(".cc")}
    tests = {os.path.basename(f)[len("test_"):-len(".py")] for f in glob.glob(os.path.join(OPS_DIR, "test_*.py"))}
    tests.discard("coverage")
    assert sorted(kernels - tests) == [], "kernel files without tests/ops/test_<name>.py"
    assert sorted(tests - kernels) == [], "tests/ops files that mirror no kernel file"


def test_every_recording_file_is_listed():
    recording = set()
    for f in glob.glob(os.path.join(TESTS_DIR, "test_*.py")):
        with open(f) as fh:
            if "record_checked(" in fh.read():
                recording.add(os.path.basename(f))
    assert recording == set(RECORDING_FILES)


# ------------------------------------------------------------------ the checker, on a made-up registry

FAKE = {
    "lin": {"grad": "grad_op", "forward_op": ""},
    "lin_grad": {"grad": "composed", "forward_op": "lin"},
    "lin_grad_grad": {"grad": "none", "forward_op": ""},
    "conv": {"grad": "grad_op", "forward_op": ""},
    "conv_grad": {"grad": "none", "forward_op": "conv"},
    "cmp": {"grad": "no_gradient", "forward_op": ""},
    "comp": {"grad": "composed", "forward_op": ""},
    "rand": {"grad": "none", "forward_op": ""},
}
ALL = {"output": {"lin", "conv", "cmp", "comp"}, "grad": {"lin", "lin_grad", "conv", "comp"}, "statistical": {"rand"}}


def _without(kind, op_type):
    checked = {k: set(v) for k, v in ALL.items()}
    checked[kind].remove(op_type)
    return checked


def test_checker_passes_a_fully_checked_registry():
    assert unchecked(FAKE, ALL, statistical={"rand"}) == ([], [])


@pytest.mark.parametrize("kind,op_type,want", [
    ("output", "cmp", (["cmp"], [])),                       # a forward op nobody compared with numpy
    ("output", "lin", (["lin"], [])),
    ("grad", "comp", ([], ["comp"])),                        # a composed gradient nobody checked
    ("grad", "lin", (["lin_grad"], ["lin"])),                # no gradient check: neither lin's nor lin_grad's values
    ("grad", "conv", (["conv_grad"], ["conv"])),
    ("grad", "lin_grad", (["lin_grad_grad"], ["lin_grad"])),  # no double-grad check of lin_grad
    ("statistical", "rand", (["rand"], [])),
])
def test_checker_reports_each_missing_record(kind, op_type, want):
    assert unchecked(FAKE, _without(kind, op_type), statistical={"rand"}) == want


def test_checker_exemptions():
    assert unchecked(FAKE, _without("output", "cmp"), statistical={"rand"}, no_output_check={"cmp"}) == ([], [])
    assert unchecked(FAKE, _without("grad", "comp"), statistical={"rand"}, no_grad_check={"comp"}) == ([], [])
    # an op checked statistically needs that record: a numpy-checked output does not replace it, nor the reverse
    checked = _without("statistical", "rand")
    checked["output"].add("rand")
    assert unchecked(FAKE, checked, statistical={"rand"}) == (["rand"], [])
    assert unchecked(FAKE, ALL) == (["rand"], [])
