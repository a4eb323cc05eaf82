"""beam_search: one LoD step of beam search (Fluid 1.8's beam_search_op), against Fluid's own op-test cases and a
brute-force Python beam search that enumerates every candidate of each source and sorts them (no insertion into a
bounded beam, no batching), step by step over a tiny vocabulary; the tie-breaking rules on hand-made cases; and the
errors."""
import re
import zlib

import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def col(values, dtype):
    return np.array(values, dtype).reshape(-1, 1)


# ---------------------------------------------------------------- Fluid 1.8's test_beam_search_op.py cases
# (pre_ids, pre_scores, ids, scores, lod, beam_size, is_accumulated) -> (ids, scores, lod, parent_idx); end_id 0.
LOD = [[2, 2], [1, 1, 1, 1]]
FLUID_CASES = {
    "basic": (np.array([[1, 2, 3, 4]]), np.array([[0.1, 0.2, 0.3, 0.4]]),
              [[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]],
              [[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1], [0.7, 0.5, 0.1]], LOD, 2, True,
              ([4, 2, 3, 8], [0.5, 0.6, 0.9, 0.7], [[2, 2], [1, 1, 1, 1]], [0, 1, 2, 3])),
    "one_prefix_takes_both": ([[1], [2], [3], [4]], [[0.1, 0.2, 0.3, 0.4]],
                              [[4, 2], [7, 3], [3, 5], [8, 1]], [[0.6, 0.9], [0.5, 0.3], [0.9, 0.5], [0.1, 0.7]], LOD,
                              2, True, ([2, 4, 3, 1], [0.9, 0.6, 0.9, 0.7], [[2, 2], [2, 0, 1, 1]], [0, 0, 2, 3])),
    "ended_prefix_carries_itself": ([[1], [0], [0], [4]], [[0.1], [1.2], [0.5], [0.4]],
                                    [[4, 2], [7, 3], [3, 5], [8, 1]], [[0.6, 0.9], [0.5, 0.3], [0.9, 0.5], [0.6, 0.7]],
                                    LOD, 2, True,
                                    ([2, 0, 1, 8], [0.9, 1.2, 0.7, 0.6], [[2, 2], [1, 1, 0, 2]], [0, 1, 3, 3])),
    "finished_source_pruned": ([[0], [0], [0], [4]], [[0.1], [1.2], [0.5], [0.4]],
                               [[4, 2], [7, 3], [3, 5], [8, 1]], [[0.6, 0.9], [0.5, 0.3], [0.9, 0.5], [0.6, 0.7]],
                               LOD, 2, True, ([1, 8], [0.7, 0.6], [[2, 2], [0, 0, 0, 2]], [3, 3])),
    "probabilities": ([[1], [2], [3], [4]], [[0.1, 2.2, 0.3, 0.4]],
                      [[4, 2], [7, 3], [3, 5], [8, 1]], [[0.6, 0.9], [0.5, 0.3], [0.9, 0.5], [0.1, 0.7]], LOD, 2,
                      False, ([7, 3, 3, 1], [1.50685, 0.996027, 0.194639, 0.043325], [[2, 2], [0, 2, 1, 1]],
                              [1, 1, 2, 3])),
    "beam_size_1": ([[1], [2], [3], [4]], [[0.1, 0.2, 0.3, 0.4]],
                    [[4, 2], [7, 3], [3, 5], [8, 1]], [[0.6, 0.9], [0.5, 0.3], [0.9, 0.5], [0.1, 0.7]],
                    [[1, 1, 1, 1], [1, 1, 1, 1]], 1, True,
                    ([2, 7, 3, 1], [0.9, 0.5, 0.9, 0.7], [[1, 1, 1, 1], [1, 1, 1, 1]], [0, 1, 2, 3])),
}


@pytest.mark.parametrize("case", sorted(FLUID_CASES))
def test_fluid_cases(case):
    pre_ids, pre_scores, ids, scores, lod, beam_size, acc, (w_ids, w_scores, w_lod, w_parent) = FLUID_CASES[case]
    OpTest("beam_search",
           {"pre_ids": np.array(pre_ids, "int64"), "pre_scores": np.array(pre_scores, "float32"),
            "ids": (np.array(ids, "int64"), lod), "scores": (np.array(scores, "float32"), lod)},
           {"selected_ids": (col(w_ids, "int64"), w_lod), "selected_scores": (col(w_scores, "float32"), w_lod),
            "parent_idx": np.array(w_parent, "int32")},
           {"level": 0, "beam_size": beam_size, "end_id": 0, "is_accumulated": acc}).check_output()


# ---------------------------------------------------------------- brute force
def rows_of_sources(lod, level):
    """The row range of each source: level `level` of the recursive lengths composed down to rows."""
    counts = list(lod[level])
    for below in lod[level + 1:]:
        it, out = iter(below), []
        for n in counts:
            out.append(sum(next(it) for _ in range(n)))
        counts = out
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [(starts[s], starts[s + 1]) for s in range(len(counts))]


def brute_force_step(pre_ids, pre_scores, ids, scores, lod, level, beam_size, end_id, is_accumulated):
    """Every candidate of each source listed and sorted (score descending, then the later row first), the first
    beam_size kept; a source whose kept candidates all continue ended prefixes with end_id keeps none. Returns
    (ids, scores, recursive LoD, parent rows) of the output. Only for inputs without equal scores in a source."""
    sources = rows_of_sources(lod, level)
    kept_per_row = [[] for _ in range(scores.shape[0])]
    for begin, end in sources:
        cands = []
        for r in range(begin, end):
            if pre_ids[r] == end_id:
                cands.append((pre_scores[r], r, end_id))
                continue
            for d in range(scores.shape[1]):
                s = scores[r, d] if is_accumulated else pre_scores[r] + np.log(scores[r, d])
                cands.append((s, r, d if ids is None else ids[r, d]))
        best = sorted(cands, key=lambda c: (c[0], c[1]), reverse=True)[:beam_size]
        if all(c[2] == end_id and pre_ids[c[1]] == end_id for c in best):
            best = []
        for c in best:
            kept_per_row[c[1]].append(c)
    flat = [c for row in kept_per_row for c in row]
    out_lod = [[e - b for b, e in sources], [len(row) for row in kept_per_row]]
    return ([c[2] for c in flat], [c[0] for c in flat], out_lod, [c[1] for c in flat])


def random_case(rng, lod, width, dtype, ended_fraction, with_ids, is_accumulated, end_id=0):
    rows, vocab = sum(lod[-1]), max(50, width)
    pre_ids = rng.randint(1, vocab, rows)
    pre_ids[rng.rand(rows) < ended_fraction] = end_id
    pre_scores = rng.randn(rows).astype(dtype)
    if is_accumulated:
        scores = rng.randn(rows, width).astype(dtype)
    else:
        scores = rng.uniform(0.01, 1.0, (rows, width)).astype(dtype)
    ids = np.stack([rng.permutation(vocab)[:width] for _ in range(rows)]).astype("int64") if with_ids else None
    return pre_ids.astype("int64"), pre_scores, ids, scores


# (lod, level, width, beam_size): ragged sources and prefixes, a source of one prefix, an empty prefix group, an
# empty source, a single source, one candidate per prefix, level 1 of a 2-level LoD, a 3-level LoD, wide rows.
SHAPES = [
    ([[3, 1, 2], [1, 1, 1, 1, 1, 1]], 0, 4, 3),
    ([[2, 3], [1, 0, 2, 1, 1]], 0, 3, 2),
    ([[2, 0, 1], [1, 1, 1]], 0, 5, 4),
    ([[1], [1]], 0, 6, 3),
    ([[4], [1, 1, 1, 1]], 0, 1, 2),
    ([[2, 2], [1, 1, 1, 1]], 0, 3, 8),
    ([[2, 1], [2, 1, 3]], 1, 3, 2),
    ([[2, 1], [1, 2, 1], [1, 1, 1, 1]], 0, 3, 3),
    ([[2, 3], [1, 1, 1, 1, 1]], 0, 200, 3),  # wide rows: most candidates are skipped once the beam is full
]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
@pytest.mark.parametrize("with_ids", [True, False])
@pytest.mark.parametrize("is_accumulated", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_against_brute_force(shape, with_ids, is_accumulated, dtype):
    lod, level, width, beam_size = SHAPES[shape]
    rng = np.random.RandomState(shape * 8 + with_ids * 4 + is_accumulated * 2 + (dtype == "float64"))
    pre_ids, pre_scores, ids, scores = random_case(rng, lod, width, dtype, 0.3, with_ids, is_accumulated)
    w_ids, w_scores, w_lod, w_parent = brute_force_step(pre_ids, pre_scores, ids, scores, lod, level, beam_size, 0,
                                                        is_accumulated)
    inputs = {"pre_ids": (col(pre_ids, "int64"), lod), "pre_scores": (col(pre_scores, dtype), lod),
              "scores": (scores, lod)}
    if with_ids:
        inputs["ids"] = (ids, lod)
    OpTest("beam_search", inputs,
           {"selected_ids": (col(w_ids, "int64"), w_lod), "selected_scores": (col(w_scores, dtype), w_lod),
            "parent_idx": np.array(w_parent, "int32")},
           {"level": level, "beam_size": beam_size, "end_id": 0, "is_accumulated": is_accumulated}).check_output(
               rtol=1e-6, atol=1e-6)


def test_every_prefix_ended_prunes_every_source():
    lod = [[2, 1], [1, 1, 1]]
    OpTest("beam_search",
           {"pre_ids": (col([0, 0, 0], "int64"), lod), "pre_scores": (col([-1, -2, -3], "float32"), lod),
            "scores": (np.zeros((3, 4), "float32"), lod)},
           {"selected_ids": (np.zeros((0, 1), "int64"), [[2, 1], [0, 0, 0]]),
            "selected_scores": (np.zeros((0, 1), "float32"), [[2, 1], [0, 0, 0]]),
            "parent_idx": np.zeros(0, "int32")},
           {"level": 0, "beam_size": 2, "end_id": 0}).check_output()


# ---------------------------------------------------------------- ties, as Fluid breaks them
def run_step(pre_ids, pre_scores, scores, lod, beam_size, ids=None, end_id=0, is_accumulated=True):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pi = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        sc = fluid.data("scores", [-1, scores.shape[1]], "float32", lod_level=2)
        iv = fluid.data("ids", [-1, scores.shape[1]], "int64", lod_level=2) if ids is not None else None
        outs = fluid.layers.beam_search(pi, ps, iv, sc, beam_size, end_id, is_accumulated=is_accumulated,
                                        return_parent_idx=True)
    feed = {"pre_ids": (col(pre_ids, "int64"), lod), "pre_scores": (col(pre_scores, "float32"), lod),
            "scores": (scores.astype("float32"), lod)}
    if ids is not None:
        feed["ids"] = (ids.astype("int64"), lod)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=list(outs), return_numpy=False)
    return (np.array(got[0]).ravel().tolist(), np.array(got[1]).ravel().tolist(), got[0].recursive_sequence_lengths(),
            np.array(got[2]).tolist())


def test_ties_between_prefixes_go_to_the_later_prefix():
    # Every candidate scores 1: the later rows (prefixes) win, each keeping its candidates in id order.
    # Insertion order r0d0 r0d1 r1d0 r1d1 r2d0 r2d1 leaves [r2d0, r2d1, r1d0]: written row by row.
    got = run_step([5, 6, 7], [0, 0, 0], np.ones((3, 2)), [[3], [1, 1, 1]], 3)
    assert got == ([0, 0, 1], [1, 1, 1], [[3], [0, 1, 2]], [1, 2, 2])


def test_ties_within_a_full_beam_go_to_the_last_candidate():
    # One prefix, four equal candidates, beam 2: the first stays, each later one replaces the last kept (Fluid's
    # insertion: a candidate not below the last kept one takes its place), so ids 0 and 3 are kept.
    got = run_step([5], [0], np.ones((1, 4)), [[1], [1]], 2, ids=np.array([[10, 11, 12, 13]]))
    assert got == ([10, 13], [1, 1], [[1], [2]], [0, 0])
    # A better candidate after the ties still goes first.
    got = run_step([5], [0], np.array([[1, 1, 1, 2]]), [[1], [1]], 2)
    assert got == ([3, 0], [2, 1], [[1], [2]], [0, 0])


@pytest.mark.parametrize("is_accumulated", [True, False])
def test_equal_candidates_in_a_long_row(is_accumulated):
    # 64 equal candidates, beam 3: each one after the first three replaces the last kept, so the last one stays.
    scores = np.full((1, 64), 0.25 if not is_accumulated else -1.5)
    got = run_step([5], [0.5], scores, [[1], [1]], 3, is_accumulated=is_accumulated)
    want = -1.5 if is_accumulated else np.float32(0.5) + np.log(np.float32(0.25))
    assert got == ([0, 1, 63], [pytest.approx(want)] * 3, [[1], [3]], [0, 0, 0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_skipping_near_the_threshold_keeps_the_exact_selection(dtype):
    # 2000 distinct probabilities within 0.4% of each other, shuffled: the beam of 4 fills early and then most are
    # skipped without their log being taken. The kept four must be the first four of a beam that never skips (one as
    # wide as the row), whose scores are computed with the same arithmetic.
    rng = np.random.RandomState(7)
    p = (0.5 + rng.permutation(2000) * (2.0 ** -20)).astype(dtype)[None, :]
    lod = [[1], [1]]
    ids = np.arange(2000)[None, :]

    def select(beam_size):
        main = fluid.Program()
        with fluid.program_guard(main, fluid.Program()):
            outs = fluid.layers.beam_search(fluid.data("pi", [-1, 1], "int64", lod_level=2),
                                            fluid.data("ps", [-1, 1], dtype, lod_level=2),
                                            fluid.data("ids", [-1, 2000], "int64", lod_level=2),
                                            fluid.data("sc", [-1, 2000], dtype, lod_level=2), beam_size, 0,
                                            is_accumulated=False)
        got = fluid.Executor(fluid.CPUPlace()).run(
            main, feed={"pi": (col([3], "int64"), lod), "ps": (col([0.3], dtype), lod), "sc": (p, lod),
                        "ids": (ids.astype("int64"), lod)}, fetch_list=list(outs), return_numpy=False)
        return np.array(got[0]).ravel(), np.array(got[1]).ravel()

    few, full = select(4), select(2000)
    np.testing.assert_array_equal(few[0], full[0][:4])
    np.testing.assert_array_equal(few[1], full[1][:4])
    np.testing.assert_array_equal(few[0], np.argsort(-p[0])[:4])


def test_zero_probabilities_enter_last():
    scores = np.array([[0, 0.5, 0, 0.25, 0]])
    got = run_step([5], [0], scores, [[1], [1]], 3, is_accumulated=False)
    assert got[0] == [1, 3, 4] and got[1][2] == -np.inf  # log(0) = -inf: the last zero wins the tie for the third


def test_an_ended_prefix_ties_like_any_candidate():
    # Row 0 ended with score 1; row 1 offers 1 and 0.5: equal scores, the later row first.
    got = run_step([0, 4], [1, 0], np.array([[9, 9], [1, 0.5]]), [[2], [1, 1]], 2)
    assert got == ([0, 0], [1, 1], [[2], [1, 1]], [0, 1])
    # Its candidates' own scores are never read: only (end_id, pre_score) is offered.
    got = run_step([0, 4], [0.2, 0], np.array([[9, 9], [0.3, 0.1]]), [[2], [1, 1]], 2)
    assert got == ([0, 0], [pytest.approx(0.2), pytest.approx(0.3)], [[2], [1, 1]], [0, 1])


def test_end_id_chosen_now_is_not_pruned_until_the_next_step():
    # A live prefix choosing end_id is kept (it is written out); only a step later, carrying it, prunes the source.
    got = run_step([3, 4], [0, 0], np.array([[2, 0.1], [1.5, 0.2]]), [[2], [1, 1]], 2)
    assert got == ([0, 0], [2, 1.5], [[2], [1, 1]], [0, 1])
    got = run_step([0, 0], [2, 1.5], np.zeros((2, 2)), [[2], [1, 1]], 2)
    assert got == ([], [], [[2], [0, 0]], [])


# ---------------------------------------------------------------- several steps, fed from the previous outputs
VOCAB, END = 4, 0


def log_probs(prefix, dtype):
    """A fixed next-token distribution for each whole prefix (a deterministic function of the prefix)."""
    rng = np.random.RandomState(zlib.crc32(np.array(prefix, "int64").tobytes()))
    logits = rng.randn(VOCAB) * 2
    return (logits - np.log(np.exp(logits).sum())).astype(dtype)


def reference_search(starts, beam_size, steps, dtype, is_accumulated):
    """Beam search over explicit hypotheses, per source: each hypothesis is (tokens, score); an ended one (last token
    END) offers itself only; the candidates are sorted best first (ties: the later hypothesis), the first beam_size
    kept, and a source whose kept hypotheses all re-offer an ended one stops. Returns each step's kept hypotheses per
    source, as (tokens, score, parent index within the source's previous hypotheses)."""
    hyps = [[((s,), 0.0)] for s in starts]
    history = []
    for _ in range(steps):
        step = []
        for source in hyps:
            cands = []
            for h, (tokens, score) in enumerate(source):
                if tokens[-1] == END:
                    cands.append((score, h, END, True))
                    continue
                lp = log_probs(tokens, dtype)
                for v in range(VOCAB):
                    cands.append((score + lp[v] if is_accumulated else
                                  np.asarray(score, dtype) + np.log(np.exp(lp[v]).astype(dtype)), h, v, False))
            best = sorted(cands, key=lambda c: (c[0], c[1]), reverse=True)[:beam_size]
            if all(c[3] for c in best):
                best = []
            best.sort(key=lambda c: c[1])  # written out prefix by prefix (stable: best first within one)
            step.append([(source[h][0] + (v,), sc, h) for sc, h, v, _ in best])
        history.append(step)
        hyps = [[(t, sc) for t, sc, _ in source] for source in step]
    return history


@pytest.mark.parametrize("is_accumulated", [True, False])
@pytest.mark.parametrize("beam_size", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_steps_fed_back_match_a_reference_search(is_accumulated, beam_size, dtype):
    starts, steps = [1, 2, 3], 5
    want = reference_search(starts, beam_size, steps, dtype, is_accumulated)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pi = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], dtype, lod_level=2)
        sc = fluid.data("scores", [-1, VOCAB], dtype, lod_level=2)
        outs = fluid.layers.beam_search(pi, ps, None, sc, beam_size, END, is_accumulated=is_accumulated,
                                        return_parent_idx=True)
    exe = fluid.Executor(fluid.CPUPlace())
    # The decoder's state: each row's prefix, updated through parent_idx and selected_ids as a model would.
    prefixes = [(s,) for s in starts]
    pre_ids = fluid.create_lod_tensor(col(starts, "int64"), [[1] * 3, [1] * 3], fluid.CPUPlace())
    pre_scores = fluid.create_lod_tensor(np.zeros((3, 1), dtype), [[1] * 3, [1] * 3], fluid.CPUPlace())
    for t in range(steps):
        if not prefixes:
            assert all(not source for source in want[t])
            continue
        lod = pre_ids.recursive_sequence_lengths()
        lp = np.stack([log_probs(p, dtype) for p in prefixes])
        scores = lp + np.array(pre_scores, dtype) if is_accumulated else np.exp(lp).astype(dtype)
        ids_t, scores_t, parents = exe.run(main, feed={"pre_ids": pre_ids, "pre_scores": pre_scores,
                                                       "scores": (scores.astype(dtype), lod)},
                                           fetch_list=list(outs), return_numpy=False)
        got_ids, got_scores, got_parents = (np.array(ids_t).ravel(), np.array(scores_t).ravel(),
                                            np.array(parents))
        # Compare per source: the kept hypotheses (tokens), their scores and parents, and the LoD.
        out_lod = ids_t.recursive_sequence_lengths()
        assert out_lod[0] == [len(src) for src in (want[t - 1] if t else [[None]] * 3)]
        first_prefix = np.cumsum([0] + out_lod[0])
        row = 0
        new_prefixes = []
        for s, source in enumerate(want[t]):
            base = first_prefix[s]
            n = sum(out_lod[1][first_prefix[s]:first_prefix[s + 1]])
            got = [(prefixes[got_parents[row + i]] + (int(got_ids[row + i]),), got_scores[row + i],
                    got_parents[row + i] - base) for i in range(n)]
            assert [g[0] for g in got] == [w[0] for w in source], (t, s)
            assert [g[2] for g in got] == [w[2] for w in source], (t, s)
            np.testing.assert_allclose([g[1] for g in got], [w[1] for w in source], rtol=1e-6, atol=1e-6)
            counts = [0] * (first_prefix[s + 1] - base)
            for w in source:
                counts[w[2]] += 1
            assert out_lod[1][first_prefix[s]:first_prefix[s + 1]] == counts
            new_prefixes += [g[0] for g in got]
            row += n
        assert row == len(got_ids)
        prefixes, pre_ids, pre_scores = new_prefixes, ids_t, scores_t
    # The searches really ended hypotheses and stopped sources along the way.
    ended = [h for step in want for source in step for h in source if h[0][-1] == END]
    assert ended


# ---------------------------------------------------------------- layer and errors
def build(beam_size=2, level=0, scores_dtype="float32", with_ids=True, ids_width=3):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pi = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        sc = fluid.data("scores", [-1, 3], scores_dtype, lod_level=2)
        iv = fluid.data("ids", [-1, ids_width], "int64", lod_level=2) if with_ids else None
        outs = fluid.layers.beam_search(pi, ps, iv, sc, beam_size, 0, level=level, return_parent_idx=True)
    return main, outs


def test_layer_outputs_and_program():
    main, (ids, scores, parents) = build()
    op = main.global_block().ops[-1]
    assert op.type == "beam_search"
    assert sorted(op.input_names) == ["ids", "pre_ids", "pre_scores", "scores"]
    assert op.attr("level") == 0 and op.attr("beam_size") == 2 and op.attr("end_id") == 0
    assert op.attr("is_accumulated") is True
    assert (tuple(ids.shape), ids.dtype, ids.lod_level) == ((-1, 1), fluid.core.VarDesc.VarType.INT64, 2)
    assert (tuple(scores.shape), scores.lod_level) == ((-1, 1), 2)
    assert tuple(parents.shape) == (-1,) and parents.dtype == fluid.core.VarDesc.VarType.INT32
    main2 = fluid.Program()
    with fluid.program_guard(main2, fluid.Program()):
        pi = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        sc = fluid.data("scores", [-1, 3], "float32", lod_level=2)
        two = fluid.layers.beam_search(pi, ps, None, sc, 2, 0)
    assert len(two) == 2 and "ids" not in main2.global_block().ops[-1].input_names  # parent_idx still written
    assert main2.global_block().ops[-1].output("parent_idx")


def test_layer_type_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        pi = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        sc = fluid.data("scores", [-1, 3], "float32", lod_level=2)
        f = fluid.data("f", [-1, 1], "float32", lod_level=2)
        i = fluid.data("i", [-1, 1], "int64", lod_level=2)
        with pytest.raises(TypeError, match=r"beam_search: 'pre_ids' must be a Variable, got ndarray"):
            fluid.layers.beam_search(np.zeros((2, 1), "int64"), ps, None, sc, 2, 0)
        with pytest.raises(TypeError, match=r"beam_search: 'pre_ids' \(f\) must be int64, got float32"):
            fluid.layers.beam_search(f, ps, None, sc, 2, 0)
        with pytest.raises(TypeError, match=r"beam_search: 'pre_scores' \(i\) must be float32 or float64, got int64"):
            fluid.layers.beam_search(pi, i, None, sc, 2, 0)
        with pytest.raises(TypeError, match=r"beam_search: 'ids' must be a Variable or None, got ndarray"):
            fluid.layers.beam_search(pi, ps, np.zeros((2, 3)), sc, 2, 0)
        with pytest.raises(TypeError, match=r"beam_search: 'scores' \(i\) must be float32 or float64, got int64"):
            fluid.layers.beam_search(pi, ps, None, i, 2, 0)


def test_build_time_errors():
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"op beam_search: attribute 'beam_size' = 0 is invalid: must be >= 1"):
        build(beam_size=0)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"op beam_search: attribute 'level' = -1 is invalid: must be >= 0"):
        build(level=-1)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: ids 'ids' \[-1, 4\] and scores 'scores' \[-1, 3\] must have the same "
                             r"shape"):
        build(ids_width=4)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: pre_scores 'pre_scores' \[-1, 1\] is float32 but scores 'scores' "
                             r"\[-1, 3\] is float64"):
        build(scores_dtype="float64")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        pi = fluid.data("pre_ids", [-1, 1], "int32", lod_level=2)
        ps = fluid.data("pre_scores", [-1, 1], "float32", lod_level=2)
        sc = fluid.data("scores", [-1, 3], "float32", lod_level=2)
        out = [block.create_var(name=n) for n in ("a", "b")]
        with pytest.raises(fluid.core.EnforceNotMet, match=r"beam_search: pre_ids 'pre_ids' \[-1, 1\] must be int64, "
                                                           r"got int32"):
            block.append_op(type="beam_search", inputs={"pre_ids": [pi], "pre_scores": [ps], "scores": [sc]},
                            outputs={"selected_ids": [out[0]], "selected_scores": [out[1]]},
                            attrs={"level": 0, "beam_size": 2, "end_id": 0})
        with pytest.raises(fluid.core.EnforceNotMet, match=r"op beam_search: attribute 'end_id' is required"):
            block.append_op(type="beam_search", inputs={"pre_ids": [pi], "pre_scores": [ps], "scores": [sc]},
                            outputs={"selected_ids": [out[0]], "selected_scores": [out[1]]},
                            attrs={"level": 0, "beam_size": 2})


def feed(lod, rows=4, pre_rows=None, width=3):
    pre_rows = rows if pre_rows is None else pre_rows
    out = {"pre_ids": col(np.arange(1, pre_rows + 1), "int64"), "pre_scores": np.zeros((pre_rows, 1), "float32"),
           "scores": np.random.RandomState(0).rand(rows, width).astype("float32"),
           "ids": np.tile(np.arange(width, dtype="int64"), (rows, 1))}
    if lod is None:
        return out
    return {k: (v, lod) if k in ("scores", "ids") else v for k, v in out.items()}


def run_errors(main, outs, feed_dict):
    return fluid.Executor(fluid.CPUPlace()).run(main, feed=feed_dict, fetch_list=list(outs), return_numpy=False)


def test_run_time_errors():
    main, outs = build()
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: scores 'scores' \[4, 3\] must be a LoDTensor with at least 1 LoD level"):
        run_errors(main, outs, feed(None))
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: pre_ids 'pre_ids' \[3, 1\] must hold one value per prefix, the 4 rows of "
                             r"scores 'scores' \[4, 3\]"):
        run_errors(main, outs, feed([[2, 2], [1, 1, 1, 1]], pre_rows=3))
    main1, outs1 = build(level=2)
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: scores 'scores' \[4, 3\] must be a LoDTensor with at least 3 LoD level"
                             r"\(s\), got 2 \(\{\{0, 2, 4\}\{0, 1, 2, 3, 4\}\}\)"):
        run_errors(main1, outs1, feed([[2, 2], [1, 1, 1, 1]]))
    with pytest.raises(fluid.core.EnforceNotMet,
                       match=r"beam_search: scores 'scores' \[0, 3\] LoD \{\{0, 1, 2\}\{0, 0, 0\}\} has no prefixes "
                             r"left \(every source ended at an earlier step\): stop the decoding loop once "
                             r"selected_ids is empty \(layers.is_empty\)"):
        run_errors(main, outs, {"pre_ids": np.zeros((0, 1), "int64"), "pre_scores": np.zeros((0, 1), "float32"),
                                "scores": (np.zeros((0, 3), "float32"), [[1, 1], [0, 0]]),
                                "ids": (np.zeros((0, 3), "int64"), [[1, 1], [0, 0]])})
    main2, outs2 = build(with_ids=False)
    got = run_errors(main2, outs2, {k: v for k, v in feed([[2, 2], [1, 1, 1, 1]]).items() if k != "ids"})
    assert np.array(got[0]).max() < 3  # without ids, a candidate's id is its index


def test_glog_line(capfd):
    capfd.readouterr()
    with fluid.log.vlog_guard(vmodule="beam_search=3"):
        run_step([0, 0, 5], [1, 2, 0], np.array([[0, 0], [0, 0], [3, 4]]), [[2, 1], [1, 1, 1]], 2)
    err = capfd.readouterr().err
    assert re.search(r"beam_search\.cc:\d+\] beam_search: 2 sources, 3 prefixes -> 2 candidates kept, "
                     r"1 sources pruned\n", err), err
