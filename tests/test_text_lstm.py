"""The `text_lstm` benchmark model: its structure (embedding, fc, dynamic_lstm, sequence_last_step on a LoD batch),
agreement with its PyTorch reference (pack_padded_sequence + nn.LSTM) over the first steps from the same weights,
and its peak tensor memory against the same model padded to the longest sequence."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core
from fluidlite.bench import models, reference


def _run(built, seed=None):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(built.startup, scope=scope)
    feed = built.feed()
    names = sorted(p.name for p in built.main.global_block().all_parameters())
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in names}

    def step():
        return float(np.asarray(exe.run(built.main, feed=feed, fetch_list=built.fetch_list, scope=scope)[0]).ravel()[0])
    return step, params, feed, exe, scope


def test_text_lstm_structure_and_batch():
    mod = models.load("text_lstm")
    built = mod.build(64, 0)
    ops = [op.type for op in built.main.global_block().ops]
    assert ops[:6] == ["lookup_table", "mul", "elementwise_add", "lstm", "sequence_pool", "mul"]
    assert "lstm_grad" in ops and "recurrent" not in ops
    params = {p.name: p.shape for p in built.main.global_block().all_parameters()}
    assert params == {"embedding_0.w_0": (10000, 128), "fc_0.w_0": (128, 512), "fc_0.b_0": (512,),
                      "lstm_0.w_0": (128, 512), "lstm_0.b_0": (1, 512), "fc_1.w_0": (128, 2), "fc_1.b_0": (2,)}
    words = built.feed()["words"]
    lens, = words.recursive_sequence_lengths()
    assert len(lens) == 64 and min(lens) >= mod.MIN_LEN and max(lens) <= mod.MAX_LEN
    assert np.array(words).shape == (sum(lens), 1)
    assert lens == mod.build(64, 0).feed()["words"].recursive_sequence_lengths()[0]  # fixed by the seed
    assert lens != mod.build(64, 1).feed()["words"].recursive_sequence_lengths()[0]
    assert models.MODELS["text_lstm"] and callable(reference.factory(mod, "torch"))
    assert reference.factory(mod, "numpy") is None
    assert set(mod.DEFAULTS) == {"batch_size", "iterations", "warmup", "repeat"} and mod.DESCRIPTION


@pytest.fixture
def torch_one_thread():
    """torch on one thread: its OpenMP threads spin against fluidlite's pool on a shared 2-core machine (a step
    took 0.7-2.9 s on two threads, 0.1 s on one)."""
    torch = pytest.importorskip("torch")
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def test_text_lstm_agrees_with_torch_packed_lstm(torch_one_thread):
    mod = models.load("text_lstm")
    step, params, feed, _, _ = _run(mod.build(16, 3))
    ref = mod.reference_torch(params, reference.plain_feed(feed))
    ours = [step() for _ in range(3)]
    theirs = [float(ref.step()) for _ in range(3)]
    np.testing.assert_allclose(ours[0], theirs[0], **mod.TOLERANCE)
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=2e-4, atol=1e-5)  # after SGD updates of every weight
    assert abs(ours[2] - ours[0]) > 1e-3  # the later steps compare updated weights, not the initial ones


def test_text_lstm_torch_padded_variant_computes_the_same(torch_one_thread):
    # benchmarks/text_lstm_torch.py's second torch reference: nn.LSTM over the padded batch, last steps gathered.
    mod = models.load("text_lstm")
    step, params, feed, _, _ = _run(mod.build(8, 5))
    packed = mod.TorchPackedLSTM(params, reference.plain_feed(feed))
    padded = mod.TorchPackedLSTM(params, reference.plain_feed(feed), padded=True)
    ours = [step() for _ in range(2)]
    for ref in (packed, padded):
        np.testing.assert_allclose([float(ref.step()) for _ in range(2)], ours, rtol=2e-4, atol=1e-5)


def test_text_lstm_reference_feed_keeps_the_lod():
    mod = models.load("text_lstm")
    feed = reference.plain_feed(mod.build(4, 0).feed())
    ids, lens = feed["words"]
    assert ids.shape == (sum(lens[0]), 1) and len(lens[0]) == 4 and feed["label"].shape == (4, 1)
    _, scaled = reference.perturbed({}, feed)
    np.testing.assert_array_equal(scaled["words"][0], ids)  # ids are not floats: left alone
    assert scaled["words"][1] == lens


def _peak(built):
    place = fluid.CPUPlace()
    step, _, _, _, _ = _run(built)
    step()
    core.release_cached_memory()
    core.reset_peak_memory(place)
    step()
    return core.memory_stats(place)["peak_bytes"]


def test_text_lstm_peak_memory_below_the_padded_equivalent():
    # The point of LoD: the same model on the same batch padded to its longest sequence keeps more in tensors,
    # both as StaticRNN over [max len, N] and as dynamic_lstm over the padded rows.
    mod = models.load("text_lstm")
    lod = _peak(mod.build(64, 0))
    assert lod < _peak(mod.build_padded(64, 0))
    assert lod < _peak(mod.build(64, 0, pad_to_longest=True))
