"""docs/ops.md is generated from the C++ op registry and must match it."""
import importlib.util
import os

import pytest

from fluidlite import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_ops_md", os.path.join(ROOT, "tools", "gen_ops_md.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


needs_cuda_build = pytest.mark.skipif(not core.is_compiled_with_cuda(), reason="docs/ops.md lists CUDA kernels, "
                                      "which only a CUDA build registers (CI builds with nvcc)")


@needs_cuda_build
def test_ops_md_is_up_to_date(tmp_path):
    gen = load_generator()
    fresh = tmp_path / "ops.md"
    assert gen.main(["--out", str(fresh)]) == 0
    with open(os.path.join(ROOT, "docs", "ops.md")) as f:
        committed = f.read()
    assert committed == fresh.read_text(), "docs/ops.md is out of date: run python tools/gen_ops_md.py"
    assert gen.main(["--check"]) == 0


@needs_cuda_build
def test_every_registered_op_is_documented():
    text = load_generator().generate()
    for t in core.op_types():
        assert "\n## %s\n" % t in text, t
        assert "| [`%s`](#%s) |" % (t, t) in text, t


def test_render_shows_slots_attrs_and_grad():
    gen = load_generator()
    proto = {
        "type": "toy", "doc": "Out = X | Y.", "has_grad": True, "has_kernel": True, "grad": "grad_op",
        "grad_op": "toy_grad", "forward_op": "",
        "kernels": "CPU:float32,float64; CUDA:float32",
        "inputs": [{"name": "X", "doc": "first", "duplicable": True, "dispensable": False}],
        "outputs": [{"name": "Out", "doc": "result", "duplicable": False, "dispensable": True}],
        "attrs": [{"name": "alpha", "type": "FLOAT", "default": 0.10000000149011612, "doc": "a", "required": False},
                  {"name": "axis", "type": "INT", "default": None, "doc": "b", "required": True}],
    }
    grad = dict(proto, type="toy_grad", doc="", has_grad=False, grad="none", grad_op="", forward_op="toy", attrs=[])
    composed = dict(proto, type="toy2", grad="composed", grad_op="")
    text = gen.render([proto, grad, composed])
    assert "| [`toy`](#toy) | Out = X \\| Y. | float32, float64 | float32 | [`toy_grad`](#toy_grad) |" in text
    assert "| `X` | duplicable | first |" in text
    assert "| `Out` | dispensable | result |" in text
    assert "| `alpha` | FLOAT | `0.1` | a |" in text
    assert "| `axis` | INT | required | b |" in text
    assert "Kernels (CPU): float32, float64. Kernels (CUDA): float32. Gradient: [`toy_grad`](#toy_grad)." in \
        text.split("## toy")[1]
    assert "## toy_grad" in text
    assert "Generated from [`toy`](#toy): slots, attributes and shape inference are derived" in text
    assert "| [`toy2`](#toy2) | Out = X \\| Y. | float32, float64 | float32 | composed of other ops |" in text
