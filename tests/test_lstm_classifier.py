"""Issue 5's LSTM text classifier (embedding -> StaticRNN LSTM -> last step -> fc -> softmax): learns a
task that needs memory across steps, its cell variants agree, and the `lstm` benchmark model agrees
with PyTorch's nn.LSTM from the same weights."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.bench import models

SEQ, VOCAB, EMB, HIDDEN, MARKER = 8, 30, 16, 16, 1


def _marker_data(n, seed):
    """Ids [SEQ, n, 1] in 2..VOCAB-1; half the sequences get MARKER at a random step (label 1)."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(2, VOCAB, size=(SEQ, n, 1)).astype("int64")
    labels = (rng.rand(n) < 0.5).astype("int64")
    pos = rng.randint(0, SEQ, size=n)
    ids[pos[labels == 1], np.nonzero(labels)[0], 0] = MARKER
    return ids, labels.reshape(n, 1)


def _program(cell, lr=0.02, seed=11):
    lstm = models.load("lstm")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data(name="words", shape=[SEQ, -1, 1], dtype="int64", append_batch_size=False)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        logits, loss = lstm.network(words, label, seq_len=SEQ, vocab=VOCAB, emb_dim=EMB, hidden=HIDDEN,
                                    num_classes=2, cell=cell)
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        fluid.optimizer.Adam(learning_rate=lr).minimize(loss)
    return main, startup, loss, acc


@pytest.mark.parametrize("cell", ["hoisted", "concat"])
def test_lstm_classifier_learns_marker_task(cell):
    ids, labels = _marker_data(256, seed=4)
    main, startup, loss, acc = _program(cell)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for _epoch in range(15):
        for i in range(0, 256, 64):
            loss_value, = exe.run(main, feed={"words": ids[:, i:i + 64], "label": labels[i:i + 64]}, fetch_list=[loss],
                         scope=scope)
            losses.append(float(loss_value.ravel()[0]))
    test = main.clone(for_test=True)
    a, = exe.run(test, feed={"words": ids, "label": labels}, fetch_list=[acc], scope=scope)
    assert float(a.ravel()[0]) > 0.9, (float(a.ravel()[0]), losses[0], losses[-1])


def test_cell_variants_compute_the_same_function():
    # same weights rearranged: "concat" keeps [W_x; W_h] in one fc, the others split it in two fcs
    ids, labels = _marker_data(8, seed=1)
    runs = {}
    for cell in ("hoisted", "unfused", "concat"):
        main, startup, loss, _ = _program(cell)
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        runs[cell] = (main, loss, exe, scope)
    lstm = models.load("lstm")
    ref = runs["concat"][3]
    get = lambda scope, n: np.array(scope.find_var(n).get_tensor())
    wx, wh, b, head = lstm.lstm_weights({n: get(ref, n) for n in ("fc_0.w_0", "fc_0.b_0")}, "concat")
    for cell in ("hoisted", "unfused"):
        scope = runs[cell][3]
        values = {"embedding_0.w_0": get(ref, "embedding_0.w_0"), "fc_0.w_0": wx, "fc_0.b_0": b, "fc_1.w_0": wh,
                  "fc_2.w_0": get(ref, "fc_1.w_0"), "fc_2.b_0": get(ref, "fc_1.b_0")}
        for n, v in values.items():
            scope.find_var(n).get_tensor().set(np.ascontiguousarray(v), fluid.CPUPlace())
    out = {}
    for cell, (main, loss, exe, scope) in runs.items():
        out[cell] = [float(exe.run(main, feed={"words": ids, "label": labels}, fetch_list=[loss],
                                   scope=scope)[0].ravel()[0]) for _ in range(3)]
    np.testing.assert_allclose(out["hoisted"], out["concat"], rtol=1e-5)
    np.testing.assert_allclose(out["unfused"], out["concat"], rtol=1e-5)
    assert out["concat"][2] < out["concat"][0]


def test_lstm_model_agrees_with_torch():
    torch = pytest.importorskip("torch")
    lstm = models.load("lstm")
    built = lstm.build(8, 3)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in built.main.global_block().all_parameters()}
    feed = built.feed()
    assert feed["words"].shape == (lstm.SEQ_LEN, 8, 1)
    ref = lstm.reference_torch(params, feed)
    ours = [float(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0].ravel()[0])
            for _ in range(3)]
    theirs = [float(ref.step()) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **lstm.TOLERANCE)
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=1e-4, atol=1e-5)  # after SGD updates
    assert ours[2] < ours[0]
    assert isinstance(ref.lstm, torch.nn.LSTM)
