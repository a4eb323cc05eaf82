"""text_lstm: an LSTM text classifier over a LoD batch, one SGD training step (64 sequences of 5-100 words).

int64 word ids, one LoDTensor [T, 1] whose LoD marks the sequences (no padding) -> embedding 10000 x 128 ->
fc 4 * 128 (the input projection of every step at once) -> dynamic_lstm 128 (no peepholes: torch has none) ->
sequence_last_step -> fc 2 -> softmax cross-entropy averaged over the batch. The lengths are drawn uniformly from
[MIN_LEN, MAX_LEN] with the run's seed.

The torch reference is what a PyTorch user writes for variable-length text: the ids packed once with
``pack_padded_sequence`` (enforce_sorted=False), the embedding applied to the packed rows, ``nn.LSTM`` on the
PackedSequence and its h_n (each sequence's last step) into ``nn.Linear``. It holds fluidlite's weights: fc_0 is
nn.LSTM's input projection (weight_ih, bias_ih) and lstm_0 its recurrent one (weight_hh, bias_hh), the gate blocks
reordered from Fluid's (candidate, input, forget, output) to torch's (input, forget, candidate, output).

For the memory comparison (benchmarks/text_lstm_memory.py) the same model padded to the longest sequence:
``build_padded``, the ``lstm`` model's StaticRNN LSTM over [max length, batch], and ``build(pad_to_longest=True)``,
these ops on a LoD batch whose sequences are all padded to the longest.
"""
import numpy as np

import fluidlite as fluid

from . import Built, padded_ids, text_batch

DESCRIPTION = ("LSTM text classifier on LoD ids: embedding 10000x128, fc 512, dynamic_lstm 128, last step, fc 2, SGD "
               "(64 sequences of 5-100)")
DEFAULTS = {"batch_size": 64, "iterations": 20, "warmup": 3, "repeat": 5}
VOCAB = 10000
EMB_DIM = 128
HIDDEN = 128
NUM_CLASSES = 2
MIN_LEN, MAX_LEN = 5, 100
LEARNING_RATE = 0.1
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def network(words, label, vocab=VOCAB, emb_dim=EMB_DIM, hidden=HIDDEN, num_classes=NUM_CLASSES):
    """words: int64 [T, 1] with one LoD level; label: int64 [N, 1]. Returns (logits, mean loss).

    Parameters (in creation order): embedding_0.w_0 [vocab, emb_dim]; fc_0.w_0 [emb_dim, 4h] + fc_0.b_0 (the input
    projection, gates candidate, input, forget, output); lstm_0.w_0 [h, 4h] + lstm_0.b_0 [1, 4h]; fc_1.w_0
    [h, num_classes] + fc_1.b_0."""
    emb = L.embedding(input=words, size=[vocab, emb_dim])
    proj = L.fc(input=emb, size=4 * hidden)
    h, _ = L.dynamic_lstm(input=proj, size=4 * hidden, use_peepholes=False)
    logits = L.fc(input=L.sequence_last_step(h), size=num_classes)
    return logits, L.mean(L.softmax_with_cross_entropy(logits, label))


def sample_batch(batch_size, seed):
    """(ids [T, 1], lengths, labels [N, 1]) of the run's fixed batch."""
    return text_batch(batch_size, seed, VOCAB, NUM_CLASSES, MIN_LEN, MAX_LEN)


def build(batch_size, seed, pad_to_longest=False):
    """One SGD step on the fixed batch. pad_to_longest: every sequence padded with id 0 to the longest one (the same
    ops on a LoD batch of equal lengths; for the memory comparison)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = L.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = network(words, label)
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
    ids, lengths, labels = sample_batch(batch_size, seed)
    if pad_to_longest:
        ids, lengths = padded_ids(ids, lengths).reshape(-1, 1), [max(lengths)] * batch_size
    words_t = fluid.create_lod_tensor(ids, [lengths], fluid.CPUPlace())
    return Built(main, startup, lambda: {"words": words_t, "label": labels}, [loss])


def build_padded(batch_size, seed):
    """The same classifier on the same batch padded to its longest sequence: the ``lstm`` model's StaticRNN LSTM
    (input projection hoisted, fused lstm_unit cell) over ids [max length, batch, 1], its last step into fc 2."""
    from . import lstm
    ids, lengths, labels = sample_batch(batch_size, seed)
    steps = max(lengths)
    padded = padded_ids(ids, lengths).T[:, :, None]  # time-major [max length, N, 1]
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = L.data(name="words", shape=[steps, -1, 1], dtype="int64", append_batch_size=False)
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = lstm.network(words, label, seq_len=steps, num_classes=NUM_CLASSES)
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
    return Built(main, startup, lambda: {"words": padded, "label": labels}, [loss])


def torch_gates(m):
    """[..., 4h] columns in Fluid's gate order (candidate, input, forget, output) -> torch's (i, f, g, o)."""
    c, i, f, o = np.split(m, 4, axis=-1)
    return np.ascontiguousarray(np.concatenate([i, f, c, o], axis=-1))


class TorchPackedLSTM:
    """embedding on the packed ids -> nn.LSTM on the PackedSequence -> h_n -> Linear -> CrossEntropyLoss, SGD.
    padded=True: nn.LSTM over the padded [max length, N] batch instead, each sequence's output at its last step
    gathered (the same function: the padding comes after every last step; benchmarks/text_lstm_torch.py)."""

    def __init__(self, params, feed, lr=LEARNING_RATE, padded=False):
        import torch
        from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

        from ..reference import torch_linear
        ids, (lengths,) = feed["words"]
        emb_w = params["embedding_0.w_0"]
        self.emb = torch.nn.Embedding(emb_w.shape[0], emb_w.shape[1])
        wx, bx, wh, bh = (params[n] for n in ("fc_0.w_0", "fc_0.b_0", "lstm_0.w_0", "lstm_0.b_0"))
        self.lstm = torch.nn.LSTM(wx.shape[0], wh.shape[0])
        with torch.no_grad():
            self.emb.weight.copy_(torch.from_numpy(emb_w))
            self.lstm.weight_ih_l0.copy_(torch.from_numpy(np.ascontiguousarray(torch_gates(wx).T)))
            self.lstm.bias_ih_l0.copy_(torch.from_numpy(torch_gates(bx)))
            self.lstm.weight_hh_l0.copy_(torch.from_numpy(np.ascontiguousarray(torch_gates(wh).T)))
            self.lstm.bias_hh_l0.copy_(torch.from_numpy(torch_gates(bh.reshape(-1))))
        self.fc = torch_linear(params, "fc_1")
        mods = torch.nn.ModuleList([self.emb, self.lstm, self.fc])
        self.opt = torch.optim.SGD(mods.parameters(), lr=lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.padded = padded
        ids_tn = torch.from_numpy(np.ascontiguousarray(padded_ids(ids, lengths).T))  # [max length, N]
        if padded:  # [max length, N] ids, and where each sequence's last step is in the [max length * N] outputs
            self.ids, self.last = ids_tn, torch.tensor([(n - 1) * len(lengths) + s for s, n in enumerate(lengths)])
        else:
            packed = pack_padded_sequence(ids_tn, torch.tensor(lengths), enforce_sorted=False)
            self.ids, self.pack = packed.data, packed
        self.PackedSequence = PackedSequence
        self.y = torch.from_numpy(np.ascontiguousarray(feed["label"].reshape(-1)))

    def forward(self):
        if self.padded:
            out, _ = self.lstm(self.emb(self.ids))
            return self.fc(out.reshape(-1, out.shape[-1])[self.last])
        p = self.pack
        x = self.PackedSequence(self.emb(self.ids), p.batch_sizes, p.sorted_indices, p.unsorted_indices)
        _, (h_n, _) = self.lstm(x)
        return self.fc(h_n[-1])  # h_n is in the sequences' order (enforce_sorted=False unsorts it)

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy()


TORCH_INPUT = "packed"  # the torch reference's input: "packed" (PackedSequence) or "padded" ([max length, N])


def reference_torch(params, feed):
    return TorchPackedLSTM(params, feed, padded=TORCH_INPUT == "padded")


def paddle_padded_lstm(params, feed, lr=LEARNING_RATE):
    """paddle.static has no LoD batch any more (no dynamic_lstm): the closest equivalent is what a Paddle 3 user
    writes, the ids padded to the longest sequence ([max length, N], time-major) -> embedding -> paddle.nn.LSTM with
    ``sequence_length`` (the fused ``rnn`` op: a state stays put past its sequence's end, so the final state is each
    sequence's last step) -> Linear -> softmax cross-entropy, SGD. It computes the same function of the same weights
    (gates reordered as for torch) but runs the LSTM over max length x N rows, not the batch's real rows."""
    from ..reference import PaddleStatic, paddle_linear, paddle_optimizer, paddle_softmax_ce
    ids, (lengths,) = feed["words"]

    def build(pb):
        paddle = pb.paddle
        words = pb.data("words", padded_ids(ids, lengths).T)  # [max length, N]
        seq_len = pb.data("lengths", np.asarray(lengths, dtype=np.int64))
        label = pb.data("label", feed["label"])
        emb_w = params["embedding_0.w_0"]
        table = pb.assign(paddle.nn.Embedding(emb_w.shape[0], emb_w.shape[1]).weight, emb_w)
        wx, bx, wh, bh = (params[n] for n in ("fc_0.w_0", "fc_0.b_0", "lstm_0.w_0", "lstm_0.b_0"))
        lstm = paddle.nn.LSTM(wx.shape[0], wh.shape[0], time_major=True)
        pb.assign(lstm.weight_ih_l0, torch_gates(wx).T)
        pb.assign(lstm.bias_ih_l0, torch_gates(bx))
        pb.assign(lstm.weight_hh_l0, torch_gates(wh).T)
        pb.assign(lstm.bias_hh_l0, torch_gates(bh.reshape(-1)))
        _, (h_n, _) = lstm(paddle.nn.functional.embedding(words, table), sequence_length=seq_len)
        return paddle_softmax_ce(pb, paddle_linear(pb, params, "fc_1")(h_n[-1]), label)
    return PaddleStatic(build, paddle_optimizer("SGD", lr), note=PADDLE_NOTE)


PADDLE_NOTE = ("the batch padded to its longest sequence, paddle.nn.LSTM(sequence_length): paddle.static has no LoD "
               "batch (no dynamic_lstm)")


def reference_paddle(params, feed):
    return paddle_padded_lstm(params, feed)
