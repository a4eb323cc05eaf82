"""The `seq2seq` benchmark model: its structure (three StaticRNNs: the encoder's two directions and the attention
decoder), its batch, its loss against a numpy model written sequence by sequence over the real (unpadded) steps
only, agreement with its PyTorch reference (nn.GRU on a PackedSequence + nn.GRUCell loop, or the BasicGRUUnit
cell) over the first Adam steps, and that training lowers the loss."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models, reference

SMALL = {"steps": 7, "min_len": 1, "vocab": 23, "emb_dim": 6, "hidden": 5}  # lengths 1-7: one-word sequences too


def _start(cell, batch=4, seed=3, **sizes):
    mod = models.load("seq2seq")
    built = mod.build(batch, seed, cell=cell, **sizes)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in built.main.global_block().all_parameters()}
    feed = built.feed()

    def step():
        return float(np.asarray(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0]).ravel()[0])
    return mod, built, params, feed, step, scope


@pytest.fixture
def torch_one_thread():
    """torch on one thread: its OpenMP threads spin against fluidlite's pool on a shared 2-core machine."""
    torch = pytest.importorskip("torch")
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


# ---------------------------------------------------------------------------------------------- numpy model

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _cell(p, prefix, cell, x, h):
    """One GRU step of a [in] input and [h] state, in float64."""
    if cell == "reset_after":
        if prefix == "dec":
            w_ih = np.concatenate([p["dec_ih_w"], p["dec_ctx_w"]], axis=0)
        else:
            w_ih = p[prefix + "_ih_w"]
        gi = x @ w_ih + p[prefix + "_ih_b"]
        gh = h @ p[prefix + "_hh_w"] + p[prefix + "_hh_b"]
        d = h.shape[0]
        r = _sigmoid(gi[:d] + gh[:d])
        z = _sigmoid(gi[d:2 * d] + gh[d:2 * d])
        n = np.tanh(gi[2 * d:] + r * gh[2 * d:])
        return (1 - z) * n + z * h
    gates = _sigmoid(np.concatenate([x, h]) @ p[prefix + "_w_gate"] + p[prefix + "_b_gate"])
    r, u = np.split(gates, 2)
    c = np.tanh(np.concatenate([x, r * h]) @ p[prefix + "_w_candidate"] + p[prefix + "_b_candidate"])
    return u * h + (1 - u) * c


def numpy_loss(params, feed, cell):
    """The masked cross-entropy, sequence by sequence: each encoder direction runs over the sentence's own words
    only, the attention looks at those positions only, and the loss covers the target's own steps only."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    hidden = p["att_q_w"].shape[0]
    total, count = 0.0, 0
    for b in range(feed["src_len"].shape[0]):
        n, m = int(feed["src_len"][b]), int(feed["trg_len"][b])
        words = p["src_emb_table"][feed["src"][:n, b, 0]]
        fwd, bwd = np.zeros((n, hidden)), np.zeros((n, hidden))
        h = np.zeros(hidden)
        for t in range(n):
            h = fwd[t] = _cell(p, "enc_fwd", cell, words[t], h)
        final_fwd, h = h, np.zeros(hidden)
        for t in reversed(range(n)):
            h = bwd[t] = _cell(p, "enc_bwd", cell, words[t], h)
        enc = np.concatenate([fwd, bwd], axis=1)  # [n, 2h]
        h = np.tanh(np.concatenate([final_fwd, h]) @ p["dec_init_w"] + p["dec_init_b"])
        keys = enc @ p["enc_proj_w"]
        for t in range(m):
            scores = np.tanh(keys + h @ p["att_q_w"]) @ p["att_v_w"][:, 0]
            weights = np.exp(scores - scores.max())
            context = (weights / weights.sum()) @ enc
            x = np.concatenate([p["trg_emb_table"][feed["trg"][t, b, 0]], context])
            h = _cell(p, "dec", cell, x, h)
            logits = h @ p["output_w"] + p["output_b"]
            top = logits.max()
            total += top + np.log(np.exp(logits - top).sum()) - logits[feed["label"][t, b, 0]]
        count += m
    return total / count


# ---------------------------------------------------------------------------------------------- tests

def test_structure_parameters_and_batch():
    mod = models.load("seq2seq")
    built = mod.build(32, 0)
    ops = [op.type for op in built.main.global_block().ops]
    assert ops.count("recurrent") == 3 and ops.count("recurrent_grad") == 3
    assert ops.count("adam") == len(built.main.global_block().all_parameters())
    h, e, v = mod.HIDDEN, mod.EMB_DIM, mod.TRG_VOCAB
    params = {p.name: tuple(p.shape) for p in built.main.global_block().all_parameters()}
    expected = {"src_emb_table": (mod.SRC_VOCAB, e), "trg_emb_table": (v, e), "dec_init_w": (2 * h, h),
                "dec_init_b": (h,), "enc_proj_w": (2 * h, h), "att_q_w": (h, h), "att_v_w": (h, 1),
                "dec_ih_w": (e, 3 * h), "dec_ih_b": (3 * h,), "dec_ctx_w": (2 * h, 3 * h), "dec_hh_w": (h, 3 * h),
                "dec_hh_b": (3 * h,), "output_w": (h, v), "output_b": (v,)}
    for d in ("enc_fwd", "enc_bwd"):
        expected.update({d + "_ih_w": (e, 3 * h), d + "_ih_b": (3 * h,), d + "_hh_w": (h, 3 * h),
                         d + "_hh_b": (3 * h,)})
    assert params == expected
    basic = {p.name: tuple(p.shape) for p in mod.build(2, 0, cell="basic").main.global_block().all_parameters()}
    assert basic["enc_fwd_w_gate"] == (e + h, 2 * h) and basic["enc_bwd_w_candidate"] == (e + h, h)
    assert basic["dec_w_gate"] == (e + 2 * h + h, 2 * h) and basic["dec_b_candidate"] == (h,)

    feed = built.feed()
    s = mod.SEQ_LEN
    assert {k: a.shape for k, a in feed.items()} == {"src": (s, 32, 1), "trg": (s, 32, 1), "label": (s, 32, 1),
                                                    "src_len": (32,), "trg_len": (32,)}
    for b in range(32):
        n, m = feed["src_len"][b], feed["trg_len"][b]
        assert mod.MIN_LEN <= n <= s and mod.MIN_LEN <= m <= s
        assert (feed["src"][:n, b] >= 2).all() and (feed["src"][n:, b] == mod.EOS_ID).all()
        assert feed["label"][m - 1, b, 0] == mod.EOS_ID and (feed["label"][:m - 1, b] >= 2).all()
        assert feed["trg"][0, b, 0] == mod.BOS_ID and (feed["trg"][1:m, b] == feed["label"][:m - 1, b]).all()
    again = mod.build(32, 0).feed()
    assert all((again[k] == feed[k]).all() for k in feed)  # fixed by the seed
    assert (mod.build(32, 1).feed()["src_len"] != feed["src_len"]).any()
    assert callable(reference.factory(mod, "torch")) and reference.factory(mod, "numpy") is None
    assert set(mod.DEFAULTS) == {"batch_size", "iterations", "warmup", "repeat"} and mod.DEFAULTS["batch_size"] == 32


def test_unknown_cell_is_an_error():
    with pytest.raises(ValueError, match="seq2seq: unknown cell 'lstm'"):
        models.load("seq2seq").build(2, 0, cell="lstm")


@pytest.mark.parametrize("cell", ["reset_after", "basic"])
def test_loss_matches_a_per_sequence_numpy_model(cell):
    # lengths from 1 to 7 over 7 padded steps, so padding, one-word sentences and full ones all occur
    mod, _, params, feed, step, _ = _start(cell, batch=6, seed=5, **SMALL)
    assert feed["src_len"].min() < feed["src_len"].max() and (feed["src_len"] < SMALL["steps"]).any()
    np.testing.assert_allclose(step(), numpy_loss(params, feed, cell), rtol=2e-5)


def test_padding_does_not_change_the_loss():
    # what lies past each sentence's end (here: other words than EOS) is masked out everywhere
    mod, built, params, feed, step, scope = _start("reset_after", batch=6, seed=5, **SMALL)
    loss = step()
    rng = np.random.RandomState(0)
    noisy = {k: np.array(v) for k, v in feed.items()}
    for b in range(6):
        for name, n in (("src", feed["src_len"][b]), ("trg", feed["trg_len"][b]), ("label", feed["trg_len"][b])):
            noisy[name][n:, b, 0] = rng.randint(2, SMALL["vocab"], size=SMALL["steps"] - n)
    exe = fluid.Executor(fluid.CPUPlace())
    fresh = fluid.Scope()
    exe.run(built.startup, scope=fresh)
    got = exe.run(built.main, feed=noisy, fetch_list=built.fetch_list, scope=fresh)[0]
    np.testing.assert_allclose(float(np.asarray(got).ravel()[0]), loss, rtol=1e-6)


@pytest.mark.parametrize("cell", ["reset_after", "basic"])
def test_agrees_with_torch_over_adam_steps(cell, torch_one_thread):
    mod, _, params, feed, step, scope = _start(cell, batch=5, seed=2, **SMALL)
    ref = mod.TorchSeq2Seq(params, reference.plain_feed(feed), cell=cell)
    ours = [step() for _ in range(3)]
    theirs = [float(ref.step()[0]) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **mod.TOLERANCE)
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=2e-4, atol=1e-5)  # after Adam updates of every weight
    assert ours[2] < ours[0] - 1e-3  # the later steps compare updated weights, not the initial ones
    # an updated weight as a whole: the attention's scoring vector moved the same way in both
    ours_d = np.array(scope.find_var("att_v_w").get_tensor())[:, 0] - params["att_v_w"][:, 0]
    theirs_d = ref.att_v.weight.detach().numpy()[0] - params["att_v_w"][:, 0]
    cos = (ours_d * theirs_d).sum() / np.linalg.norm(ours_d) / np.linalg.norm(theirs_d)
    assert cos > 0.99 and np.abs(ours_d).max() > 1e-3, cos


def test_bench_sizes_agree_with_torch(torch_one_thread):
    # the benchmark's own sizes (batch reduced to 4): the first-step loss the bench checks before timing
    assert models.load("seq2seq").CELL == "reset_after"
    mod, _, params, feed, step, _ = _start("reset_after", batch=4, seed=0)
    np.testing.assert_allclose(step(), float(mod.reference_torch(params, reference.plain_feed(feed)).step()[0]),
                               **mod.TOLERANCE)


def test_training_lowers_the_loss():
    _, _, _, _, step, _ = _start("reset_after", batch=8, seed=1, lr=0.02, **SMALL)
    losses = [step() for _ in range(12)]
    assert losses[-1] < 0.8 * losses[0], losses
