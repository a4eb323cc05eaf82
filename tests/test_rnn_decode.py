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

    def logits(self, ids):
        return fluid.embedding(ids, size=list(self.table.shape), param_attr=fluid.ParamAttr(
            name="bigram", initializer=fluid.initializer.NumpyArrayInitializer(self.table), trainable=False))

    def call(self, inputs, states):
        return self.logits(inputs), states + 1.0


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


# ------------------------------------------------------------------ dynamic_decode end to end

class ScaledBigramCell(BigramCell):
    """Logits scale * log P(next | id): each batch entry its own distribution. States [scale, total]: scale is
    carried unchanged, total adds up the ids fed in (so it shows which beam a state followed)."""

    def call(self, inputs, states):
        scale, total = states
        logits = self.logits(inputs)
        fed = L.unsqueeze(L.cast(inputs, "float32"), [1])
        return L.elementwise_mul(logits, scale), [scale, total + fed]


def python_beam_search(table, scale, max_step_num, steps=None):
    """Fluid's beam search for one batch entry until every beam is finished or max_step_num + 1 steps (exactly
    `steps` steps if given: the loop runs on while other batch entries decode): the predicted ids, parents and
    scores per step, the final log_probs, finished flags and lengths."""
    logp = scale * table
    logp = logp - np.log(np.exp(logp - logp.max(1, keepdims=True)).sum(1, keepdims=True)) - logp.max(1, keepdims=True)
    tokens, lp = np.full(BEAM, START), np.array([0.0] + [-1e9] * (BEAM - 1))
    fin, lens = np.zeros(BEAM, bool), np.zeros(BEAM, int)
    ids_steps, parent_steps, score_steps = [], [], []
    step = 0
    while True:
        scores, ids, parents, lp, fin, lens = numpy_beam_step(logp, tokens, lp, fin, lens)
        ids_steps.append(ids)
        parent_steps.append(parents)
        score_steps.append(scores)
        tokens = ids
        step += 1
        if step == steps or (steps is None and (fin.all() or step > max_step_num)):
            return np.array(ids_steps), np.array(parent_steps), np.array(score_steps), lp, fin, lens


def backtrack(ids, parents):
    """gather_tree for one batch entry: [T, beam] ids and parents -> the full beams, [T, beam]."""
    out = np.zeros_like(ids)
    beam = np.arange(ids.shape[1])
    for t in reversed(range(len(ids))):
        out[t] = ids[t][beam]
        beam = parents[t][beam]
    return out


def build_beam_decode(table, max_step_num, is_test, output_time_major=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        scale = fluid.data("scale", shape=[None, 1], dtype="float32")
        total = L.fill_constant_batch_size_like(scale, [-1, 1], "float32", float(START))
        dec = L.BeamSearchDecoder(ScaledBigramCell(table), START, END, BEAM)
        outputs, states, lengths = L.dynamic_decode(dec, inits=[scale, total], max_step_num=max_step_num,
                                                    is_test=is_test, output_time_major=output_time_major,
                                                    return_length=True)
    return main, startup, outputs, states, lengths


@pytest.mark.parametrize("is_test", [False, True])
@pytest.mark.parametrize("max_step_num,end_bias", [(2, -1.5), (6, -1.5), (12, 1.25), (12, 1.5)])
def test_beam_search_decode_matches_python(is_test, max_step_num, end_bias):
    """end_bias makes finishing rarer or likelier: with 1.25 and 1.5 the batch entries finish after 3 or 4 steps
    (a finished entry's beams go on emitting END for free while the others decode) and the loop stops there."""
    table = bigram_table(3)
    table[:, END] += end_bias
    main, startup, outputs, states, lengths = build_beam_decode(table, max_step_num, is_test)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scales = np.array([[1.0], [0.3], [2.5]], "float32")
    got_ids, lp, fin, got_lens, seq_lens, totals = exe.run(
        main, feed={"scale": scales},
        fetch_list=[outputs, states.log_probs, states.finished, states.lengths, lengths, states.cell_states[1]])
    refs = [python_beam_search(table, s[0], max_step_num) for s in scales]
    steps = max(len(r[0]) for r in refs)  # the loop runs until every batch entry is done
    assert got_ids.shape == (3, steps, BEAM)
    for b, s in enumerate(scales):
        ids, parents, scores, want_lp, want_fin, want_lens = python_beam_search(table, s[0], max_step_num, steps)
        np.testing.assert_array_equal(got_ids[b], backtrack(ids, parents))
        np.testing.assert_allclose(lp[b], want_lp, rtol=1e-4)
        np.testing.assert_array_equal(fin[b], want_fin)
        np.testing.assert_array_equal(got_lens[b], want_lens)
        np.testing.assert_array_equal(seq_lens[b], want_lens)  # the decoder's own lengths are returned
        # each beam's state followed it: START plus the ids fed in, i.e. its path but the last id
        np.testing.assert_array_equal(totals[b, :, 0], START + backtrack(ids, parents)[:-1].sum(0))


def test_beam_search_decode_time_major_and_reruns():
    table = bigram_table(4)
    main, startup, outputs, _, _ = build_beam_decode(table, 3, False, output_time_major=True)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scales = np.array([[1.0], [2.0]], "float32")
    first, = exe.run(main, feed={"scale": scales}, fetch_list=[outputs])
    again, = exe.run(main, feed={"scale": scales}, fetch_list=[outputs])   # step scopes and arrays reused
    one, = exe.run(main, feed={"scale": scales[1:]}, fetch_list=[outputs])  # a smaller batch in the same scopes
    np.testing.assert_array_equal(first, again)
    ids, parents, _, _, _, _ = python_beam_search(table, 2.0, 3)
    assert first.shape[1:] == (2, BEAM)
    np.testing.assert_array_equal(one[:, 0], backtrack(ids, parents))


def greedy_program(table, max_step_num, impute_finished, is_test=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        start = fluid.data("start", shape=[None], dtype="int64")
        scale = fluid.data("scale", shape=[None, 1], dtype="float32")
        total = L.fill_constant_batch_size_like(scale, [-1, 1], "float32", 0.0)
        helper = L.GreedyEmbeddingHelper(lambda ids: ids, start, END)
        dec = L.BasicDecoder(ScaledBigramCell(table), helper)
        outputs, states, lengths = L.dynamic_decode(dec, inits=[scale, total], max_step_num=max_step_num,
                                                    impute_finished=impute_finished, is_test=is_test,
                                                    return_length=True)
    return main, startup, outputs, states, lengths


@pytest.mark.parametrize("impute_finished", [False, True])
@pytest.mark.parametrize("is_test", [False, True])
def test_greedy_decode_matches_python(impute_finished, is_test):
    table = bigram_table(5)
    table[:, END] += 1.0  # some entries finish early
    main, startup, outputs, states, lengths = greedy_program(table, 7, impute_finished, is_test)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    starts, scales = np.array([2, 3, 4, 5]), np.array([[1.0], [0.5], [3.0], [2.0]], "float32")
    sample_ids, logits, totals, lens = exe.run(main, feed={"start": starts, "scale": scales},
                                               fetch_list=[outputs.sample_ids, outputs.cell_outputs, states[1],
                                                           lengths])
    steps = sample_ids.shape[1]
    assert logits.shape == (4, steps, V)
    ran = []
    for b in range(4):
        tok, total, length, finished, ids = starts[b], 0.0, 0, False, []
        for _ in range(steps):
            nxt = int(np.argmax(scales[b, 0] * table[tok]))
            ids.append(nxt)
            if not finished:
                length += 1
            if not (finished and impute_finished):
                total += tok
            finished = finished or nxt == END
            tok = nxt
        ran.append(finished)
        np.testing.assert_array_equal(sample_ids[b], ids)
        assert lens[b] == length
        assert totals[b, 0] == total
    # the loop stopped when every entry had finished, or after max_step_num + 1 = 8 steps
    assert steps == 8 or all(ran)


def test_training_helper_decode_gradients_are_numeric():
    """Teacher forcing with TrainingHelper + BasicDecoder + dynamic_decode (tensor arrays, while_grad): float64
    gradients against central differences."""
    rng = np.random.RandomState(6)
    b, t, d, h = 3, 4, 3, 5
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 4
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, t, d], dtype="float64")
        x.stop_gradient = False
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        cell = L.GRUCell(h, dtype="float64")
        dec = L.BasicDecoder(cell, L.TrainingHelper(x, lengths))
        outputs, _ = L.dynamic_decode(dec, inits=cell.get_initial_states(x))
        w = L.assign(rng.uniform(-1, 1, (b, t, h)))
        loss = L.reduce_sum(L.elementwise_mul(outputs.cell_outputs, w))
        names = ["GRUCell/BasicGRUUnit_0.w_0", "GRUCell/BasicGRUUnit_0.b_1"]
        grads = fluid.gradients([loss], [x] + [main.global_block().var(n) for n in names])
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": rng.uniform(-1, 1, (b, t, d)), "lengths": np.array([4, 4, 4])}
    analytic = exe.run(main, feed=feed, fetch_list=grads, scope=scope)

    def f():
        return float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0])

    eps = 1e-6
    for name, ana in zip(["x"] + names, analytic):
        arr = feed["x"] if name == "x" else np.array(scope.find_var(name).get_tensor())
        flat = arr.reshape(-1)
        for k in rng.choice(flat.size, size=min(8, flat.size), replace=False):
            orig = flat[k]
            vals = []
            for v in (orig + eps, orig - eps):
                flat[k] = v
                if name != "x":
                    scope.find_var(name).get_tensor().set(arr, fluid.CPUPlace())
                vals.append(f())
            flat[k] = orig
            if name != "x":
                scope.find_var(name).get_tensor().set(arr, fluid.CPUPlace())
            num = (vals[0] - vals[1]) / (2 * eps)
            assert abs(num - ana.reshape(-1)[k]) <= 1e-6 * max(1.0, abs(num)), (name, k, num, ana.reshape(-1)[k])


def test_training_helper_decode_learns():
    """A teacher-forced decoder learns: each step's label is the index of that step's largest input feature."""
    rng = np.random.RandomState(7)
    n, t, d = 64, 5, 4
    xs = rng.uniform(-1, 1, (n, t, d)).astype("float32")
    labels = xs.argmax(2).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 8
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", shape=[None, t, d], dtype="float32")
        y = fluid.data("y", shape=[None, t], dtype="int64")
        lengths = fluid.data("lengths", shape=[None], dtype="int64")
        cell = L.GRUCell(16)
        dec = L.BasicDecoder(cell, L.TrainingHelper(x, lengths),
                             output_fn=lambda o: L.fc(o, size=d, num_flatten_dims=len(o.shape) - 1))
        outputs, _ = L.dynamic_decode(dec, inits=cell.get_initial_states(x))
        loss = L.mean(L.cross_entropy(L.softmax(outputs.cell_outputs), y))
        fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": xs, "y": labels, "lengths": np.full(n, t, "int64")}
    losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0] for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0], losses
