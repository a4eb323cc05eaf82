"""The bench's Paddle 3.x references (``reference_paddle`` of every model, ``paddle.static``): each starts from
fluidlite's weights and agrees with fluidlite on the first step (and, where the optimizer's float rounding allows,
on the steps after it), bad weights and forgotten parameters are errors, and ``--compare paddle`` prints a Paddle
row. Skipped when paddle is not installed (``pip install ".[paddle]"``), except the checks that need no paddle."""
import json
import os
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models, reference

from test_bench_cli import _make_table, run_cli

HAS_PADDLE = reference.availability("paddle") is None
needs_paddle = pytest.mark.skipif(not HAS_PADDLE, reason="paddle is not installed (pip install '.[paddle]')")
FAST = ["--iterations", "2", "--warmup", "1", "--repeat", "2"]

# Small builds of every model (the references read their sizes from fluidlite's weights and batch): model ->
# (build kwargs, later steps also compared within this rtol, or None where they are not expected to agree closely).
# Adam's first updates divide the gradient by its own magnitude (g / (sqrt(g^2) + eps)), so where a gradient
# component is close to 0 the two frameworks' float rounding moves the weights apart: compared with rtol 1e-3 there.
SMALL = {
    "fit_a_line": ({"batch_size": 8}, 1e-5),
    "mlp": ({"batch_size": 8}, 1e-5),
    "overhead": ({"batch_size": 4}, 1e-4),
    "lenet": ({"batch_size": 2}, 1e-5),
    "lstm": ({"batch_size": 4}, 1e-5),
    "text_lstm": ({"batch_size": 4}, 1e-5),
    "text_cnn": ({"batch_size": 4}, 1e-5),
    "ctr_dnn": ({"batch_size": 8, "vocab": 1000, "hidden": (32, 32, 32)}, 1e-3),
    "transformer_encoder": ({"batch_size": 2}, 1e-3),
    "seq2seq": ({"batch_size": 3, "steps": 6, "min_len": 3, "vocab": 50, "emb_dim": 16, "hidden": 16}, 1e-3),
    "vgg_small": ({"batch_size": 2}, None),  # batch norm over 2 images: steps after the first amplify rounding
    "resnet_small": ({"batch_size": 2}, None),
    "mobilenet_v2": ({"batch_size": 2}, None),
}
STEPS = 3


def _fluidlite_run(mod, kwargs):
    """fluidlite's side at a small size: (params, plain feed, step function)."""
    kwargs = dict(kwargs)
    built = mod.build(kwargs.pop("batch_size"), 0, **kwargs)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(built.startup, scope=scope)
    names = sorted(p.name for p in built.main.global_block().all_parameters())
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    feed_dict = built.feed()
    step = lambda: exe.run(built.main, feed=feed_dict, fetch_list=built.fetch_list, scope=scope)[0]
    return params, reference.plain_feed(feed_dict), step


def test_every_model_has_a_paddle_reference():
    for name in models.MODELS:
        assert callable(reference.factory(models.load(name), "paddle")), name
    assert set(SMALL) <= set(models.MODELS)


@needs_paddle
@pytest.mark.parametrize("name", sorted(SMALL))
def test_paddle_reference_agrees_with_fluidlite(name):
    mod = models.load(name)
    kwargs, later_rtol = SMALL[name]
    params, feed, fl_step = _fluidlite_run(mod, kwargs)
    ref = mod.reference_paddle(params, feed)
    tol = reference.tolerance(mod)
    for i in range(STEPS if later_rtol is not None else 1):
        ours, theirs = np.asarray(fl_step(), np.float64).ravel(), np.asarray(ref.step(), np.float64).ravel()
        assert ours.shape == theirs.shape
        rtol = tol["rtol"] if i == 0 else later_rtol
        np.testing.assert_allclose(theirs, ours, rtol=rtol, atol=tol["atol"], err_msg="%s step %d" % (name, i))


@needs_paddle
def test_paddle_reference_with_other_weights_disagrees():
    """The check can fail: scaled weights give another loss (as the CLI's perturbation hook below)."""
    mod = models.load("mlp")
    params, feed, fl_step = _fluidlite_run(mod, SMALL["mlp"][0])
    p, f = reference.perturbed(params, feed)
    assert not np.allclose(mod.reference_paddle(p, f).step(), fl_step(), rtol=1e-4)


@needs_paddle
def test_paddle_static_errors():
    paddle = reference.import_framework("paddle")
    x = np.ones((2, 3), np.float32)

    def unassigned(pb):
        return paddle.mean(paddle.nn.Linear(3, 4)(pb.data("x", x)))
    with pytest.raises(RuntimeError, match=r"paddle reference: no fluidlite value for parameter\(s\) linear_0.w_0, "
                                           r"linear_0.b_0|linear_0.b_0, linear_0.w_0"):
        reference.PaddleStatic(unassigned, reference.paddle_optimizer("SGD", 0.1))

    def wrong_shape(pb):
        lin = paddle.nn.Linear(3, 4)
        pb.assign(lin.weight, np.zeros((4, 3), np.float32))
        return lin(pb.data("x", x))
    with pytest.raises(ValueError,
                       match=r"paddle reference: linear_0.w_0 has shape \[3, 4\], the value given \[4, 3\]"):
        reference.PaddleStatic(wrong_shape)

    # the same step, all weights given: it runs, and paddle computes x W + b
    w, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.full(4, 0.5, np.float32)

    def ok(pb):
        lin = paddle.nn.Linear(3, 4)
        pb.assign(lin.weight, w)
        pb.assign(lin.bias, b)
        return lin(pb.data("x", x))
    np.testing.assert_allclose(reference.PaddleStatic(ok).step(), x @ w + b)


@needs_paddle
def test_cli_prints_a_paddle_row(tmp_path):
    path = tmp_path / "p.json"
    r = run_cli("--model", "fit_a_line", "--compare", "paddle", "--threads", "1", "--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr  # paddle's import warning and its glog lines are kept quiet
    assert re.search(r"^  paddle +[\d.]+ \([\d.]+ - [\d.]+\) +[\d,.]+ +[\d.]+x", r.stdout, re.M), r.stdout
    doc = json.loads(path.read_text())
    res, = doc["results"]
    fws = {e["framework"]: e for e in res["compare"]["frameworks"]}
    paddle = fws["paddle"]
    assert paddle["status"] == "ok" and paddle["version"] == reference.version("paddle")
    assert paddle["fluidlite_speedup"] == pytest.approx(paddle["ms_per_step"]["median"] / res["ms_per_step"]["median"])
    assert paddle["rss_footprint"]["bytes"] > 0, paddle
    first = res["compare"]["agreement"]["first_step"]
    assert first["paddle"] == pytest.approx(first["fluidlite"], rel=1e-4)
    text = _make_table().render(doc, "python -m fluidlite.bench --model fit_a_line --compare paddle")
    row = re.search(r"^\| `fit_a_line` \| 20 \| 1 \| ([^|]+)\| ([^|]+)\| ([^|]+)\| ([^|]+)\| ([^|]+)\| ([^|]+)\|",
                    text, re.M)
    assert row, text
    assert re.match(r"[\d.]+ \([\d.]+–[\d.]+\)", row.group(3).strip()), row.group(3)
    assert row.group(2).strip() == "not run" and row.group(6).strip() == "**%.2f×**" % paddle["fluidlite_speedup"]
    assert "- Paddle: %s" % paddle["version"] in text
    assert re.search(r"^\| `fit_a_line` \|.*\| %s \|" % re.escape(
        _make_table().format_bytes(paddle["rss_footprint"]["bytes"])), text, re.M), text


@needs_paddle
def test_cli_notes_a_closest_equivalent_reference(tmp_path):
    """A model paddle.static cannot write the same way (no LoD batch here) says so under the table and in JSON."""
    from fluidlite.bench.models import text_lstm
    path = tmp_path / "n.json"
    r = run_cli("--model", "text_lstm", "--batch_size", "4", "--compare", "paddle", "--json", str(path), *FAST)
    assert r.returncode == 0, r.stderr
    assert "  paddle     note: %s\n" % text_lstm.PADDLE_NOTE in r.stdout, r.stdout
    fws = {e["framework"]: e for e in json.loads(path.read_text())["results"][0]["compare"]["frameworks"]}
    assert fws["paddle"]["note"] == text_lstm.PADDLE_NOTE and "note" not in fws["fluidlite"]
    text = _make_table().render(json.loads(path.read_text()), "cmd")
    assert "- `text_lstm`: %s." % text_lstm.PADDLE_NOTE in text, text


@needs_paddle
def test_cli_paddle_perturbed_weights_fail_the_agreement_check():
    r = run_cli("--model", "mlp", "--compare", "paddle", *FAST, env={reference.PERTURB_ENV: "paddle"})
    assert r.returncode == 1
    assert "AGREEMENT CHECK FAILED for model mlp: first-step result of paddle differs" in r.stderr, r.stderr


def test_cli_paddle_hidden_is_skipped():
    r = run_cli("--model", "fit_a_line", "--compare", "paddle,numpy", *FAST, hide=["paddle"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  paddle +skipped: not installed$", r.stdout, re.M), r.stdout
    assert re.search(r"^  numpy +[\d.]+", r.stdout, re.M), r.stdout


@needs_paddle
@pytest.mark.parametrize("given, expected", [(None, "2"), ("0", "0")])
def test_quiet_import_sets_paddles_log_level_unless_given(monkeypatch, given, expected):
    if given is None:
        monkeypatch.delenv(reference.PADDLE_LOG_LEVEL_ENV, raising=False)
    else:
        monkeypatch.setenv(reference.PADDLE_LOG_LEVEL_ENV, given)
    reference.import_framework("paddle")
    assert os.environ[reference.PADDLE_LOG_LEVEL_ENV] == expected
