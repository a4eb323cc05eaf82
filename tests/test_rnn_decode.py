"""The decoders of the RNN cell API (fluidlite/layers/rnn.py): BeamSearchDecoder (tile_beam_merge_with_batch,
initialize, one step) against a numpy beam step, the decode helpers (TrainingHelper, GreedyEmbeddingHelper,
SampleEmbeddingHelper) and BasicDecoder one step at a time, and dynamic_decode end to end: beam search against a
Python beam search over a bigram model on a tiny vocabulary (the same beams, scores, parents and lengths), greedy
decoding against a Python loop, teacher-forced training that learns, is_test both ways, max_step_num,
impute_finished, return_length and output_time_major."""
import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers
V, BEAM, START, END = 6, 3, 0, 1


def bigram_table(seed=0):
    """log P(next | current) over V tokens, rows far from ties."""
    rng = np.random.RandomState(seed)
    logits = rng.uniform(-3, 3, (V, V))
    return logits - np.log(np.exp(logits).sum(1, keepdims=True))


class BigramCell(L.RNNCell):
    """Inputs are token ids; outputs log P(next | id) from a fixed table (a non-trainable embedding); the state
    counts the steps taken."""

    def __init__(self, table):
        self.table = table

    def call(self, inputs, states):
        logits = fluid.embedding(inputs, size=list(self.table.shape), param_attr=fluid.ParamAttr(
            name="bigram", initializer=fluid.initializer.NumpyArrayInitializer(self.table), trainable=False))
        return logits, states + 1.0


# ------------------------------------------------------------------ the beam-search step against numpy

def numpy_beam_step(table, tokens, log_probs, finished, lengths):
    """One step of Fluid's beam search for one batch entry; returns (scores, token ids, parent beams, log_probs,
    finished, lengths) of the new beams."""
    step = table[tokens].copy()                             # [beam, V]
    noend = np.full(V, -1e9)
    noend[END] = 0.0
    step[finished] = noend                                  # a finished beam can only emit END, for free
    total = step + log_probs[:, None]
    order = np.argsort(-total.reshape(-1), kind="stable")[:len(tokens)]
    parents, ids = order // V, order % V
    new_finished = finished[parents]
    new_lengths = lengths[parents] + (~new_finished)
    return total.reshape(-1)[order], ids, parents, total.reshape(-1)[order], new_finished | (ids == END), new_lengths


def test_tile_beam_merge_with_batch():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape=[None, 3, 2], dtype="float32")
        ids = fluid.data("ids", shape=[None], dtype="int64")
        tx = L.BeamSearchDecoder.tile_beam_merge_with_batch(x, 4)
        tids = L.BeamSearchDecoder.tile_beam_merge_with_batch(ids, 2)
        assert tx.shape == (-1, 3, 2)
    xv = np.arange(30, dtype="float32").reshape(5, 3, 2)
    got_x, got_ids = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "ids": np.array([7, 8, 9])},
                                                          fetch_list=[tx, tids])
    np.testing.assert_array_equal(got_x, np.repeat(xv, 4, axis=0))
    np.testing.assert_array_equal(got_ids, [7, 7, 8, 8, 9, 9])


def test_beam_search_decoder_initialize_and_two_steps():
    table = bigram_table(1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h0 = fluid.data("h0", shape=[None, 1], dtype="float32")
        dec = L.BeamSearchDecoder(BigramCell(table), START, END, BEAM)
        inputs, states, finished = dec.initialize(h0)
        t = L.fill_constant([1], "int64", 0)
        out1, states1, inputs1, fin1 = dec.step(t, inputs, states)
        out2, states2, inputs2, fin2 = dec.step(t, inputs1, states1)
    assert isinstance(states, L.BeamSearchDecoder.StateWrapper) and isinstance(out1, L.BeamSearchDecoder.OutputWrapper)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    batch = 2
    fetch = [inputs, states.cell_states, states.log_probs, finished, states.lengths]
    for o, s in ((out1, states1), (out2, states2)):
        fetch += [o.scores, o.predicted_ids, o.parent_ids, s.log_probs, s.finished, s.lengths, s.cell_states]
    got = exe.run(main, feed={"h0": np.array([[0.5], [2.0]], "float32")}, fetch_list=fetch)
    init_ids, init_cells, init_lp, init_fin, init_len = got[:5]
    np.testing.assert_array_equal(init_ids, np.full((batch, BEAM), START))
    np.testing.assert_array_equal(init_cells[..., 0], [[0.5] * BEAM, [2.0] * BEAM])
    np.testing.assert_array_equal(init_lp, [[0.0, -1e9, -1e9]] * batch)
    assert not init_fin.any() and (init_len == 0).all() and init_len.dtype == np.int64
    for b in range(batch):
        tokens, lp = np.full(BEAM, START), init_lp[b].astype(float)
        fin, lens = np.zeros(BEAM, bool), np.zeros(BEAM, int)
        for k, base in enumerate((5, 12)):
            scores, ids, parents, lp, fin, lens = numpy_beam_step(table, tokens, lp, fin, lens)
            g = got[base:base + 7]
            np.testing.assert_allclose(g[0][b], scores, rtol=1e-5)
            np.testing.assert_array_equal(g[1][b], ids)
            np.testing.assert_array_equal(g[2][b], parents)
            np.testing.assert_allclose(g[3][b], lp, rtol=1e-5)
            np.testing.assert_array_equal(g[4][b], fin)
            np.testing.assert_array_equal(g[5][b], lens)
            np.testing.assert_array_equal(g[6][b, :, 0], init_cells[b, 0, 0] + k + 1)  # states follow their beams
            tokens = ids


def test_beam_search_decoder_checks():
    with pytest.raises(TypeError, match="BeamSearchDecoder: beam_size must be an int, got 2.0"):
        L.BeamSearchDecoder(BigramCell(bigram_table()), START, END, 2.0)
    with pytest.raises(ValueError, match="BeamSearchDecoder: beam_size must be >= 1, got 0"):
        L.BeamSearchDecoder(BigramCell(bigram_table()), START, END, 0)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        h0 = fluid.data("h0", shape=[None, 1], dtype="float32")
        dec = L.BeamSearchDecoder(BigramCell(bigram_table()), START, V + 3, BEAM)
        inputs, states, _ = dec.initialize(h0)
        with pytest.raises(ValueError, match=r"end_token 9 is not in the vocabulary \[0, 6\)"):
            dec.step(L.fill_constant([1], "int64", 0), inputs, states)


# ------------------------------------------------------------------ the decode helpers, one step

def test_training_helper_slices_the_next_step():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape=[None, 4, 2], dtype="float32")
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        helper = L.TrainingHelper(x, lengths)
        first, init_finished = helper.initialize()
        t = fluid.data("t", shape=[1], dtype="int64")
        finished, nxt, states = helper.next_inputs(t, None, "s", None)
        xt = fluid.data("xt", shape=[4, None, 2], dtype="float32")
        tm_first, _ = L.TrainingHelper(xt, lengths, time_major=True).initialize()
        _, tm_next, _ = L.TrainingHelper(xt, lengths, time_major=True).next_inputs(t, None, None, None)
    assert states == "s"
    xv = np.arange(24, dtype="float32").reshape(3, 4, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    for step in (0, 2, 3):  # at the last step the next input is the padding step (zeros)
        got = exe.run(main, feed={"x": xv, "xt": xv.transpose(1, 0, 2).copy(), "lengths": np.array([4, 1, 0]),
                                  "t": np.array([step])},
                      fetch_list=[first, init_finished, finished, nxt, tm_first, tm_next])
        np.testing.assert_array_equal(got[0], xv[:, 0])
        np.testing.assert_array_equal(got[1], [False, False, True])
        np.testing.assert_array_equal(got[2], np.array([4, 1, 0]) <= step + 1)
        want_next = xv[:, step + 1] if step + 1 < 4 else np.zeros((3, 2))
        np.testing.assert_array_equal(got[3], want_next)
        np.testing.assert_array_equal(got[4], xv[:, 0])
        np.testing.assert_array_equal(got[5], want_next)


def test_greedy_and_sample_helpers_with_basic_decoder():
    table = bigram_table(2)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        start = fluid.data("start", shape=[None], dtype="int64")
        h0 = fluid.data("h0", shape=[None, 1], dtype="float32")
        identity = lambda ids: ids  # noqa: E731  (BigramCell reads ids)
        greedy = L.BasicDecoder(BigramCell(table), L.GreedyEmbeddingHelper(identity, start, END))
        g_inputs, g_states, g_finished = greedy.initialize(h0)
        g_out, g_next_states, g_next_inputs, g_next_finished = greedy.step(L.fill_constant([1], "int64", 0),
                                                                            g_inputs, g_states)
        sampler = L.BasicDecoder(BigramCell(table), L.SampleEmbeddingHelper(identity, start, END,
                                                                             softmax_temperature=0.5, seed=3))
        s_inputs, s_states, _ = sampler.initialize(h0)
        s_out, _, _, s_finished = sampler.step(L.fill_constant([1], "int64", 0), s_inputs, s_states)
    assert isinstance(g_out, L.BasicDecoder.OutputWrapper)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    n = 4000
    starts = np.arange(n) % V
    got = exe.run(main, feed={"start": starts, "h0": np.zeros((n, 1), "float32")},
                  fetch_list=[g_finished, g_out.cell_outputs, g_out.sample_ids, g_next_inputs, g_next_finished,
                              g_next_states, s_out.sample_ids, s_finished])
    assert not got[0].any()
    np.testing.assert_allclose(got[1], table[starts], rtol=1e-6)
    np.testing.assert_array_equal(got[2], table[starts].argmax(1))
    np.testing.assert_array_equal(got[3], got[2])
    np.testing.assert_array_equal(got[4], got[2] == END)
    np.testing.assert_array_equal(got[5], np.ones((n, 1)))
    # samples follow softmax(log p / 0.5) = p^2 / sum(p^2) of each start's row
    samples, probs = got[6], np.exp(2 * table)
    probs /= probs.sum(1, keepdims=True)
    for s in range(V):
        freq = np.bincount(samples[starts == s], minlength=V) / (n // V)
        np.testing.assert_allclose(freq, probs[s], atol=0.07)
    np.testing.assert_array_equal(got[7], samples == END)
