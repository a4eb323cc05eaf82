"""lstm_primitive: a StaticRNN LSTM written from primitive ops, as Fluid users write it, one SGD training step
(seq 20, batch 32, hidden 128; the issue's "primitive-op LSTM").

x float32 [seq, batch, 128] -> StaticRNN whose step computes ``fc`` on ``[x_t, h_prev]`` (two ``mul`` s, a
``sum`` and the bias add), ``split`` into the gates i, f, o, g, ``sigmoid`` / ``tanh``, ``elementwise_mul`` /
``elementwise_add`` (``primitive_cell``, also used by ``benchmarks/rnn_profile.py``) -> the mean of all hidden
states. This is the program the elementwise fusion pass (fuse_elementwise_chains) is for: the cell's elementwise
ops and their gradients in the step block and its grad block. The torch reference is one fused ``nn.LSTM`` with
the same weights.
"""
import numpy as np

import fluidlite as fluid

from . import Built
from .lstm import ifgo_to_ifgo_torch, unfused_cell

DESCRIPTION = "StaticRNN LSTM 128 from primitive ops (fc on [x_t, h], split, sigmoid/tanh, mul/add), seq 20, SGD"
DEFAULTS = {"batch_size": 32, "iterations": 50, "warmup": 10, "repeat": 5}
SEQ_LEN = 20
HIDDEN = 128
LEARNING_RATE = 0.01
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def primitive_cell(x_t, h_prev, c_prev):
    """The LSTM cell from primitives: fc on [x_t, h_prev], then split, sigmoid/tanh and elementwise ops. (h, c)."""
    return unfused_cell(L.fc(input=[x_t, h_prev], size=4 * c_prev.shape[-1]), c_prev)


def network(x, hidden=HIDDEN, cell=primitive_cell):
    """x: float32 [seq, batch, in]. Returns the mean of the hidden states. Parameters: fc_0.w_0 [in, 4h] (x_t's),
    fc_0.w_1 [h, 4h] (h_prev's), fc_0.b_0 [4h]."""
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
        c_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
        h, c = cell(x_t, h_prev, c_prev)
        rnn.update_memory(h_prev, h)
        rnn.update_memory(c_prev, c)
        rnn.step_output(h)
    return L.mean(rnn())


def build(batch_size, seed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[SEQ_LEN, batch_size, HIDDEN], dtype="float32", append_batch_size=False)
        loss = network(x)
        fluid.optimizer.SGD(learning_rate=LEARNING_RATE).minimize(loss)
    rng = np.random.RandomState(seed)
    xs = rng.uniform(-1, 1, size=(SEQ_LEN, batch_size, HIDDEN)).astype("float32")
    return Built(main, startup, lambda: {"x": xs}, [loss])


def torch_lstm(wx, wh, b):
    """A torch.nn.LSTM holding fluidlite's W_x [in, 4h], W_h [h, 4h] and bias b [4h] (gates i, f, o, g; torch's order
    is i, f, g, o and it keeps [4h, in] weights with two biases): reordered and transposed, bias_hh zero and frozen
    (fluidlite has one bias), as lstm.torch_network builds it."""
    import torch
    lstm = torch.nn.LSTM(wx.shape[0], wh.shape[0])
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(np.ascontiguousarray(ifgo_to_ifgo_torch(wx).T)))
        lstm.weight_hh_l0.copy_(torch.from_numpy(np.ascontiguousarray(ifgo_to_ifgo_torch(wh).T)))
        lstm.bias_ih_l0.copy_(torch.from_numpy(ifgo_to_ifgo_torch(b)))
        lstm.bias_hh_l0.zero_()
    lstm.bias_hh_l0.requires_grad_(False)
    return lstm


class TorchPrimitiveLSTM:
    """The same step in torch: one fused nn.LSTM over the sequence, the mean of its outputs, optim.SGD."""

    def __init__(self, params, feed, lr=LEARNING_RATE):
        import torch
        self.lstm = torch_lstm(params["fc_0.w_0"], params["fc_0.w_1"], params["fc_0.b_0"])
        self.opt = torch.optim.SGD([p for p in self.lstm.parameters() if p.requires_grad], lr=lr)
        self.x = torch.from_numpy(np.ascontiguousarray(feed["x"]))

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        out, _ = self.lstm(self.x)
        loss = out.mean()
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy().reshape(1)


def reference_torch(params, feed):
    return TorchPrimitiveLSTM(params, feed)


def reference_paddle(params, feed):
    """Paddle 3.3 static: one paddle.nn.LSTM over the sequence (StaticRNN is gone from Paddle 3.x), the same weights."""
    from ..reference import PaddleStatic, paddle_optimizer
    from .lstm import PADDLE_NOTE, paddle_lstm

    def build(pb):
        lstm = paddle_lstm(pb, params["fc_0.w_0"], params["fc_0.w_1"], params["fc_0.b_0"])
        out, _ = lstm(pb.data("x", feed["x"]))
        return pb.paddle.mean(out)
    return PaddleStatic(build, paddle_optimizer("SGD", LEARNING_RATE), note=PADDLE_NOTE)
