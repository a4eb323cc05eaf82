"""The `transformer_encoder` benchmark model: its structure (Fluid's Transformer encoder ops, post-LN), agreement
with its torch reference over the first Adam steps, and that it learns a token-presence task."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models, reference


def _start(batch, seed=3):
    mod = models.load("transformer_encoder")
    built = mod.build(batch, seed)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in built.main.global_block().all_parameters()}
    return mod, built, exe, scope, params


def test_structure_and_parameters():
    mod, built, _, _, params = _start(2)
    ops = [op.type for op in built.main.global_block().ops]
    assert ops.count("layer_norm") == 2 * mod.N_LAYER and ops.count("layer_norm_grad") == 2 * mod.N_LAYER
    assert ops.count("matmul") == 2 * mod.N_LAYER and ops.count("softmax") == mod.N_LAYER
    assert ops.count("mul") == 6 * mod.N_LAYER + 1 and ops.count("adam") == len(params)
    assert "dropout" not in ops
    scales = [op for op in built.main.global_block().ops if op.type == "matmul" and op.attr("transpose_Y")]
    assert len(scales) == mod.N_LAYER and all(op.attr("alpha") == pytest.approx(0.125) for op in scales)
    assert params["fc_0.w_0"].shape == (256, 256) and "fc_0.b_0" not in params  # q/k/v/out: no bias
    assert params["fc_4.w_0"].shape == (256, 1024) and params["fc_5.w_0"].shape == (1024, 256)
    assert params["layer_norm_3.w_0"].shape == (256,) and params["pos_embedding"].shape == (64, 256)
    np.testing.assert_array_equal(params["layer_norm_0.w_0"], np.ones(256, "float32"))
    assert built.feed()["tokens"].shape == (2, mod.SEQ_LEN, 1)


def test_agrees_with_torch():
    pytest.importorskip("torch")
    mod, built, exe, scope, params = _start(4)
    assert callable(reference.factory(mod, "torch")) and reference.factory(mod, "numpy") is None
    feed = built.feed()
    ref = mod.reference_torch(params, feed)
    ours = [float(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0].ravel()[0])
            for _ in range(3)]
    theirs = [float(ref.step()) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **mod.TOLERANCE)
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=1e-3, atol=1e-5)  # after Adam updates
    assert ours[2] < ours[0] - 1e-3
    # and the updated weights: a layer norm scale element by element; the first projection's update as a
    # direction (Adam moves an element with a near-zero gradient by up to lr whatever its sign, so single
    # elements of a large matrix may differ by ~lr between frameworks)
    np.testing.assert_allclose(np.array(scope.find_var("layer_norm_1.w_0").get_tensor()),
                               ref.layers[0]["ln2_w"].detach().numpy(), rtol=1e-3, atol=2e-5)
    ours_d = np.array(scope.find_var("fc_0.w_0").get_tensor()) - params["fc_0.w_0"]
    theirs_d = ref.layers[0]["q"].detach().numpy() - params["fc_0.w_0"]
    cos = (ours_d * theirs_d).sum() / np.linalg.norm(ours_d) / np.linalg.norm(theirs_d)
    assert cos > 0.99 and np.abs(ours_d).max() > 1e-3, cos


def test_learns_token_presence():
    # label 1 iff token 7 occurs in the sequence (~half of them): attention + pooling must find it.
    mod = models.load("transformer_encoder")
    rng = np.random.RandomState(0)
    seq, vocab = 16, 50
    n = 128
    ids = rng.randint(8, vocab, size=(n, seq, 1)).astype("int64")
    labels = (rng.rand(n) < 0.5).astype("int64").reshape(n, 1)
    for i in np.nonzero(labels[:, 0])[0]:
        ids[i, rng.randint(seq), 0] = 7
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        tokens = fluid.layers.data(name="tokens", shape=[seq, 1], dtype="int64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        logits, loss = mod.network(tokens, label, seq_len=seq, vocab=vocab, d_model=32, n_head=2, d_inner=64,
                                   n_layer=1, num_classes=2)
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        fluid.optimizer.Adam(learning_rate=3e-3).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(60):
        a, = exe.run(main, feed={"tokens": ids, "label": labels}, fetch_list=[acc], scope=scope)
    assert float(a.ravel()[0]) > 0.95
