"""ctr_dnn: a CTR DNN with a large sparse embedding, one Adam (lazy_mode) training step (batch 256).

int64 slot ids [batch, 26, 1] -> embedding 1,000,000 x 16 (is_sparse=True: its gradient is SelectedRows, the
rows of the ids seen) -> concat of the 26 slot vectors [batch, 416] -> fc 400 relu x 3 -> fc 2 -> softmax
cross-entropy averaged over the batch. Adam with lazy_mode updates only the table rows the batch touched, so
a step costs the same whatever the table size; ``IS_SPARSE = False`` builds the dense-gradient variant
(benchmarks/sparse_embedding.py times both).

The torch reference is nn.Embedding(sparse=True) with SparseAdam for the table and Adam for the dense layers
(``OPTIMIZER = "sgd"``: SGD for both, in fluidlite and torch).
"""
import numpy as np

import fluidlite as fluid

from . import Built

DESCRIPTION = "CTR DNN: sparse embedding 1Mx16 over 26 slots, concat, fc 400x3 relu, fc 2, Adam(lazy_mode)"
DEFAULTS = {"batch_size": 256, "iterations": 20, "warmup": 3, "repeat": 5}
VOCAB = 1000000
EMB_DIM = 16
SLOTS = 26
HIDDEN = (400, 400, 400)
NUM_CLASSES = 2
LEARNING_RATE = 0.001
IS_SPARSE = True
OPTIMIZER = "adam"  # "adam" (lazy_mode; torch: SparseAdam + Adam) or "sgd" (torch: SGD on the sparse gradient)
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def network(ids, label, vocab=VOCAB, is_sparse=IS_SPARSE, hidden=HIDDEN):
    """ids: int64 [batch, SLOTS, 1]; label: int64 [batch, 1]. Returns (logits, mean loss).

    Parameters: embedding_0.w_0 [vocab, EMB_DIM], fc_0..fc_2 (HIDDEN, relu), fc_3 [400, 2]."""
    emb = L.embedding(input=ids, size=[vocab, EMB_DIM], is_sparse=is_sparse)  # [batch, SLOTS, EMB_DIM]
    h = L.reshape(emb, [-1, SLOTS * EMB_DIM])
    for size in hidden:
        h = L.fc(input=h, size=size, act="relu")
    logits = L.fc(input=h, size=NUM_CLASSES)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed, vocab=VOCAB, is_sparse=IS_SPARSE, lazy_mode=True, optimizer=None, hidden=HIDDEN):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = L.data(name="ids", shape=[SLOTS, 1], dtype="int64")
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = network(ids, label, vocab=vocab, is_sparse=is_sparse, hidden=hidden)
        if (optimizer or OPTIMIZER) == "sgd":
            fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
        else:
            fluid.optimizer.Adam(learning_rate=LEARNING_RATE, lazy_mode=lazy_mode).minimize(loss)
    rng = np.random.RandomState(seed)
    feed_ids = rng.randint(0, vocab, size=(batch_size, SLOTS, 1)).astype("int64")
    labels = rng.randint(0, NUM_CLASSES, size=(batch_size, 1)).astype("int64")
    return Built(main, startup, lambda: {"ids": feed_ids, "label": labels}, [loss])


class TorchCTR:
    """nn.Embedding(sparse=True) + SparseAdam for the table, nn.Linear layers + Adam, CrossEntropyLoss."""

    def __init__(self, params, feed, lr=LEARNING_RATE):
        import torch
        from ..reference import torch_linear
        w = params["embedding_0.w_0"]
        self.emb = torch.nn.Embedding(w.shape[0], w.shape[1], sparse=True)
        with torch.no_grad():
            self.emb.weight.copy_(torch.from_numpy(w))
        self.fcs = torch.nn.ModuleList([torch_linear(params, "fc_%d" % i) for i in range(len(HIDDEN) + 1)])
        if OPTIMIZER == "sgd":
            self.opt_sparse = torch.optim.SGD(list(self.emb.parameters()), lr=lr)
            self.opt_dense = torch.optim.SGD(self.fcs.parameters(), lr=lr)
        else:
            self.opt_sparse = torch.optim.SparseAdam(list(self.emb.parameters()), lr=lr)
            self.opt_dense = torch.optim.Adam(self.fcs.parameters(), lr=lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.ids = torch.from_numpy(np.ascontiguousarray(feed["ids"][:, :, 0]))
        self.y = torch.from_numpy(np.ascontiguousarray(feed["label"].reshape(-1)))

    def step(self):
        import torch
        self.opt_sparse.zero_grad(set_to_none=True)
        self.opt_dense.zero_grad(set_to_none=True)
        h = self.emb(self.ids).reshape(self.ids.shape[0], -1)
        for fc in self.fcs[:-1]:
            h = torch.relu(fc(h))
        loss = self.loss_fn(self.fcs[-1](h), self.y)
        loss.backward()
        self.opt_sparse.step()
        self.opt_dense.step()
        return loss.detach().cpu().numpy()


def reference_torch(params, feed):
    return TorchCTR(params, feed)


def paddle_ctr(params, feed, lr=LEARNING_RATE):
    """paddle.static: paddle.nn.Embedding(sparse=IS_SPARSE: a SelectedRows gradient, as Fluid's is_sparse) ->
    reshape -> Linear + relu x3 -> Linear -> softmax cross-entropy; Adam(lazy_mode=True) (or SGD) for everything,
    as fluidlite's program."""
    from ..reference import PaddleStatic, paddle_linear, paddle_optimizer, paddle_softmax_ce

    def build(pb):
        paddle = pb.paddle
        ids = pb.data("ids", np.asarray(feed["ids"])[:, :, 0])  # [batch, SLOTS]
        label = pb.data("label", feed["label"])
        w = params["embedding_0.w_0"]
        emb = paddle.nn.Embedding(w.shape[0], w.shape[1], sparse=IS_SPARSE)
        pb.assign(emb.weight, w)
        h = paddle.reshape(emb(ids), [-1, SLOTS * EMB_DIM])
        for i in range(len(HIDDEN)):
            h = paddle.nn.functional.relu(paddle_linear(pb, params, "fc_%d" % i)(h))
        return paddle_softmax_ce(pb, paddle_linear(pb, params, "fc_%d" % len(HIDDEN))(h), label)
    opt = paddle_optimizer("SGD", lr) if OPTIMIZER == "sgd" else paddle_optimizer("Adam", lr, lazy_mode=True)
    return PaddleStatic(build, opt)


def reference_paddle(params, feed):
    return paddle_ctr(params, feed)
