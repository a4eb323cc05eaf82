"""transformer_encoder: a 2-layer post-LN Transformer encoder classifier, one Adam training step (batch 16).

int64 token ids [batch, 64, 1] -> embedding 1000 x 256 + learned position embedding [64, 256] -> 2 encoder
layers -> mean over the sequence -> fc 10 -> softmax cross-entropy averaged over the batch.

Each encoder layer is built the way Fluid 1.x's Transformer model (models/PaddleNLP transformer) builds it,
from Fluid layers, with dropout 0 (no dropout ops):

    q, k, v = fc(x, 256, bias_attr=False, num_flatten_dims=2)        each [B, S, 256]
    reshape to [B, S, 4, 64], transpose to [B, 4, S, 64]
    weights = softmax(matmul(q, k, transpose_y=True, alpha=64 ** -0.5))   [B, 4, S, S]
    ctx = matmul(weights, v) -> transpose [B, S, 4, 64] -> reshape [B, S, 256]
    x = layer_norm(x + fc(ctx, 256, bias_attr=False, num_flatten_dims=2), begin_norm_axis=2)
    x = layer_norm(x + fc(fc(x, 1024, act="relu", num_flatten_dims=2), 256, num_flatten_dims=2), begin_norm_axis=2)

The torch reference runs the same graph with the same weights (torch.matmul, softmax, F.layer_norm,
torch.optim.Adam), not nn.TransformerEncoderLayer, whose q/k/v projections carry biases.
"""
import numpy as np

import fluidlite as fluid

from . import Built

DESCRIPTION = "Transformer encoder: 2 post-LN layers, d_model 256, 4 heads, seq 64, FFN 1024, mean pool, fc 10, Adam"
DEFAULTS = {"batch_size": 16, "iterations": 20, "warmup": 5, "repeat": 5}
SEQ_LEN = 64
VOCAB = 1000
D_MODEL = 256
N_HEAD = 4
D_INNER = 1024
N_LAYER = 2
NUM_CLASSES = 10
LEARNING_RATE = 1e-3
EPSILON = 1e-5
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

L = fluid.layers


def multi_head_attention(x, d_model=D_MODEL, n_head=N_HEAD):
    d_key = d_model // n_head

    def split_heads(t):  # [B, S, d_model] -> [B, n_head, S, d_key]
        return L.transpose(L.reshape(t, shape=[0, 0, n_head, d_key]), perm=[0, 2, 1, 3])

    q, k, v = (split_heads(L.fc(input=x, size=d_model, bias_attr=False, num_flatten_dims=2)) for _ in range(3))
    product = L.matmul(q, k, transpose_y=True, alpha=d_key ** -0.5)
    weights = L.softmax(product)
    ctx = L.matmul(weights, v)
    ctx = L.reshape(L.transpose(ctx, perm=[0, 2, 1, 3]), shape=[0, 0, d_model])
    return L.fc(input=ctx, size=d_model, bias_attr=False, num_flatten_dims=2)


def encoder_layer(x, d_model=D_MODEL, n_head=N_HEAD, d_inner=D_INNER):
    attn = multi_head_attention(x, d_model, n_head)
    x = L.layer_norm(L.elementwise_add(x, attn), begin_norm_axis=2, epsilon=EPSILON)
    hidden = L.fc(input=x, size=d_inner, act="relu", num_flatten_dims=2)
    ffn = L.fc(input=hidden, size=d_model, num_flatten_dims=2)
    return L.layer_norm(L.elementwise_add(x, ffn), begin_norm_axis=2, epsilon=EPSILON)


def network(tokens, label, seq_len=SEQ_LEN, vocab=VOCAB, d_model=D_MODEL, n_head=N_HEAD, d_inner=D_INNER,
            n_layer=N_LAYER, num_classes=NUM_CLASSES):
    """tokens: int64 [batch, seq_len, 1]; label: int64 [batch, 1]. Returns (logits, mean loss).

    Parameters: embedding_0.w_0 [vocab, d_model], pos_embedding [seq_len, d_model]; per layer i, fc_{6i}..
    fc_{6i+2}.w_0 (q, k, v), fc_{6i+3}.w_0 (output projection), layer_norm_{2i}.w_0/b_0, fc_{6i+4}.w_0/b_0
    (FFN in), fc_{6i+5}.w_0/b_0 (FFN out), layer_norm_{2i+1}.w_0/b_0; then the classifier fc_{6 n_layer}."""
    emb = L.embedding(input=tokens, size=[vocab, d_model],
                      param_attr=fluid.ParamAttr(initializer=fluid.initializer.Normal(0.0, d_model ** -0.5)))
    emb = L.reshape(emb, shape=[-1, seq_len, d_model])
    pos = L.create_parameter(shape=[seq_len, d_model], dtype="float32", name="pos_embedding",
                             default_initializer=fluid.initializer.Normal(0.0, 0.02))
    x = L.elementwise_add(emb, pos, axis=1)
    for _ in range(n_layer):
        x = encoder_layer(x, d_model, n_head, d_inner)
    pooled = L.reduce_mean(x, dim=1)
    logits = L.fc(input=pooled, size=num_classes)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label))
    return logits, loss


def build(batch_size, seed):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        tokens = L.data(name="tokens", shape=[SEQ_LEN, 1], dtype="int64")
        label = L.data(name="label", shape=[1], dtype="int64")
        _, loss = network(tokens, label)
        fluid.optimizer.Adam(learning_rate=LEARNING_RATE).minimize(loss)
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(batch_size, SEQ_LEN, 1)).astype("int64")
    labels = rng.randint(0, NUM_CLASSES, size=(batch_size, 1)).astype("int64")
    return Built(main, startup, lambda: {"tokens": ids, "label": labels}, [loss])


class TorchTransformerEncoder:
    """The same graph in torch from fluidlite's weights ([in, out] matrices used as x @ W), torch.optim.Adam."""

    def __init__(self, params, feed, lr=LEARNING_RATE, n_layer=N_LAYER, n_head=N_HEAD):
        import torch
        self.torch = torch

        def p(name):
            return torch.nn.Parameter(torch.from_numpy(np.array(params[name], dtype="float32", copy=True)))

        self.emb, self.pos = p("embedding_0.w_0"), p("pos_embedding")
        self.layers = []
        for i in range(n_layer):
            f, ln = 6 * i, 2 * i
            self.layers.append({
                "q": p("fc_%d.w_0" % f), "k": p("fc_%d.w_0" % (f + 1)), "v": p("fc_%d.w_0" % (f + 2)),
                "o": p("fc_%d.w_0" % (f + 3)),
                "ln1_w": p("layer_norm_%d.w_0" % ln), "ln1_b": p("layer_norm_%d.b_0" % ln),
                "ff1_w": p("fc_%d.w_0" % (f + 4)), "ff1_b": p("fc_%d.b_0" % (f + 4)),
                "ff2_w": p("fc_%d.w_0" % (f + 5)), "ff2_b": p("fc_%d.b_0" % (f + 5)),
                "ln2_w": p("layer_norm_%d.w_0" % (ln + 1)), "ln2_b": p("layer_norm_%d.b_0" % (ln + 1)),
            })
        self.cls_w, self.cls_b = p("fc_%d.w_0" % (6 * n_layer)), p("fc_%d.b_0" % (6 * n_layer))
        self.n_head = n_head
        all_params = [self.emb, self.pos, self.cls_w, self.cls_b] + [t for lay in self.layers for t in lay.values()]
        self.opt = torch.optim.Adam(all_params, lr=lr, eps=1e-8)
        self.tokens = torch.from_numpy(np.ascontiguousarray(feed["tokens"][:, :, 0]))
        self.y = torch.from_numpy(np.ascontiguousarray(feed["label"].reshape(-1)))

    def forward(self):
        torch = self.torch
        F = torch.nn.functional
        x = F.embedding(self.tokens, self.emb) + self.pos
        b, s, d = x.shape
        h, dk = self.n_head, d // self.n_head
        for lay in self.layers:
            def heads(t):
                return t.reshape(b, s, h, dk).transpose(1, 2)
            q, k, v = heads(x @ lay["q"]), heads(x @ lay["k"]), heads(x @ lay["v"])
            w = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * dk ** -0.5, dim=-1)
            ctx = torch.matmul(w, v).transpose(1, 2).reshape(b, s, d)
            x = F.layer_norm(x + ctx @ lay["o"], (d,), lay["ln1_w"], lay["ln1_b"], EPSILON)
            ffn = torch.relu(x @ lay["ff1_w"] + lay["ff1_b"]) @ lay["ff2_w"] + lay["ff2_b"]
            x = F.layer_norm(x + ffn, (d,), lay["ln2_w"], lay["ln2_b"], EPSILON)
        return x.mean(dim=1) @ self.cls_w + self.cls_b

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.torch.nn.functional.cross_entropy(self.forward(), self.y)
        loss.backward()
        self.opt.step()
        return loss.detach().cpu().numpy()


def reference_torch(params, feed):
    return TorchTransformerEncoder(params, feed)


def paddle_transformer_encoder(params, feed, lr=LEARNING_RATE, n_layer=N_LAYER, n_head=N_HEAD):
    """paddle.static: the same graph as the torch reference (x @ W with fluidlite's [in, out] weights,
    paddle.matmul, softmax, F.layer_norm), paddle.optimizer.Adam."""
    from ..reference import PaddleStatic, paddle_optimizer, paddle_softmax_ce

    def build(pb):
        paddle = pb.paddle
        F = paddle.nn.functional
        tokens = pb.data("tokens", np.asarray(feed["tokens"])[:, :, 0])
        label = pb.data("label", feed["label"])
        p = lambda name: pb.param(name, params[name])
        x = F.embedding(tokens, p("embedding_0.w_0")) + p("pos_embedding")
        b, s, d = tokens.shape[0], tokens.shape[1], params["pos_embedding"].shape[1]
        h, dk = n_head, d // n_head

        def heads(t):
            return paddle.transpose(paddle.reshape(t, [b, s, h, dk]), [0, 2, 1, 3])
        for i in range(n_layer):
            f, ln = 6 * i, 2 * i
            q, k, v = (heads(paddle.matmul(x, p("fc_%d.w_0" % (f + j)))) for j in range(3))
            w = F.softmax(paddle.matmul(q, k, transpose_y=True) * dk ** -0.5)
            ctx = paddle.reshape(paddle.transpose(paddle.matmul(w, v), [0, 2, 1, 3]), [b, s, d])
            x = F.layer_norm(x + paddle.matmul(ctx, p("fc_%d.w_0" % (f + 3))), [d], p("layer_norm_%d.w_0" % ln),
                             p("layer_norm_%d.b_0" % ln), EPSILON)
            ffn = F.relu(paddle.matmul(x, p("fc_%d.w_0" % (f + 4))) + p("fc_%d.b_0" % (f + 4)))
            ffn = paddle.matmul(ffn, p("fc_%d.w_0" % (f + 5))) + p("fc_%d.b_0" % (f + 5))
            x = F.layer_norm(x + ffn, [d], p("layer_norm_%d.w_0" % (ln + 1)), p("layer_norm_%d.b_0" % (ln + 1)),
                             EPSILON)
        logits = paddle.matmul(paddle.mean(x, axis=1), p("fc_%d.w_0" % (6 * n_layer))) + p("fc_%d.b_0" % (6 * n_layer))
        return paddle_softmax_ce(pb, logits, label)
    return PaddleStatic(build, paddle_optimizer("Adam", lr, epsilon=1e-8))


def reference_paddle(params, feed):
    return paddle_transformer_encoder(params, feed)
