"""seq2seq: a GRU encoder-decoder with additive attention, one Adam training step with teacher forcing.

The model of the Fluid book's machine_translation chapter (08.machine_translation/seq2seq.py), built the way it
builds it (layers.rnn over GRU cells for the encoder, layers.rnn over a DecoderCell for the decoder), at bench
sizes: batch 32, source and target padded to 30 steps (lengths drawn from [MIN_LEN, 30] with the run's seed),
hidden and word size 256, vocabularies of 10000.

    encoder  embedding 10000 x 256 -> bidirectional GRU 256: layers.rnn(sequence_length=src_len) forward and
             is_reverse (a state stays put past its sequence's end)     -> enc_out [30, B, 512], final states
    bridge   h0 = tanh(fc(concat(final fwd, final bwd), 256))
    decoder  layers.rnn over DecoderCell; per target step t (teacher forcing: the input is the previous gold word):
             q = fc(h, 256, no bias); energy = tanh(fc(enc_out, 256, no bias) + q)             [30, B, 256]
             scores = fc(energy, 1, no bias) + (src_mask - 1) * 1e9; a = softmax over the source steps
             context = sum_s a[s] * enc_out[s]                                                   [B, 512]
             h = GRU(concat(embedding(trg[t]), context), h)
    loss     softmax cross-entropy of fc(h, 10000) against label[t], summed over the real target steps
             (the target mask) and divided by their number.

Everything is time-major ([steps, batch, ...], layers.rnn's time_major=True, so no transposes): the feeds are
src, trg and label [30, B, 1] int64 (padded with EOS) and src_len, trg_len [B] int64; the masks come from
sequence_mask in the graph, as in the book.

The GRU cell (``CELL``):

- ``"reset_after"`` (default): PyTorch's nn.GRU / nn.GRUCell (and cuDNN's) cell, an RNNCell written with Fluid
  layers: the input projection x W_ih + b_ih (of all steps at once where the input is known before the loop: the
  encoder's embeddings and the decoder's target embeddings), the recurrent one h W_hh + b_hh in one fc per step,
  r, z = sigmoid(.), n = tanh(x_n + r * h_n), h' = n + z * (h - n). The torch reference is then exactly nn.GRU
  (bidirectional, on a PackedSequence) and a Python loop over nn.GRUCell, and the first-step loss is checked.
- ``"basic"``: Fluid's layers.GRUCell (BasicGRUUnit), as the book uses it: gates = sigmoid(concat(x, h) W_g + b_g),
  r, u = split(gates); c = tanh(concat(x, r * h) W_c + b_c); h' = u * h + (1 - u) * c. The reset gate applies
  BEFORE the candidate's matrix product, which nn.GRU cannot express, so its torch reference writes the same cell
  from nn.Linear over the concatenations (a Python loop in the encoder too).

Deviation from the book: its attention scores are fc(enc_proj + q) with no tanh; softmax is shift-invariant, so
those scores do not depend on the decoder state at all. This model uses Bahdanau's tanh (energy above).
The book's optimizer (Adam with noam decay, global-norm clipping and L2 decay) is plain Adam here.
"""
import numpy as np

import fluidlite as fluid

from . import Built

DESCRIPTION = ("GRU seq2seq with additive attention: bidirectional GRU 256 encoder, GRU 256 decoder (teacher "
               "forcing), seq 30, vocab 10000, masked softmax cross-entropy, Adam")
DEFAULTS = {"batch_size": 32, "iterations": 10, "warmup": 3, "repeat": 5}
SEQ_LEN = 30
MIN_LEN = 10
SRC_VOCAB = TRG_VOCAB = 10000
EMB_DIM = 256
HIDDEN = 256
BOS_ID, EOS_ID = 0, 1
LEARNING_RATE = 1e-3
PAD_SCORE = 1e9  # subtracted from the attention scores of padded source steps
CELL = "reset_after"  # "reset_after" (nn.GRU's cell) or "basic" (Fluid's BasicGRUUnit)
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def _p(name):
    return fluid.ParamAttr(name=name)


def reset_after_cell(x_proj, h_prev, prefix, hidden=HIDDEN):
    """nn.GRU's cell on x_proj = x W_ih + b_ih [B, 3h] (gates r, z, n): h W_hh + b_hh is `prefix`_hh_w/_hh_b."""
    h_proj = L.fc(input=h_prev, size=3 * hidden, param_attr=_p(prefix + "_hh_w"), bias_attr=_p(prefix + "_hh_b"))
    x_rz, x_n = L.split(x_proj, [2 * hidden, hidden], dim=1)
    h_rz, h_n = L.split(h_proj, [2 * hidden, hidden], dim=1)
    r, z = L.split(L.sigmoid(L.elementwise_add(x_rz, h_rz)), 2, dim=1)
    n = L.tanh(L.elementwise_add(x_n, L.elementwise_mul(r, h_n)))
    return L.elementwise_add(n, L.elementwise_mul(z, L.elementwise_sub(h_prev, n)))  # (1 - z) * n + z * h


class ResetAfterGRUCell(L.RNNCell):
    """nn.GRU's cell as an RNNCell: `inputs` is the input projection x W_ih + b_ih [B, 3h] (made for every step at
    once before the loop), the recurrent projection is `prefix`_hh_w / _hh_b."""

    def __init__(self, hidden, prefix):
        self.hidden, self.prefix = hidden, prefix

    def call(self, inputs, states):
        h = reset_after_cell(inputs, states, self.prefix, self.hidden)
        return h, h

    @property
    def state_shape(self):
        return [self.hidden]


def gru_cell(cell, prefix, hidden):
    """The GRU cell of one RNN: the reset-after cell, or Fluid's layers.GRUCell (BasicGRUUnit; its parameters
    `prefix`_w_gate, _w_candidate, `prefix`_b_gate, _b_candidate)."""
    if cell == "reset_after":
        return ResetAfterGRUCell(hidden, prefix)
    return L.GRUCell(hidden, param_attr=_p(prefix + "_w"), bias_attr=_p(prefix + "_b"))


def time_major_mask(lengths, steps):
    """[steps, B, 1] float32: 1 at the real steps of each sequence, 0 at its padding."""
    mask = L.sequence_mask(lengths, maxlen=steps, dtype="float32")  # [B, steps]
    return L.unsqueeze(L.transpose(mask, [1, 0]), [2])


def attention(h_prev, enc_out, enc_proj, pad_bias, hidden=HIDDEN):
    """Additive attention: the context [B, 2h] for decoder state h_prev over enc_out [S, B, 2h]."""
    q = L.fc(input=h_prev, size=hidden, bias_attr=False, param_attr=_p("att_q_w"))
    energy = L.tanh(L.elementwise_add(enc_proj, q, axis=1))  # q [B, h] added at every source step
    scores = L.fc(input=energy, size=1, num_flatten_dims=2, bias_attr=False, param_attr=_p("att_v_w"))
    weights = L.softmax(L.elementwise_add(scores, pad_bias), axis=0)  # [S, B, 1], over the source steps
    return L.reduce_sum(L.elementwise_mul(enc_out, weights), dim=0)


class DecoderCell(L.RNNCell):
    """The book's DecoderCell: additive attention over the encoder outputs, then the GRU on [word, context]. With
    the reset-after cell the word's share of the input projection was made before the loop (`step_input` is it),
    the context's is dec_ctx_w."""

    def __init__(self, cell, hidden):
        self.cell, self.hidden = cell, hidden
        self.gru = gru_cell(cell, "dec", hidden)

    def call(self, step_input, states, enc_out, enc_proj, pad_bias):
        context = attention(states, enc_out, enc_proj, pad_bias, self.hidden)
        if self.cell == "reset_after":
            x = L.elementwise_add(step_input, L.fc(input=context, size=3 * self.hidden, bias_attr=False,
                                                   param_attr=_p("dec_ctx_w")))
        else:
            x = L.concat([step_input, context], axis=1)
        return self.gru(x, states)

    @property
    def state_shape(self):
        return [self.hidden]


def input_projection(x, cell, prefix, hidden):
    """The reset-after cell's x W_ih + b_ih ([S, B, 3h], `prefix`_ih_w / _ih_b) of every step at once; x itself
    for GRUCell, which projects concat(x, h) per step."""
    if cell != "reset_after":
        return x
    return L.fc(input=x, size=3 * hidden, num_flatten_dims=2, param_attr=_p(prefix + "_ih_w"),
                bias_attr=_p(prefix + "_ih_b"))


def network(src, src_len, trg, label, trg_len, cell=None, src_vocab=SRC_VOCAB, trg_vocab=TRG_VOCAB,
            emb_dim=EMB_DIM, hidden=HIDDEN):
    """src, trg, label: int64 [S, B, 1] (time-major, padded); src_len, trg_len: int64 [B]. Returns (logits
    [S, B, trg_vocab], loss).

    Parameters: src_emb_table, trg_emb_table [vocab, emb]; per encoder direction d in (enc_fwd, enc_bwd) and for
    the decoder (dec) the cell's weights (reset_after: d_ih_w [in, 3h], d_ih_b, d_hh_w [h, 3h], d_hh_b; the
    decoder's input projection is dec_ih_w [emb, 3h] + dec_ih_b for the word and dec_ctx_w [2h, 3h] for the
    context. basic: GRUCell's d_w_gate [in + h, 2h], d_b_gate, d_w_candidate [in + h, h], d_b_candidate);
    dec_init_w [2h, h] + dec_init_b; enc_proj_w [2h, h], att_q_w [h, h], att_v_w [h, 1]; output_w [h, trg_vocab]
    + output_b."""
    cell = CELL if cell is None else cell
    if cell not in ("reset_after", "basic"):
        raise ValueError("seq2seq: unknown cell %r (choose 'reset_after' or 'basic')" % (cell,))
    src_emb = L.embedding(input=src, size=[src_vocab, emb_dim], param_attr=_p("src_emb_table"))  # [S, B, E]
    fwd, fwd_state = L.rnn(gru_cell(cell, "enc_fwd", hidden), input_projection(src_emb, cell, "enc_fwd", hidden),
                           sequence_length=src_len, time_major=True)
    bwd, bwd_state = L.rnn(gru_cell(cell, "enc_bwd", hidden), input_projection(src_emb, cell, "enc_bwd", hidden),
                           sequence_length=src_len, time_major=True, is_reverse=True)
    enc_out = L.concat([fwd, bwd], axis=2)  # [S, B, 2h]
    h0 = L.fc(input=L.concat([fwd_state, bwd_state], axis=1), size=hidden, act="tanh", param_attr=_p("dec_init_w"),
              bias_attr=_p("dec_init_b"))
    enc_proj = L.fc(input=enc_out, size=hidden, num_flatten_dims=2, bias_attr=False, param_attr=_p("enc_proj_w"))
    pad_bias = L.scale(time_major_mask(src_len, src.shape[0]), scale=PAD_SCORE, bias=-1.0,
                       bias_after_scale=False)  # (mask - 1) * 1e9

    trg_emb = L.embedding(input=trg, size=[trg_vocab, emb_dim], param_attr=_p("trg_emb_table"))
    dec_out, _ = L.rnn(DecoderCell(cell, hidden), input_projection(trg_emb, cell, "dec", hidden), initial_states=h0,
                       time_major=True, enc_out=enc_out, enc_proj=enc_proj, pad_bias=pad_bias)  # [S, B, h]
    logits = L.fc(input=dec_out, size=trg_vocab, num_flatten_dims=2, param_attr=_p("output_w"),
                  bias_attr=_p("output_b"))
    trg_mask = time_major_mask(trg_len, trg.shape[0])
    ce = L.softmax_with_cross_entropy(logits, label)  # [S, B, 1]
    loss = L.elementwise_div(L.reduce_sum(L.elementwise_mul(ce, trg_mask)), L.reduce_sum(trg_mask))
    return logits, loss


def sample_batch(batch_size, seed, steps=SEQ_LEN, min_len=MIN_LEN, src_vocab=SRC_VOCAB, trg_vocab=TRG_VOCAB):
    """The run's fixed batch, time-major: src, trg, label [steps, B, 1] int64 and src_len, trg_len [B] int64.
    Each target sentence y (trg_len words, the last one EOS) gives trg = [BOS] + y[:-1] and label = y; every
    sequence is padded with EOS to `steps`."""
    rng = np.random.RandomState(seed)
    src_len = rng.randint(min_len, steps + 1, size=batch_size).astype("int64")
    trg_len = rng.randint(min_len, steps + 1, size=batch_size).astype("int64")
    src = np.full((steps, batch_size), EOS_ID, dtype="int64")
    label = np.full((steps, batch_size), EOS_ID, dtype="int64")
    trg = np.full((steps, batch_size), EOS_ID, dtype="int64")
    for b in range(batch_size):
        n, m = src_len[b], trg_len[b]
        src[:n, b] = rng.randint(2, src_vocab, size=n)
        y = np.append(rng.randint(2, trg_vocab, size=m - 1), EOS_ID)
        label[:m, b] = y
        trg[0, b], trg[1:m, b] = BOS_ID, y[:-1]
    return {"src": src[:, :, None], "src_len": src_len, "trg": trg[:, :, None], "label": label[:, :, None],
            "trg_len": trg_len}


def build(batch_size, seed, cell=None, steps=SEQ_LEN, min_len=MIN_LEN, vocab=SRC_VOCAB, emb_dim=EMB_DIM,
          hidden=HIDDEN, lr=LEARNING_RATE):
    """One Adam step on the fixed batch; `cell` None is the module's CELL (read now, so the bench can be switched
    to the other cell by setting CELL). The sizes can be made smaller for tests; both vocabularies are `vocab`."""
    cell = CELL if cell is None else cell
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def ids(name):
            return L.data(name=name, shape=[steps, -1, 1], dtype="int64", append_batch_size=False)

        def lengths(name):
            return L.data(name=name, shape=[-1], dtype="int64", append_batch_size=False)

        src, src_len, trg, label, trg_len = ids("src"), lengths("src_len"), ids("trg"), ids("label"), lengths("trg_len")
        _, loss = network(src, src_len, trg, label, trg_len, cell=cell, src_vocab=vocab, trg_vocab=vocab,
                          emb_dim=emb_dim, hidden=hidden)
        fluid.optimizer.Adam(learning_rate=lr).minimize(loss)
    batch = sample_batch(batch_size, seed, steps, min_len, vocab, vocab)
    return Built(main, startup, lambda: dict(batch), [loss])


# ---------------------------------------------------------------------------------------------------------------
# The PyTorch reference: the same model from fluidlite's weights (fluidlite's fc weights are [in, out]).

class TorchSeq2Seq:
    """reset_after: embedding -> nn.GRU(bidirectional) on the PackedSequence of the source -> the attention decoder
    as a Python loop over nn.GRUCell -> nn.Linear -> cross-entropy masked to the real target steps, optim.Adam.
    basic: the same with Fluid's BasicGRUUnit written from nn.Linear (a Python loop in the encoder too)."""

    def __init__(self, params, feed, cell=None, lr=LEARNING_RATE):
        import torch
        cell = CELL if cell is None else cell
        from torch.nn.utils.rnn import pack_padded_sequence

        self.torch, self.cell = torch, cell

        def tensor(a):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))

        def embedding(name):
            w = params[name]
            emb = torch.nn.Embedding(w.shape[0], w.shape[1])
            with torch.no_grad():
                emb.weight.copy_(tensor(w))
            return emb

        def linear(w, b=None):
            lin = torch.nn.Linear(w.shape[0], w.shape[1], bias=b is not None)
            with torch.no_grad():
                lin.weight.copy_(tensor(w.T))
                if b is not None:
                    lin.bias.copy_(tensor(b.reshape(-1)))
            return lin

        hidden = params["att_q_w"].shape[0]
        self.src_emb, self.trg_emb = embedding("src_emb_table"), embedding("trg_emb_table")
        mods = [self.src_emb, self.trg_emb]
        if cell == "reset_after":
            gru = torch.nn.GRU(params["enc_fwd_ih_w"].shape[0], hidden, bidirectional=True)
            with torch.no_grad():
                for suffix, d in (("", "enc_fwd"), ("_reverse", "enc_bwd")):
                    getattr(gru, "weight_ih_l0" + suffix).copy_(tensor(params[d + "_ih_w"].T))
                    getattr(gru, "bias_ih_l0" + suffix).copy_(tensor(params[d + "_ih_b"]))
                    getattr(gru, "weight_hh_l0" + suffix).copy_(tensor(params[d + "_hh_w"].T))
                    getattr(gru, "bias_hh_l0" + suffix).copy_(tensor(params[d + "_hh_b"]))
            w_ih = np.concatenate([params["dec_ih_w"], params["dec_ctx_w"]], axis=0)  # input = [word, context]
            dec = torch.nn.GRUCell(w_ih.shape[0], hidden)
            with torch.no_grad():
                dec.weight_ih.copy_(tensor(w_ih.T))
                dec.bias_ih.copy_(tensor(params["dec_ih_b"]))
                dec.weight_hh.copy_(tensor(params["dec_hh_w"].T))
                dec.bias_hh.copy_(tensor(params["dec_hh_b"]))
            self.gru, self.dec = gru, dec
            mods += [gru, dec]
        else:
            self.basic = {d: (linear(params[d + "_w_gate"], params[d + "_b_gate"]),
                              linear(params[d + "_w_candidate"], params[d + "_b_candidate"]))
                          for d in ("enc_fwd", "enc_bwd", "dec")}
            mods += [m for pair in self.basic.values() for m in pair]
        self.init = linear(params["dec_init_w"], params["dec_init_b"])
        self.enc_proj, self.att_q, self.att_v = (linear(params[n]) for n in ("enc_proj_w", "att_q_w", "att_v_w"))
        self.out = linear(params["output_w"], params["output_b"])
        mods += [self.init, self.enc_proj, self.att_q, self.att_v, self.out]
        self.opt = torch.optim.Adam(torch.nn.ModuleList(mods).parameters(), lr=lr, eps=1e-8)

        def ids(name):
            return torch.from_numpy(np.ascontiguousarray(feed[name][:, :, 0]))
        self.src, self.trg, self.label = ids("src"), ids("trg"), ids("label")
        steps = self.src.shape[0]
        src_len, trg_len = (torch.from_numpy(np.asarray(feed[n])) for n in ("src_len", "trg_len"))
        self.src_mask = (torch.arange(steps)[:, None] < src_len[None, :]).float()  # [S, B]
        self.pad_bias = ((self.src_mask - 1.0) * PAD_SCORE)[:, :, None]
        self.trg_mask = (torch.arange(self.trg.shape[0])[:, None] < trg_len[None, :]).float()
        self.src_len = src_len
        self.pack = pack_padded_sequence

    def _basic_step(self, name, x, h):
        gate, cand = self.basic[name]
        r, u = self.torch.sigmoid(gate(self.torch.cat([x, h], 1))).chunk(2, 1)
        c = self.torch.tanh(cand(self.torch.cat([x, r * h], 1)))
        return u * h + (1 - u) * c

    def _basic_direction(self, name, emb, mask, reverse):
        h = emb.new_zeros(emb.shape[1], self.att_q.in_features)
        outs = [None] * emb.shape[0]
        for t in (reversed(range(emb.shape[0])) if reverse else range(emb.shape[0])):
            m = mask[t][:, None]
            h = h + m * (self._basic_step(name, emb[t], h) - h)
            outs[t] = h
        return self.torch.stack(outs), h

    def forward(self):
        torch = self.torch
        from torch.nn.utils.rnn import pad_packed_sequence
        emb = self.src_emb(self.src)  # [S, B, E]
        steps = emb.shape[0]
        if self.cell == "reset_after":
            packed = self.pack(emb, self.src_len, enforce_sorted=False)
            out, h_n = self.gru(packed)
            enc_out, _ = pad_packed_sequence(out, total_length=steps)  # [S, B, 2h], zeros past each end
            final = torch.cat([h_n[0], h_n[1]], 1)
        else:
            fwd, h_f = self._basic_direction("enc_fwd", emb, self.src_mask, False)
            bwd, h_b = self._basic_direction("enc_bwd", emb, self.src_mask, True)
            enc_out, final = torch.cat([fwd, bwd], 2), torch.cat([h_f, h_b], 1)
        h = torch.tanh(self.init(final))
        enc_proj = self.enc_proj(enc_out)
        words = self.trg_emb(self.trg)
        outs = []
        for t in range(words.shape[0]):
            energy = torch.tanh(enc_proj + self.att_q(h)[None])
            weights = torch.softmax(self.att_v(energy) + self.pad_bias, dim=0)  # [S, B, 1]
            context = (weights * enc_out).sum(0)
            x = torch.cat([words[t], context], 1)
            h = self.dec(x, h) if self.cell == "reset_after" else self._basic_step("dec", x, h)
            outs.append(h)
        logits = self.out(torch.stack(outs))  # [T, B, V]
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.label.reshape(-1),
                                               reduction="none").reshape(self.trg_mask.shape)
        return (ce * self.trg_mask).sum() / self.trg_mask.sum()

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward()
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy().reshape(1)


def reference_torch(params, feed):
    return TorchSeq2Seq(params, feed)


# ---------------------------------------------------------------------------------------------------------------
# The Paddle reference (paddle.static, paddle.nn layers in static mode), the torch reference's structure: the encoder
# one fused paddle.nn.GRU (bidirectional, sequence_length), the decoder unrolled over the target steps in the
# program (paddle.static has no StaticRNN / layers.rnn any more; a Python loop building the step's ops SEQ_LEN times
# is what a Paddle 3 user writes without dynamic-to-static) over paddle.nn.GRUCell (nn.GRU's cell, as
# reset_after). The basic cell (Fluid's BasicGRUUnit) has no paddle reference.

def paddle_seq2seq(params, feed, cell=None, lr=LEARNING_RATE):
    from ..reference import PaddleStatic, paddle_optimizer
    cell = CELL if cell is None else cell
    if cell != "reset_after":
        raise NotImplementedError("seq2seq: the paddle reference has the reset_after cell only (CELL = %r)" % cell)
    hidden = params["att_q_w"].shape[0]
    src_np = np.asarray(feed["src"])[:, :, 0]
    steps = src_np.shape[0]
    src_len, trg_len = np.asarray(feed["src_len"]), np.asarray(feed["trg_len"])
    src_mask = (np.arange(steps)[:, None] < src_len[None, :]).astype(np.float32)  # [S, B]
    trg_mask = (np.arange(np.asarray(feed["trg"]).shape[0])[:, None] < trg_len[None, :]).astype(np.float32)

    def build(pb):
        paddle = pb.paddle
        nn, F = paddle.nn, paddle.nn.functional

        def linear(w, b=None):
            lin = nn.Linear(w.shape[0], w.shape[1], bias_attr=None if b is not None else False)
            pb.assign(lin.weight, w)
            if b is not None:
                pb.assign(lin.bias, b.reshape(-1))
            return lin

        def embedding(name):
            return pb.assign(nn.Embedding(*params[name].shape).weight, params[name])

        src = pb.data("src", src_np)
        trg = pb.data("trg", np.asarray(feed["trg"])[:, :, 0])
        label = pb.data("label", np.asarray(feed["label"])[:, :, 0])
        lengths = pb.data("src_len", src_len.astype(np.int64))
        pad_bias = pb.data("pad_bias", ((src_mask - 1.0) * PAD_SCORE)[:, :, None])
        mask = pb.data("trg_mask", trg_mask)
        src_table, trg_table = embedding("src_emb_table"), embedding("trg_emb_table")
        gru = nn.GRU(params["enc_fwd_ih_w"].shape[0], hidden, direction="bidirect", time_major=True)
        for suffix, d in (("", "enc_fwd"), ("_reverse", "enc_bwd")):
            pb.assign(getattr(gru, "weight_ih_l0" + suffix), params[d + "_ih_w"].T)
            pb.assign(getattr(gru, "bias_ih_l0" + suffix), params[d + "_ih_b"])
            pb.assign(getattr(gru, "weight_hh_l0" + suffix), params[d + "_hh_w"].T)
            pb.assign(getattr(gru, "bias_hh_l0" + suffix), params[d + "_hh_b"])
        w_ih = np.concatenate([params["dec_ih_w"], params["dec_ctx_w"]], axis=0)  # input = [word, context]
        dec = nn.GRUCell(w_ih.shape[0], hidden)
        pb.assign(dec.weight_ih, w_ih.T)
        pb.assign(dec.bias_ih, params["dec_ih_b"])
        pb.assign(dec.weight_hh, params["dec_hh_w"].T)
        pb.assign(dec.bias_hh, params["dec_hh_b"])
        init = linear(params["dec_init_w"], params["dec_init_b"])
        enc_proj_fc, att_q, att_v = (linear(params[n]) for n in ("enc_proj_w", "att_q_w", "att_v_w"))
        out_fc = linear(params["output_w"], params["output_b"])

        enc_out, h_n = gru(F.embedding(src, src_table), sequence_length=lengths)  # [S, B, 2h]; h_n [2, B, h]
        h = paddle.tanh(init(paddle.concat([h_n[0], h_n[1]], axis=1)))
        enc_proj = enc_proj_fc(enc_out)
        words = F.embedding(trg, trg_table)
        outs = []
        for t in range(words.shape[0]):
            energy = paddle.tanh(enc_proj + paddle.unsqueeze(att_q(h), 0))
            weights = F.softmax(att_v(energy) + pad_bias, axis=0)  # [S, B, 1]
            context = paddle.sum(weights * enc_out, axis=0)
            h, _ = dec(paddle.concat([words[t], context], axis=1), h)
            outs.append(h)
        logits = out_fc(paddle.stack(outs))  # [T, B, V]
        ce = F.cross_entropy(logits, paddle.unsqueeze(label, 2), reduction="none")  # [T, B, 1]
        return paddle.sum(paddle.squeeze(ce, 2) * mask) / paddle.sum(mask)
    return PaddleStatic(build, paddle_optimizer("Adam", lr, epsilon=1e-8), note=PADDLE_NOTE)


PADDLE_NOTE = ("encoder paddle.nn.GRU(bidirect, sequence_length), decoder unrolled over paddle.nn.GRUCell in the "
               "program: paddle.static has no layers.rnn")


def reference_paddle(params, feed):
    return paddle_seq2seq(params, feed)
