"""text_cnn: the book's convolution_net (understand_sentiment) on LoD ids, one Adagrad training step (batch 64).

int64 word ids, one LoDTensor of 64 sequences whose lengths are drawn from 5-100 (seeded) -> embedding 10000 x 128
(is_sparse, as the book: its gradient is the rows of the ids seen) -> two ``nets.sequence_conv_pool`` (128 filters
of 3 and of 4 rows, tanh, sqrt pooling) -> fc 2 over both -> softmax cross-entropy averaged over the batch ->
Adagrad (learning rate 0.002, the book's). No padding anywhere: the convolutions and pools see the 64 sequences'
rows only (about 3,400 of them).

The PyTorch reference pads the batch to its longest sequence and runs ``nn.Conv1d`` over [64, 128, maxlen]: the
padding positions read a zero embedding row (``padding_idx``), which is what sequence_conv's zero padding at a
sequence's end is; the window of 4 (rows t-2 .. t+1, Fluid's padding_start -(4 // 2)) is padded 2 before and 1
after. tanh, then the sum over each sequence's own positions (a mask) divided by sqrt(length), nn.Linear, cross
entropy, ``optim.Adagrad`` (eps 1e-6, Fluid's epsilon) with a sparse embedding gradient.
"""
import numpy as np

import fluidlite as fluid

from . import Built, padded_ids, text_batch

DESCRIPTION = ("text CNN on LoD ids: embedding 10000x128, sequence_conv_pool 3 and 4 (128, tanh, sqrt), fc 2, "
               "Adagrad")
DEFAULTS = {"batch_size": 64, "iterations": 30, "warmup": 5, "repeat": 5}
VOCAB = 10000
EMB_DIM = 128
HID_DIM = 128
FILTER_SIZES = (3, 4)
NUM_CLASSES = 2
MIN_LEN, MAX_LEN = 5, 100
LEARNING_RATE = 0.002
EPSILON = 1e-6  # fluid.optimizer.Adagrad's default
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def network(words, label, vocab=VOCAB, emb_dim=EMB_DIM, hid_dim=HID_DIM, filter_sizes=FILTER_SIZES):
    """words: int64 [T, 1] with one LoD level; label: int64 [batch, 1]. Returns (logits, mean loss).

    Parameters: embedding_0.w_0 [vocab, emb_dim]; sequence_conv_i.w_0 [filter_sizes[i] * emb_dim, hid_dim] and
    sequence_conv_i.b_0 [hid_dim]; fc_0.w_i [hid_dim, NUM_CLASSES] (one per pooled input) and fc_0.b_0."""
    emb = L.embedding(input=words, size=[vocab, emb_dim], is_sparse=True)
    pooled = [fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=k, act="tanh",
                                            pool_type="sqrt") for k in filter_sizes]
    logits = L.fc(input=pooled, size=NUM_CLASSES)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = L.data(name="words", shape=[1], dtype="int64", lod_level=1)
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = network(words, label)
        fluid.optimizer.Adagrad(learning_rate=LEARNING_RATE, epsilon=EPSILON).minimize(loss)
    ids, lens, labels = text_batch(batch_size, seed, VOCAB, NUM_CLASSES, MIN_LEN, MAX_LEN)
    words_t = fluid.create_lod_tensor(ids, [lens], fluid.CPUPlace())  # built once: every step feeds the same batch
    return Built(main, startup, lambda: {"words": words_t, "label": labels}, [loss])


class TorchTextCNN:
    """Padded batch -> nn.Embedding (sparse, a zero padding row) -> per filter size: F.pad, nn.Conv1d, tanh, masked
    sum / sqrt(length) -> concat -> nn.Linear -> CrossEntropyLoss; optim.Adagrad."""

    def __init__(self, params, feed, lr=LEARNING_RATE):
        import torch
        from ..reference import _torch_copy
        ids, (lens,) = feed["words"]
        table = params["embedding_0.w_0"]
        vocab, emb_dim = table.shape
        self.emb = torch.nn.Embedding(vocab + 1, emb_dim, padding_idx=vocab, sparse=True)
        _torch_copy(self.emb.weight, np.concatenate([table, np.zeros((1, emb_dim), table.dtype)]))
        self.convs, self.pads = torch.nn.ModuleList(), []
        for i, k in enumerate(FILTER_SIZES):
            w = params["sequence_conv_%d.w_0" % i]  # [k * emb, hid]: row j * emb + c weighs channel c of row j
            conv = torch.nn.Conv1d(emb_dim, w.shape[1], k)
            _torch_copy(conv.weight, w.reshape(k, emb_dim, -1).transpose(2, 1, 0))  # [hid, emb, k]
            _torch_copy(conv.bias, params["sequence_conv_%d.b_0" % i])
            self.convs.append(conv)
            self.pads.append((k // 2, k - 1 - k // 2))  # rows t - k // 2 .. t + k - 1 - k // 2
        w = np.concatenate([params["fc_0.w_%d" % i] for i in range(len(FILTER_SIZES))])
        self.fc = torch.nn.Linear(w.shape[0], w.shape[1])
        _torch_copy(self.fc.weight, w.T)
        _torch_copy(self.fc.bias, params["fc_0.b_0"])
        mods = torch.nn.ModuleList([self.emb, self.convs, self.fc])
        self.opt = torch.optim.Adagrad(mods.parameters(), lr=lr, eps=EPSILON)
        # torch's default (no invariant checks on the sparse gradient), said explicitly: else each step warns
        torch.sparse.check_sparse_tensor_invariants.disable()
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.words = torch.from_numpy(padded_ids(ids, lens, pad_id=vocab))
        lens_t = torch.tensor(lens)
        self.mask = (torch.arange(max(lens))[None, :] < lens_t[:, None]).to(torch.float32)[:, None, :]
        self.inv_sqrt_len = (1.0 / torch.sqrt(lens_t.to(torch.float32)))[:, None]
        self.y = torch.from_numpy(np.ascontiguousarray(feed["label"].reshape(-1)))

    def forward(self):
        import torch
        import torch.nn.functional as F
        x = self.emb(self.words).transpose(1, 2)  # [batch, emb, maxlen]
        pooled = [(torch.tanh(conv(F.pad(x, pad))) * self.mask).sum(2) * self.inv_sqrt_len
                  for conv, pad in zip(self.convs, self.pads)]
        return self.fc(torch.cat(pooled, 1))

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy()


def reference_torch(params, feed):
    return TorchTextCNN(params, feed)


def paddle_text_cnn(params, feed, lr=LEARNING_RATE):
    """paddle.static has no LoD batch any more (sequence_conv / sequence_pool are gone from its PIR programs): the
    closest equivalent is the torch reference's padded form, written with paddle.nn in static mode: the batch padded
    to its longest sequence, paddle.nn.Embedding(sparse=True) with a zero padding row, per filter size F.pad +
    F.conv1d + tanh + the sum over each sequence's own positions (a mask) / sqrt(length), concat, Linear, softmax
    cross-entropy, paddle.optimizer.Adagrad (Fluid's epsilon). It convolves max length x N positions, not the
    batch's real rows."""
    import numpy as np

    from ..reference import PaddleStatic, paddle_optimizer, paddle_softmax_ce
    ids, (lens,) = feed["words"]
    table = params["embedding_0.w_0"]
    vocab, emb_dim = table.shape
    steps = max(lens)
    mask = (np.arange(steps)[None, :] < np.asarray(lens)[:, None]).astype(np.float32)[:, None, :]  # [N, 1, T]
    inv_sqrt_len = (1.0 / np.sqrt(np.asarray(lens, dtype=np.float32)))[:, None]

    def build(pb):
        paddle = pb.paddle
        F = paddle.nn.functional
        words = pb.data("words", padded_ids(ids, lens, pad_id=vocab))  # [N, T]
        label = pb.data("label", feed["label"])
        m, scale = pb.data("mask", mask), pb.data("inv_sqrt_len", inv_sqrt_len)
        emb = paddle.nn.Embedding(vocab + 1, emb_dim, padding_idx=vocab, sparse=True)
        pb.assign(emb.weight, np.concatenate([table, np.zeros((1, emb_dim), table.dtype)]))
        x = paddle.transpose(emb(words), [0, 2, 1])  # [N, emb, T]
        pooled = []
        for i, k in enumerate(FILTER_SIZES):
            w = params["sequence_conv_%d.w_0" % i]  # [k * emb, hid]
            weight = pb.param("sequence_conv_%d.w_0" % i, w.reshape(k, emb_dim, -1).transpose(2, 1, 0))  # [hid, emb, k]
            bias = pb.param("sequence_conv_%d.b_0" % i, params["sequence_conv_%d.b_0" % i])
            h = F.conv1d(F.pad(x, [k // 2, k - 1 - k // 2], data_format="NCL"), weight, bias)
            pooled.append(paddle.sum(paddle.tanh(h) * m, axis=2) * scale)
        w = np.concatenate([params["fc_0.w_%d" % i] for i in range(len(FILTER_SIZES))])
        logits = paddle.matmul(paddle.concat(pooled, axis=1), pb.param("fc_0.w", w)) + pb.param("fc_0.b_0",
                                                                                              params["fc_0.b_0"])
        return paddle_softmax_ce(pb, logits, label)
    return PaddleStatic(build, paddle_optimizer("Adagrad", lr, epsilon=EPSILON), note=PADDLE_NOTE)


PADDLE_NOTE = ("the batch padded to its longest sequence, conv1d + a mask: paddle.static has no LoD batch (no "
               "sequence_conv / sequence_pool)")


def reference_paddle(params, feed):
    return paddle_text_cnn(params, feed)
