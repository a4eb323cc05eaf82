"""beam_search_decode: the full hypotheses of a LoD beam search traced back through the arrays of every step (Fluid
1.8's beam_search_decode_op). Against Fluid's own op-test case; against a brute-force search over every sequence of a
tiny vocabulary, decoding a search wide enough to keep them all; against an explicit-hypothesis reference search with
narrow beams, whose sources end and are pruned at different steps; and the errors."""
import itertools
import zlib

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, TensorArray, record_checked

L = fluid.layers


def decode_program(steps, beam_size, end_id, scores_dtype="float32"):
    """A program writing the fed LoDTensors ids_t / scores_t (t < steps) into two arrays, then decoding them."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids_array = L.create_array("int64")
        scores_array = L.create_array(scores_dtype)
        for t in range(steps):
            i = L.fill_constant([1], "int64", t)
            L.array_write(fluid.data("ids_%d" % t, [-1, 1], "int64", lod_level=2), i, array=ids_array)
            L.array_write(fluid.data("scores_%d" % t, [-1, 1], scores_dtype, lod_level=2), i, array=scores_array)
        sentence_ids, sentence_scores = L.beam_search_decode(ids_array, scores_array, beam_size, end_id)
    return main, [sentence_ids, sentence_scores]


def decode(steps_ids, steps_scores, beam_size, end_id, scores_dtype="float32"):
    """Runs beam_search_decode over the given steps, each a LoDTensor or an (array, recursive lengths) pair."""
    main, fetch = decode_program(len(steps_ids), beam_size, end_id, scores_dtype)
    feed = {}
    for t, (i, s) in enumerate(zip(steps_ids, steps_scores)):
        feed["ids_%d" % t], feed["scores_%d" % t] = i, s
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    return np.array(got[0]), np.array(got[1]), got[0].lod(), got[1].lod()


def test_fluid_case():
    # Fluid 1.8's test_beam_search_decode_op.py: 5 steps, 2 sources, beam_size 2, end_id 1.
    lods = [[[1, 1], [1, 1]], [[1, 1], [2, 2]], [[2, 2], [2, 0, 2, 0]], [[2, 2], [1, 1, 1, 1]], [[2, 2], [0, 0, 2, 0]]]
    data = [[0, 0], [2, 3, 4, 5], [3, 1, 5, 4], [1, 1, 3, 5], [5, 1]]
    want = np.array([0, 2, 3, 1, 0, 2, 1, 0, 4, 5, 3, 5, 0, 4, 5, 3, 1])
    want_lod = [[2, 2], [4, 3, 5, 5]]  # [[0, 2, 4], [0, 4, 7, 12, 17]] as offsets
    for dtype in ("float32", "float64"):
        OpTest("beam_search_decode",
               {"Ids": TensorArray([(np.array(d, "int64").reshape(-1, 1), lod) for d, lod in zip(data, lods)]),
                "Scores": TensorArray([(np.array(d, dtype).reshape(-1, 1), lod) for d, lod in zip(data, lods)])},
               {"SentenceIds": (want.astype("int64"), want_lod), "SentenceScores": (want.astype(dtype), want_lod)},
               {"beam_size": 2, "end_id": 1}).check_output()
    # The same through the layer, over arrays a program writes.
    ids = [(np.array(d, "int64").reshape(-1, 1), lod) for d, lod in zip(data, lods)]
    scores = [(np.array(d, "float32").reshape(-1, 1), lod) for d, lod in zip(data, lods)]
    got_ids, got_scores, ids_lod, scores_lod = decode(ids, scores, 2, 1)
    assert ids_lod == scores_lod == [[0, 2, 4], [0, 4, 7, 12, 17]]
    np.testing.assert_array_equal(got_ids, want)
    np.testing.assert_array_equal(got_scores, want.astype("float32"))


def test_fewer_candidates_than_beam_size_leave_empty_hypotheses():
    # One step after the start, 2 candidates for a beam of 3: the third hypothesis is empty (Fluid's beam_size
    # hypotheses per source; it sorts them reading an empty one's score, here it goes last).
    lod0, lod1 = [[1], [1]], [[1], [2]]
    OpTest("beam_search_decode",
           {"Ids": TensorArray([(np.array([[7]], "int64"), lod0), (np.array([[4], [5]], "int64"), lod1)]),
            "Scores": TensorArray([(np.array([[0]], "float32"), lod0), (np.array([[-2], [-1]], "float32"), lod1)])},
           {"SentenceIds": (np.array([7, 5, 7, 4], "int64"), [[3], [2, 2, 0]]),
            "SentenceScores": (np.array([0, -1, 0, -2], "float32"), [[3], [2, 2, 0]])},
           {"beam_size": 3, "end_id": 0}).check_output()


# ---------------------------------------------------------------- a search step by step, then the decode
VOCAB, END = 4, 0


def log_probs(prefix, dtype):
    """A fixed next-token distribution for each whole prefix (a deterministic function of the prefix)."""
    rng = np.random.RandomState(zlib.crc32(np.array(prefix, "int64").tobytes()))
    logits = rng.randn(VOCAB) * 2
    return (logits - np.log(np.exp(logits).sum())).astype(dtype)


def run_search(starts, beam_size, steps, dtype):
    """beam_search run step by step on the model above, fed back from its outputs (a decoder's loop). Returns the
    arrays' entries: the start ids/scores, then each step's selected_ids/selected_scores, until no prefix is left."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        outs = L.beam_search(fluid.data("pre_ids", [-1, 1], "int64", lod_level=2),
                             fluid.data("pre_scores", [-1, 1], dtype, lod_level=2), None,
                             fluid.data("scores", [-1, VOCAB], dtype, lod_level=2), beam_size, END,
                             return_parent_idx=True)
    exe = fluid.Executor(fluid.CPUPlace())
    n = len(starts)
    pre_ids = fluid.create_lod_tensor(np.array(starts, "int64").reshape(-1, 1), [[1] * n, [1] * n], fluid.CPUPlace())
    pre_scores = fluid.create_lod_tensor(np.zeros((n, 1), dtype), [[1] * n, [1] * n], fluid.CPUPlace())
    entries_ids, entries_scores = [pre_ids], [pre_scores]
    prefixes = [(s,) for s in starts]
    for _ in range(steps):
        if not prefixes:
            break
        lp = np.stack([log_probs(p, dtype) for p in prefixes])
        ids_t, scores_t, parents = exe.run(
            main, feed={"pre_ids": pre_ids, "pre_scores": pre_scores,
                        "scores": ((lp + np.array(pre_scores)).astype(dtype), pre_ids.recursive_sequence_lengths())},
            fetch_list=list(outs), return_numpy=False)
        prefixes = [prefixes[p] + (int(i),) for p, i in zip(np.array(parents), np.array(ids_t).ravel())]
        entries_ids.append(ids_t)
        entries_scores.append(scores_t)
        pre_ids, pre_scores = ids_t, scores_t
    return entries_ids, entries_scores


def sentences(got_ids, got_scores, lod):
    """Per source, the decoded hypotheses as (tokens, scores) tuples."""
    out = []
    for s in range(len(lod[0]) - 1):
        hyps = []
        for h in range(lod[0][s], lod[0][s + 1]):
            b, e = lod[1][h], lod[1][h + 1]
            hyps.append((tuple(int(v) for v in got_ids[b:e]), tuple(got_scores[b:e].tolist())))
        out.append(hyps)
    return out


def all_sequences(start, steps, dtype):
    """Every sequence after `start` of at most `steps` tokens, END only last, with its score and per-token scores:
    what a search that never drops a hypothesis finds."""
    out = []
    for length in range(1, steps + 1):
        for tail in itertools.product(range(VOCAB), repeat=length):
            if END in tail[:-1] or (length < steps and tail[-1] != END):
                continue
            tokens, score, per_token = (start,), np.asarray(0, dtype), [np.asarray(0, dtype)]
            for v in tail:
                score = score + log_probs(tokens, dtype)[v]
                tokens += (v,)
                per_token.append(score)
            out.append((tokens, tuple(float(x) for x in per_token)))
    return sorted(out, key=lambda h: -h[1][-1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_wide_search_decodes_every_sequence(dtype):
    # 3 steps over 4 tokens: 1 + 3 + 9 + 27 = 40 sequences (END after 0, 1 or 2 tokens, or 3 tokens). A beam of 40
    # keeps them all, so the decoded hypotheses of each source are exactly all of them, best first.
    starts, steps, beam = [1, 2, 3], 3, 40
    ids, scores = run_search(starts, beam, steps, dtype)
    got = sentences(*decode(ids, scores, beam, END, dtype)[:3])
    for s, start in enumerate(starts):
        want = all_sequences(start, steps, dtype)
        assert len(want) == 40
        assert [h[0] for h in got[s]] == [h[0] for h in want]
        for g, w in zip(got[s], want):
            np.testing.assert_allclose(g[1], w[1], rtol=1e-6, atol=1e-6)
    record_checked("output", "beam_search_decode")


def reference_hypotheses(starts, beam_size, steps, dtype, model=log_probs):
    """An explicit-hypothesis beam search (as tests/ops/test_beam_search.py's reference): per source the hypotheses
    kept at its last step with candidates, each as (tokens, per-token scores) with the END its ended prefix re-offered
    at later steps written once, best last score first, padded with empty hypotheses to beam_size."""
    hyps = [[((s,), (0.0,))] for s in starts]
    final = [None] * len(starts)
    for _ in range(steps):
        for s, source in enumerate(hyps):
            if not source:
                continue
            cands = []
            for h, (tokens, per_token) in enumerate(source):
                if tokens[-1] == END and len(tokens) > 1:
                    cands.append((per_token[-1], h, END, True))
                    continue
                lp = model(tokens, dtype)
                cands += [(np.asarray(per_token[-1], dtype) + lp[v], h, v, False) for v in range(len(lp))]
            best = sorted(cands, key=lambda c: (c[0], c[1]), reverse=True)[:beam_size]
            if all(c[3] for c in best):
                final[s], hyps[s] = source, []
                continue
            best.sort(key=lambda c: c[1])
            hyps[s] = [(source[h][0] + (v,), source[h][1] + (float(sc),)) if not ended else source[h]
                       for sc, h, v, ended in best]
        for s, source in enumerate(hyps):
            if source:
                final[s] = source
    out = []
    for source in final:
        ranked = sorted(source, key=lambda h: -h[1][-1])  # stable: equal scores keep their order
        out.append([(t, tuple(float(x) for x in sc)) for t, sc in ranked] + [((), ())] * (beam_size - len(ranked)))
    return out


@pytest.mark.parametrize("beam_size,steps", [(1, 6), (2, 6), (3, 4), (2, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_narrow_search_matches_a_reference(beam_size, steps, dtype):
    starts = [1, 2, 3, 1]
    ids, scores = run_search(starts, beam_size, steps, dtype)
    want = reference_hypotheses(starts, beam_size, steps, dtype)
    got_ids, got_scores, lod, _ = decode(ids, scores, beam_size, END, dtype)
    assert lod[0] == [beam_size * s for s in range(len(starts) + 1)]
    got = sentences(got_ids, got_scores, lod)
    for s in range(len(starts)):
        assert [h[0] for h in got[s]] == [h[0] for h in want[s]], s
        for g, w in zip(got[s], want[s]):
            np.testing.assert_allclose(g[1], w[1], rtol=1e-6, atol=1e-6)
    record_checked("output", "beam_search_decode")


def test_narrow_search_really_ends_and_prunes():
    # The beam-1 case above has sources pruned before the last step (no candidate left at a step) and hypotheses
    # that end before it.
    ids, _ = run_search([1, 2, 3, 1], 1, 6, "float32")
    per_source = []
    for entry in ids[1:]:
        lens = entry.recursive_sequence_lengths()
        bounds = np.cumsum([0] + lens[0])
        per_source.append([sum(lens[1][b:e]) for b, e in zip(bounds[:-1], bounds[1:])])
    assert any(0 in counts for counts in per_source[:-1]), per_source
    assert any(h[0][-1] == END and len(h[0]) < 7 for source in reference_hypotheses([1, 2, 3, 1], 1, 6, "float32")
               for h in source)


# ---------------------------------------------------------------- in a While loop, as the book's decoder
@pytest.mark.parametrize("beam_size,max_len", [(2, 6), (3, 4), (1, 8)])
def test_book_decoder_in_a_while_loop(beam_size, max_len):
    # machine_translation's decode(): each iteration reads the previous ids and scores from arrays, scores the next
    # word (here a bigram table: P(next | last word)), keeps beam_size per prefix with top_k, accumulates the log
    # scores, runs beam_search and writes its outputs at the next index; the loop stops at max_len or when every
    # source has ended (selected_ids empty). beam_search_decode then reads the arrays.
    vocab = 6
    rng = np.random.RandomState(beam_size * 10 + max_len)
    logits = rng.randn(vocab, vocab) * 2
    logits[:, END] += 1.0  # ending is likely enough that sources end before max_len
    table = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        init_ids = fluid.data("init_ids", [-1, 1], "int64", lod_level=2)
        init_scores = fluid.data("init_scores", [-1, 1], "float32", lod_level=2)
        probs = L.assign(table)
        array_len = L.fill_constant([1], "int64", max_len)
        counter = L.fill_constant([1], "int64", 0)
        ids_array, scores_array = L.create_array("int64"), L.create_array("float32")
        L.array_write(init_ids, array=ids_array, i=counter)
        L.array_write(init_scores, array=scores_array, i=counter)
        cond = L.less_than(counter, array_len)
        loop = L.While(cond, is_test=True)
        with loop.block():
            pre_ids = L.array_read(ids_array, counter)
            pre_score = L.array_read(scores_array, counter)
            current_score = L.lod_reset(L.gather(probs, pre_ids), y=pre_score)
            topk_scores, topk_indices = L.topk(current_score, k=beam_size)
            accu_scores = L.elementwise_add(L.log(topk_scores), L.reshape(pre_score, shape=[-1]), axis=0)
            selected_ids, selected_scores = L.beam_search(pre_ids, pre_score, topk_indices, accu_scores, beam_size,
                                                          end_id=END, level=0)
            L.increment(counter, value=1, in_place=True)
            L.array_write(selected_ids, array=ids_array, i=counter)
            L.array_write(selected_scores, array=scores_array, i=counter)
            length_cond = L.less_than(counter, array_len)
            finish_cond = L.logical_not(L.is_empty(selected_ids))
            L.logical_and(length_cond, finish_cond, out=cond)
        sentence_ids, sentence_scores = L.beam_search_decode(ids_array, scores_array, beam_size, END)
    starts = [1, 2, 3, 4, 5]
    lod = [[1] * len(starts)] * 2
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"init_ids": (np.array(starts, "int64").reshape(-1, 1), lod),
            "init_scores": (np.zeros((len(starts), 1), "float32"), lod)}

    def bigram(tokens, dtype):
        return np.log(table[tokens[-1]]).astype(dtype)
    want = reference_hypotheses(starts, beam_size, max_len, "float32", model=bigram)
    for _ in range(2):  # a second run reuses the loop's scopes and the arrays
        got_ids, got_scores = exe.run(main, feed=feed, fetch_list=[sentence_ids, sentence_scores],
                                      return_numpy=False)
        lens = got_ids.recursive_sequence_lengths()
        assert lens[0] == [beam_size] * len(starts)
        got = sentences(np.array(got_ids), np.array(got_scores), got_ids.lod())
        for s in range(len(starts)):
            assert [h[0] for h in got[s]] == [h[0] for h in want[s]], s
            for g, w in zip(got[s], want[s]):
                np.testing.assert_allclose(g[1], w[1], rtol=1e-5, atol=1e-5)
    assert any(h[0][-1] == END for source in want for h in source)
    record_checked("output", "beam_search", "beam_search_decode")


# ---------------------------------------------------------------- layer and errors
def test_layer():
    main, (sentence_ids, sentence_scores) = decode_program(2, 3, 7)
    op = main.global_block().ops[-1]
    assert op.type == "beam_search_decode" and op.attr("beam_size") == 3 and op.attr("end_id") == 7
    assert sentence_ids.dtype == fluid.core.VarDesc.VarType.INT64 and sentence_ids.lod_level == 2
    assert sentence_scores.dtype == fluid.core.VarDesc.VarType.FP32 and sentence_scores.lod_level == 2


def test_layer_type_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids, scores = L.create_array("int64"), L.create_array("float32")
        with pytest.raises(TypeError, match=r"beam_search_decode: 'ids' must be a Variable, got ndarray"):
            L.beam_search_decode(np.zeros((5, 1), "int64"), scores, 5, 0)
        with pytest.raises(TypeError, match=r"beam_search_decode: 'scores' must be a Variable, got ndarray"):
            L.beam_search_decode(ids, np.zeros((5, 1), "float32"), 5, 0)
        with pytest.raises(TypeError, match=r"beam_search_decode: 'ids' \(.*\) must be int64, got float32"):
            L.beam_search_decode(L.create_array("float32"), scores, 5, 0)
        with pytest.raises(TypeError,
                           match=r"beam_search_decode: 'scores' \(.*\) must be float32 or float64, got int64"):
            L.beam_search_decode(ids, L.create_array("int64"), 5, 0)
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"op beam_search_decode: attribute 'beam_size' = 0 is invalid: must be >= 1"):
            L.beam_search_decode(ids, scores, 0, 0)


def test_inputs_must_be_arrays():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        ids = fluid.data("ids", [-1, 1], "int64", lod_level=2)
        out = [block.create_var(name=n) for n in ("a", "b")]
        with pytest.raises(fluid.core.EnforceNotMet, match=r"beam_search_decode: Ids 'ids' is a LOD_TENSOR variable, "
                                                           r"not a LOD_TENSOR_ARRAY \(layers.create_array\)"):
            block.append_op(type="beam_search_decode", inputs={"Ids": [ids], "Scores": [L.create_array("float32")]},
                            outputs={"SentenceIds": [out[0]], "SentenceScores": [out[1]]},
                            attrs={"beam_size": 2, "end_id": 0})


def step(values, lod, dtype="int64"):
    return (np.array(values, dtype).reshape(-1, 1), lod)


def test_run_time_errors():
    lod0, lod1 = [[1, 1], [1, 1]], [[1, 1], [2, 2]]
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Ids '.*' entry 1 has 4 candidates for source 0, more than "
                             r"beam_size=2"):
        decode([step([0, 0], lod0), step([1, 2, 3, 4], [[1, 1], [4, 0]])],
               [step([0, 0], lod0, "float32"), step([1, 2, 3, 4], [[1, 1], [4, 0]], "float32")], 2, 9)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Ids '.*' entry 1 \[4, 1\] must have a 2-level LoD \(beam_search's "
                             r"selected_ids\), got \{\{0, 2, 4\}\}"):
        decode([step([0, 0], lod0), step([1, 2, 3, 4], [[2, 2]])],
               [step([0, 0], lod0, "float32"), step([1, 2, 3, 4], [[2, 2]], "float32")], 2, 9)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Scores '.*' entry 1 \[3, 1\] must hold one score per id of Ids "
                             r"'.*' entry 1 \[4, 1\]"):
        decode([step([0, 0], lod0), step([1, 2, 3, 4], lod1)],
               [step([0, 0], lod0, "float32"), step([1, 2, 3], [[1, 1], [2, 1]], "float32")], 2, 9)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Ids '.*' entry 1 LoD \{\{0, 1, 2, 3\}\{0, 1, 2, 3\}\} has 3 "
                             r"sources, entry 0 has 2"):
        decode([step([0, 0], lod0), step([1, 2, 3], [[1, 1, 1], [1, 1, 1]])],
               [step([0, 0], lod0, "float32"), step([1, 2, 3], [[1, 1, 1], [1, 1, 1]], "float32")], 2, 9)
    # Step 2's prefixes must be step 1's candidates of the same source: here source 0's prefix is row 3.
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Ids '.*' entry 2 has a prefix 3 of source 0 that is not among "
                             r"entry 1's candidates \[0, 2\) of that source"):
        decode([step([0, 0], lod0), step([1, 2, 3, 4], lod1), step([5, 6], [[4, 0], [0, 0, 0, 2]])],
               [step([0, 0], lod0, "float32"), step([1, 2, 3, 4], lod1, "float32"),
                step([5, 6], [[4, 0], [0, 0, 0, 2]], "float32")], 2, 9)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        out = L.beam_search_decode(L.create_array("int64"), L.create_array("float32"), 2, 0)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search_decode: Ids '.*' is an empty array: write the start ids and each step's "
                             r"selected_ids into it \(layers.array_write\)"):
        fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=list(out), return_numpy=False)
