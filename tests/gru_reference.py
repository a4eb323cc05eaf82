"""numpy references of Fluid's GRU: the cell (op gru_unit) on a batch of rows, and the layer (op gru,
layers.dynamic_gru) written sequence by sequence and step by step, never in the kernels' length-sorted batch
order. tests/ops/test_gru_unit.py and tests/ops/test_gru.py compare the kernels with them."""
import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS = {"identity": lambda x: x, "sigmoid": sigmoid, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0)}
# gru_unit's integer attribute codes
CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}


def split_weight(w):
    """Weight [D, 3D] as Fluid reads it: its first 2 D^2 elements are W_ur [D, 2D], the last D^2 W_c [D, D]."""
    d = w.shape[0]
    flat = np.ascontiguousarray(w).reshape(-1)
    return flat[:2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


def gru_cell(x, h_prev, w, b=None, act="tanh", gate_act="sigmoid", origin_mode=False):
    """One GRU step for rows x [N, 3D] and h_prev [N, D]: returns (hidden, reset_hidden_prev, gate) where gate is
    the activated [u, r, c] [N, 3D]."""
    d = w.shape[0]
    w_ur, w_c = split_weight(w)
    g = x + (0.0 if b is None else b.reshape(1, -1))
    ur = ACTIVATIONS[gate_act](g[:, :2 * d] + h_prev @ w_ur)
    u, r = ur[:, :d], ur[:, d:]
    reset_h = r * h_prev
    c = ACTIVATIONS[act](g[:, 2 * d:] + reset_h @ w_c)
    h = u * h_prev + (1 - u) * c if origin_mode else (1 - u) * h_prev + u * c
    return h, reset_h, np.concatenate([u, r, c], axis=1)


def dynamic_gru(x, lens, w, b=None, h0=None, act="tanh", gate_act="sigmoid", is_reverse=False, origin_mode=False):
    """The gru op on the LoD batch x [T, 3D] with sequence lengths `lens`: for each sequence in turn, for each of
    its steps in turn (from its end with is_reverse), one gru_cell. Returns (hidden, reset_hidden_prev, gate), each
    in x's row order."""
    d = w.shape[0]
    hidden, reset_h, gate = (np.zeros((x.shape[0], k)) for k in (d, d, 3 * d))
    start = 0
    for s, n in enumerate(lens):
        h = (np.zeros(d) if h0 is None else h0[s]).reshape(1, d)
        steps = range(start + n - 1, start - 1, -1) if is_reverse else range(start, start + n)
        for row in steps:
            h, rh, g = gru_cell(x[row:row + 1], h, w, b, act, gate_act, origin_mode)
            hidden[row], reset_h[row], gate[row] = h[0], rh[0], g[0]
        start += n
    return hidden, reset_h, gate


def batch_rows(lens, is_reverse=False):
    """The documented row order of the gru op's Batch* outputs: step by step, and within a step the sequences
    still alive, longest first (ties in input order); each entry is an input row index."""
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(int)
    order = sorted(range(len(lens)), key=lambda s: -lens[s])
    rows = []
    for t in range(max(lens, default=0)):
        for s in order:
            if lens[s] > t:
                rows.append(offsets[s] + (lens[s] - 1 - t if is_reverse else t))
    return rows
