"""lstm: issue 5's text classifier, one SGD training step (seq 20, batch 32, vocab 10000, 128 -> 128).

int64 word ids [seq, batch, 1] -> embedding 128 -> StaticRNN LSTM (hidden 128) -> last step -> fc 10 ->
softmax cross-entropy averaged over the batch.

The LSTM is written the way cuDNN and torch.nn.LSTM compute it: the input projection of all time steps is
one fc outside the loop ([seq * batch, 128] x [128, 4 * 128] + bias, fc_0), and each step adds the
recurrent product h_prev x W_h (fc_1, no bias) and applies the fused ``lstm_unit`` op (gates in the order
i, f, o, g; forget_bias 0). ``CELL = "concat"`` builds Fluid's ``layers.lstm_unit`` instead (concat of x_t
and h_prev, one fc per step), ``CELL = "unfused"`` splits the gates and uses sigmoid/tanh and
elementwise ops; all three compute the same function of the same weights.
"""
import numpy as np

import fluidlite as fluid

from . import Built

DESCRIPTION = "LSTM text classifier: embedding 10000x128, StaticRNN LSTM 128 (seq 20), last step, fc 10, SGD"
DEFAULTS = {"batch_size": 32, "iterations": 50, "warmup": 10, "repeat": 5}
SEQ_LEN = 20
VOCAB = 10000
EMB_DIM = 128
HIDDEN = 128
NUM_CLASSES = 10
LEARNING_RATE = 0.01
CELL = "hoisted"  # "hoisted" (default, fastest), "concat" (layers.lstm_unit), "unfused"
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def lstm_unit_cell(gates, c_prev):
    """The fused cell on gate pre-activations [N, 4 * D] (i, f, o, g): (h, c). Also used by
    benchmarks/lstm_cell.py."""
    helper = fluid.layer_helper.LayerHelper("lstm_unit")
    c = helper.create_variable_for_type_inference(gates.dtype)
    h = helper.create_variable_for_type_inference(gates.dtype)
    helper.append_op(type="lstm_unit", inputs={"X": [gates], "C_prev": [c_prev]}, outputs={"C": [c], "H": [h]},
                     attrs={"forget_bias": 0.0})
    return h, c


def unfused_cell(gates, c_prev):
    """The same cell from split, sigmoid/tanh and elementwise ops: (h, c). Also used by
    benchmarks/lstm_cell.py and benchmarks/rnn_profile.py."""
    i, f, o, g = L.split(gates, 4, dim=1)
    i, f, o, g = L.sigmoid(i), L.sigmoid(f), L.sigmoid(o), L.tanh(g)
    c = L.elementwise_add(L.elementwise_mul(f, c_prev), L.elementwise_mul(i, g))
    return L.elementwise_mul(o, L.tanh(c)), c


def network(words, label, seq_len=SEQ_LEN, vocab=VOCAB, emb_dim=EMB_DIM, hidden=HIDDEN,
            num_classes=NUM_CLASSES, cell=CELL):
    """words: int64 [seq_len, batch, 1]; label: int64 [batch, 1]. Returns (logits, mean loss).

    Parameters (in creation order): embedding_0.w_0 [vocab, emb_dim]; "hoisted" and "unfused":
    fc_0.w_0 [emb_dim, 4h] + fc_0.b_0 (input projection), fc_1.w_0 [h, 4h] (recurrent); "concat":
    fc_0.w_0 [emb_dim + h, 4h] + fc_0.b_0; then the classifier fc_N.w_0 [h, num_classes] + fc_N.b_0."""
    if cell not in ("hoisted", "concat", "unfused"):
        raise ValueError("lstm: unknown cell %r" % (cell,))
    emb = L.embedding(input=words, size=[vocab, emb_dim])  # [seq, batch, emb_dim]
    if cell != "concat":
        emb = L.fc(input=emb, size=4 * hidden, num_flatten_dims=2)  # x_t W_x + b for every step at once
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(emb)
        h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
        c_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
        if cell == "concat":
            h, c = L.lstm_unit(x_t, h_prev, c_prev)
        else:
            gates = L.elementwise_add(x_t, L.fc(input=h_prev, size=4 * hidden, bias_attr=False))
            h, c = (lstm_unit_cell if cell == "hoisted" else unfused_cell)(gates, c_prev)
        rnn.update_memory(h_prev, h)
        rnn.update_memory(c_prev, c)
        rnn.step_output(h)
    out = rnn()  # [seq, batch, hidden]
    last = L.reshape(L.slice(out, axes=[0], starts=[seq_len - 1], ends=[seq_len]), [-1, hidden])
    logits = L.fc(input=last, size=num_classes)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed, cell=CELL):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = L.data(name="words", shape=[SEQ_LEN, -1, 1], dtype="int64", append_batch_size=False)
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = network(words, label, cell=cell)
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(SEQ_LEN, batch_size, 1)).astype("int64")
    labels = rng.randint(0, NUM_CLASSES, size=(batch_size, 1)).astype("int64")
    return Built(main, startup, lambda: {"words": ids, "label": labels}, [loss])


def lstm_weights(params, cell=CELL):
    """(W_x [emb, 4h], W_h [h, 4h], b [4h], classifier prefix) from fluidlite's parameters, gates i, f, o, g."""
    if cell == "concat":
        w, b = params["fc_0.w_0"], params["fc_0.b_0"]
        hidden = w.shape[1] // 4
        return w[:-hidden], w[-hidden:], b, "fc_1"
    return params["fc_0.w_0"], params["fc_1.w_0"], params["fc_0.b_0"], "fc_2"


def ifgo_to_ifgo_torch(m):
    """[..., 4h] columns in lstm_unit's gate order i, f, o, g -> torch's and paddle's nn.LSTM order i, f, g, o."""
    i, f, o, g = np.split(m, 4, axis=-1)
    return np.ascontiguousarray(np.concatenate([i, f, g, o], axis=-1))


def torch_network(params, cell=CELL):
    """(embedding, nn.LSTM, nn.Linear) holding fluidlite's weights. torch's gate order is i, f, g, o
    (fluidlite's lstm_unit: i, f, o, g) and it keeps [4h, in] weights with two biases: the blocks are
    reordered and transposed, and bias_hh is zero and frozen."""
    import torch
    from ..reference import torch_linear
    wx, wh, b, head = lstm_weights(params, cell)
    hidden = wh.shape[0]
    torch_order = ifgo_to_ifgo_torch

    emb_w = params["embedding_0.w_0"]
    emb = torch.nn.Embedding(emb_w.shape[0], emb_w.shape[1])
    lstm = torch.nn.LSTM(wx.shape[0], hidden)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(emb_w))
        lstm.weight_ih_l0.copy_(torch.from_numpy(np.ascontiguousarray(torch_order(wx).T)))
        lstm.weight_hh_l0.copy_(torch.from_numpy(np.ascontiguousarray(torch_order(wh).T)))
        lstm.bias_ih_l0.copy_(torch.from_numpy(torch_order(b)))
        lstm.bias_hh_l0.zero_()
    lstm.bias_hh_l0.requires_grad_(False)  # fluidlite has one bias: a trained second one doubles its step
    return emb, lstm, torch_linear(params, head)


class TorchLSTMClassifier:
    """embedding -> fused nn.LSTM -> last step -> Linear -> CrossEntropyLoss, optim.SGD."""

    def __init__(self, params, feed, lr=LEARNING_RATE, cell=CELL):
        import torch
        self.emb, self.lstm, self.fc = torch_network(params, cell)
        mods = torch.nn.ModuleList([self.emb, self.lstm, self.fc])
        self.opt = torch.optim.SGD(mods.parameters(), lr=lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.words = torch.from_numpy(np.ascontiguousarray(feed["words"][:, :, 0]))
        self.y = torch.from_numpy(np.ascontiguousarray(feed["label"].reshape(-1)))

    def forward(self):
        out, _ = self.lstm(self.emb(self.words))
        return self.fc(out[-1])

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy()


def reference_torch(params, feed):
    return TorchLSTMClassifier(params, feed)


def paddle_lstm(pb, wx, wh, b):
    """A time-major paddle.nn.LSTM (in static mode one fused ``rnn`` op, paddle's counterpart of cuDNN's and torch's
    fused LSTM; paddle.static has no StaticRNN any more) holding lstm_unit-order weights W_x [in, 4h], W_h [h, 4h]
    and the bias b [4h]: gate blocks reordered and transposed, bias_hh zero and not trained (fluidlite has one
    bias; it is kept, so that nn.LSTM is still the fused op). Also the building block of ``lstm_primitive``'s
    reference_paddle (the same function of the same weights, written from primitives in fluidlite)."""
    paddle = pb.paddle
    hidden = wh.shape[0]
    lstm = paddle.nn.LSTM(wx.shape[0], hidden, time_major=True, bias_hh_attr=paddle.ParamAttr(trainable=False))
    pb.assign(lstm.weight_ih_l0, ifgo_to_ifgo_torch(wx).T)
    pb.assign(lstm.weight_hh_l0, ifgo_to_ifgo_torch(wh).T)
    pb.assign(lstm.bias_ih_l0, ifgo_to_ifgo_torch(np.asarray(b).reshape(-1)))
    pb.assign(lstm.bias_hh_l0, np.zeros(4 * hidden, np.float32))
    return lstm


def paddle_lstm_classifier(params, feed, lr=LEARNING_RATE, cell=CELL, seq_len=SEQ_LEN):
    """paddle.static: embedding -> paddle_lstm -> last step -> Linear -> softmax cross-entropy, SGD; the same
    weights as torch_network."""
    from ..reference import PaddleStatic, paddle_linear, paddle_softmax_ce, paddle_optimizer
    wx, wh, b, head = lstm_weights(params, cell)

    def build(pb):
        paddle = pb.paddle
        words = pb.data("words", np.asarray(feed["words"])[:, :, 0])  # [seq, batch]
        label = pb.data("label", feed["label"])
        emb_w = params["embedding_0.w_0"]
        emb = pb.assign(paddle.nn.Embedding(emb_w.shape[0], emb_w.shape[1]).weight, emb_w)
        out, _ = paddle_lstm(pb, wx, wh, b)(paddle.nn.functional.embedding(words, emb))
        return paddle_softmax_ce(pb, paddle_linear(pb, params, head)(out[seq_len - 1]), label)
    return PaddleStatic(build, paddle_optimizer("SGD", lr), note=PADDLE_NOTE)


PADDLE_NOTE = ("paddle.nn.LSTM (one fused rnn op) in place of the StaticRNN + lstm_unit step: paddle.static has no "
               "StaticRNN")


def reference_paddle(params, feed):
    return paddle_lstm_classifier(params, feed)
