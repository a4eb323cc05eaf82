"""chunk_eval (kernels/chunk_eval.cc, layers.chunk_eval): precision, recall, F1 and the three chunk counts against a
hand-written Python chunker per scheme (IOB, IOE, IOBES, plain), run sequence by sequence, on hand-checked examples
(the NER sentence of Fluid's docs) and random ids; LoD and padded (SeqLength) forms, chunks that do not cross
sequences, empty and one-element sequences, excluded chunk types; fluid.metrics.ChunkEvaluator over several batches;
the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest, declare

TAG_TYPES = {"IOB": 2, "IOE": 2, "IOBES": 4, "plain": 1}
TAGS = {"IOB": "BI", "IOE": "IE", "IOBES": "BIES", "plain": "I"}  # tag type id -> tag


def chunks(ids, scheme, num_chunk_types):
    """The chunks (first, last, type) of one sequence of ids, by the scheme's rules written out: a chunk is open
    while the tags continue it; O, another chunk type, B or S end it; E and S end it after their position."""
    ntt = TAG_TYPES[scheme]
    out, cur = [], None

    def close():
        nonlocal cur
        if cur is not None:
            out.append(tuple(cur))
            cur = None

    for k, v in enumerate(ids):
        typ, tag = v // ntt, TAGS[scheme][v % ntt]
        if typ == num_chunk_types:  # O
            close()
            continue
        if cur is not None and (cur[2] != typ or tag in "BS"):
            close()
        if cur is None:
            cur = [k, k, typ]
        else:
            cur[1] = k
        if tag in "ES":
            close()
    close()
    return out


def evaluate(inference, label, lens, scheme, num_chunk_types, excluded=()):
    """(precision, recall, f1, num_infer, num_label, num_correct) over the sequences of `lens`."""
    n_inf = n_lab = n_cor = 0
    start = 0
    for n in lens:
        ci = {c for c in chunks(inference[start:start + n], scheme, num_chunk_types) if c[2] not in excluded}
        cl = {c for c in chunks(label[start:start + n], scheme, num_chunk_types) if c[2] not in excluded}
        n_inf, n_lab, n_cor = n_inf + len(ci), n_lab + len(cl), n_cor + len(ci & cl)
        start += n
    p = n_cor / n_inf if n_inf else 0.0
    r = n_cor / n_lab if n_lab else 0.0
    f1 = 2 * p * r / (p + r) if n_cor else 0.0
    return p, r, f1, n_inf, n_lab, n_cor


def expected(p, r, f1, n_inf, n_lab, n_cor):
    return {"Precision": np.array([p], "float32"), "Recall": np.array([r], "float32"),
            "F1-Score": np.array([f1], "float32"), "NumInferChunks": np.array([n_inf], "int64"),
            "NumLabelChunks": np.array([n_lab], "int64"), "NumCorrectChunks": np.array([n_cor], "int64")}


def lod_test(inference, label, lens, scheme, num_chunk_types, excluded=(), want=None):
    col = lambda a: np.array(a, "int64").reshape(-1, 1)
    want = want if want is not None else evaluate(list(inference), list(label), lens, scheme, num_chunk_types,
                                                  excluded)
    return OpTest("chunk_eval", {"Inference": (col(inference), [lens]), "Label": (col(label), [lens])},
                  expected(*want), {"num_chunk_types": num_chunk_types, "chunk_scheme": scheme,
                                    "excluded_chunk_types": list(excluded)})


# ------------------------------------------------------------------ hand-checked examples

# "Li Ming works at Agricultural Bank of China in Beijing": PER [0, 1], ORG [4, 7], LOC [9, 9] in every scheme;
# chunk types ORG 0, PER 1, LOC 2.
NER = {
    "IOB": [2, 3, 6, 6, 0, 1, 1, 1, 6, 4],        # B-PER I-PER O O B-ORG I-ORG I-ORG I-ORG O B-LOC
    "IOE": [2, 3, 6, 6, 0, 0, 0, 1, 6, 5],        # I-PER E-PER O O I-ORG I-ORG I-ORG E-ORG O E-LOC
    "IOBES": [4, 6, 12, 12, 0, 1, 1, 2, 12, 11],  # B-PER E-PER O O B-ORG I-ORG I-ORG E-ORG O S-LOC
    "plain": [1, 1, 3, 3, 0, 0, 0, 0, 3, 2],      # I-PER I-PER O O I-ORG x4 O I-LOC
}
NER_CHUNKS = [(0, 1, 1), (4, 7, 0), (9, 9, 2)]


@pytest.mark.parametrize("scheme", sorted(NER))
def test_the_ner_example_of_fluids_docs(scheme):
    assert chunks(NER[scheme], scheme, 3) == NER_CHUNKS
    lod_test(NER[scheme], NER[scheme], [10], scheme, 3, want=(1.0, 1.0, 1.0, 3, 3, 3)).check_output()


def test_hand_checked_iob_errors():
    # inferred: B-PER B-PER O O B-ORG I-ORG O B-ORG O B-LOC: PER [0], PER [1], ORG [4, 5], ORG [7], LOC [9]
    inference = [2, 2, 6, 6, 0, 1, 6, 0, 6, 4]
    assert chunks(inference, "IOB", 3) == [(0, 0, 1), (1, 1, 1), (4, 5, 0), (7, 7, 0), (9, 9, 2)]
    # 5 inferred, 3 labelled, 1 correct (LOC): P = 1/5, R = 1/3, F1 = 2 * (1/15) / (8/15) = 1/4
    lod_test(inference, NER["IOB"], [10], "IOB", 3, want=(0.2, 1 / 3, 0.25, 5, 3, 1)).check_output()
    # without PER: 3 inferred, 2 labelled, 1 correct
    lod_test(inference, NER["IOB"], [10], "IOB", 3, excluded=[1], want=(1 / 3, 0.5, 0.4, 3, 2, 1)).check_output()


@pytest.mark.parametrize("scheme,ids,want", [
    # I without a B opens a chunk; a change of chunk type ends one
    ("IOB", [1, 3, 3, 6, 5], [(0, 0, 0), (1, 2, 1), (4, 4, 2)]),
    ("IOB", [0, 0, 1, 0], [(0, 0, 0), (1, 2, 0), (3, 3, 0)]),
    # IOE: a chunk ends at its E; I after an E opens the next one
    ("IOE", [0, 1, 0, 0, 1, 1, 3], [(0, 1, 0), (2, 4, 0), (5, 5, 0), (6, 6, 1)]),
    # IOBES: S is a chunk of its own; I after E opens one; E after S too
    ("IOBES", [3, 0, 1, 2, 1, 2, 3, 2, 12], [(0, 0, 0), (1, 3, 0), (4, 5, 0), (6, 6, 0), (7, 7, 0)]),
    ("IOBES", [0, 5, 6, 7, 12, 9], [(0, 0, 0), (1, 2, 1), (3, 3, 1), (5, 5, 2)]),
    # plain: a run of one chunk type
    ("plain", [0, 0, 1, 1, 3, 1, 2, 2], [(0, 1, 0), (2, 3, 1), (5, 5, 1), (6, 7, 2)]),
])
def test_hand_checked_chunking(scheme, ids, want):
    assert chunks(ids, scheme, 3) == want
    # the op finds the same chunks: scored against themselves, and against a label with the first one lost
    lod_test(ids, ids, [len(ids)], scheme, 3, want=(1.0, 1.0, 1.0, len(want), len(want), len(want))).check_output()
    other = [3 * TAG_TYPES[scheme]] * (want[0][1] + 1) + ids[want[0][1] + 1:]  # O over the first chunk
    n = len(want)
    lod_test(ids, other, [len(ids)], scheme, 3, want=((n - 1) / n, 1.0, 2 * (n - 1) / (2 * n - 1), n, n - 1,
                                                      n - 1)).check_output()


def test_chunks_do_not_cross_sequences():
    # B-PER I-PER | I-PER O: one PER chunk in each sequence (one chunk of 3 rows if the batch were one sequence)
    ids = [2, 3, 3, 6]
    lod_test(ids, ids, [2, 2], "IOB", 3, want=(1.0, 1.0, 1.0, 2, 2, 2)).check_output()
    lod_test(ids, ids, [4], "IOB", 3, want=(1.0, 1.0, 1.0, 1, 1, 1)).check_output()


def test_two_lod_levels_count_per_last_level_sequence():
    # B-PER I-PER | I-PER | O B-LOC under 2 outer sequences: the inner ones are the sequences (Fluid takes one level)
    ids = np.array([2, 3, 3, 6, 4], "int64").reshape(-1, 1)
    lod = [[2, 1], [2, 1, 2]]
    OpTest("chunk_eval", {"Inference": (ids, lod), "Label": (ids, lod)}, expected(1.0, 1.0, 1.0, 3, 3, 3),
           {"num_chunk_types": 3, "chunk_scheme": "IOB"}).check_output()


def test_nothing_inferred_or_correct_gives_zeros():
    lod_test([6, 6, 6], [0, 1, 6], [3], "IOB", 3, want=(0.0, 0.0, 0.0, 0, 1, 0)).check_output()
    lod_test([0, 6, 6], [6, 6, 6], [3], "IOB", 3, want=(0.0, 0.0, 0.0, 1, 0, 0)).check_output()
    lod_test([0, 6], [2, 6], [2], "IOB", 3, want=(0.0, 0.0, 0.0, 1, 1, 0)).check_output()


# ------------------------------------------------------------------ random ids against the chunker

@pytest.mark.parametrize("scheme", ["IOB", "IOE", "IOBES", "plain"])
@pytest.mark.parametrize("lens", [[5, 1, 0, 12, 3], [30], [1], [0, 0]])
@pytest.mark.parametrize("excluded", [(), (1,), (0, 2)])
def test_random_ids(scheme, lens, excluded):
    nct = 3
    rng = np.random.RandomState(len(lens) * 7 + TAG_TYPES[scheme])
    top = nct * TAG_TYPES[scheme]  # O
    label = rng.randint(0, top + 1, sum(lens))
    inference = np.where(rng.rand(sum(lens)) < 0.7, label, rng.randint(0, top + 1, sum(lens)))
    lod_test(inference, label, lens, scheme, nct, excluded).check_output()


@pytest.mark.parametrize("seq_length_shape", [(-1,), (-1, 1)])
@pytest.mark.parametrize("data_rank", [2, 3])
def test_padded_form(seq_length_shape, data_rank):
    lens, max_len, nct = [4, 0, 6, 1], 6, 2
    rng = np.random.RandomState(6)
    label = rng.randint(0, 5, sum(lens))
    inference = np.where(rng.rand(sum(lens)) < 0.6, label, rng.randint(0, 5, sum(lens)))
    want = evaluate(list(inference), list(label), lens, "IOB", nct)
    pi, pl = np.full((4, max_len), 99, "int64"), np.full((4, max_len), 99, "int64")  # padding that must not be read
    start = 0
    for i, m in enumerate(lens):
        pi[i, :m], pl[i, :m] = inference[start:start + m], label[start:start + m]
        start += m
    shape = (4, max_len) if data_rank == 2 else (4, max_len, 1)
    OpTest("chunk_eval", {"Inference": pi.reshape(shape), "Label": pl.reshape(shape),
                          "SeqLength": np.array(lens, "int64").reshape(seq_length_shape)},
           expected(*want), {"num_chunk_types": nct, "chunk_scheme": "IOB"}).check_output()


# ------------------------------------------------------------------ the layer and ChunkEvaluator

def test_layer_and_chunk_evaluator_over_batches():
    # the book's use: chunk_eval on crf_decoding's path, counts accumulated by fluid.metrics.ChunkEvaluator
    nct, tags = 2, 5
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        pred = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        outs = fluid.layers.chunk_eval(input=pred, label=label, chunk_scheme="IOB", num_chunk_types=nct)
    assert len(outs) == 6 and all(v.shape == (1,) for v in outs)
    assert [v.dtype for v in outs] == [fluid.core.VarDesc.VarType.FP32] * 3 + [fluid.core.VarDesc.VarType.INT64] * 3
    op = main.global_block().ops[-1]
    assert op.type == "chunk_eval" and op.attr("excluded_chunk_types") == [] and op.attr("num_chunk_types") == nct
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    metric = fluid.metrics.ChunkEvaluator()
    rng = np.random.RandomState(7)
    all_pred, all_label, all_lens = [], [], []
    for lens in ([3, 5], [1, 7, 2], [4]):
        y = rng.randint(0, tags, (sum(lens), 1)).astype("int64")
        p = np.where(rng.rand(sum(lens), 1) < 0.6, y, rng.randint(0, tags, (sum(lens), 1))).astype("int64")
        res = exe.run(main, feed={"pred": (p, [lens]), "label": (y, [lens])}, fetch_list=list(outs))
        want = evaluate(list(p[:, 0]), list(y[:, 0]), lens, "IOB", nct)
        np.testing.assert_allclose([float(v[0]) for v in res], want, rtol=1e-6)
        metric.update(*res[3:])
        all_pred += list(p[:, 0])
        all_label += list(y[:, 0])
        all_lens += lens
    np.testing.assert_allclose(metric.eval(), evaluate(all_pred, all_label, all_lens, "IOB", nct)[:3], rtol=1e-12)


def test_layer_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 1], "int64", lod_level=1)
        with pytest.raises(ValueError, match=r"chunk_eval: chunk_scheme must be 'IOB', 'IOE', 'IOBES' or 'plain', "
                                             r"got 'BIO'"):
            fluid.layers.chunk_eval(x, x, chunk_scheme="BIO", num_chunk_types=2)
        with pytest.raises(ValueError, match=r"chunk_eval: num_chunk_types must be an int >= 0, got 2.0"):
            fluid.layers.chunk_eval(x, x, chunk_scheme="IOB", num_chunk_types=2.0)
        with pytest.raises(TypeError, match=r"chunk_eval: 'input' \(f\) must be int64, got float32"):
            fluid.layers.chunk_eval(fluid.data("f", [-1, 1], "float32"), x, chunk_scheme="IOB", num_chunk_types=2)


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("slot,bad", [("Inference", 7), ("Label", -1), ("Label", 9)])
def test_id_out_of_range(slot, bad):
    ids = [0, 1, 6, 2]
    bad_ids = list(ids)
    bad_ids[3] = bad
    args = (bad_ids, ids) if slot == "Inference" else (ids, bad_ids)
    t = lod_test(*args, [2, 2], "IOB", 3, want=(0, 0, 0, 0, 0, 0))
    var = "in_%s_%s_var" % (slot, slot.lower())
    with pytest.raises(fluid.core.EnforceNotMet, match=r"chunk_eval: %s '%s' holds %d at position 1 of sequence 1 "
                                                       r"\(row 3\); it must be in \[0, 6\], an id of 3 chunk types x "
                                                       r"2 tag types \(scheme IOB; 6 is O\)" % (slot, var, bad)):
        t.check_output()


def test_lod_mismatch_and_missing_lod():
    col = np.zeros((4, 1), "int64")
    t = OpTest("chunk_eval", {"Inference": (col, [[1, 3]]), "Label": (col, [[2, 2]])}, expected(0, 0, 0, 0, 0, 0),
               {"num_chunk_types": 3})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"chunk_eval: Label 'in_Label_label_var' \[4, 1\] LoD "
                                                       r"\{\{0, 2, 4\}\} and Inference 'in_Inference_inference_var' "
                                                       r"\[4, 1\] LoD \{\{0, 1, 4\}\} must describe the same "
                                                       r"sequences"):
        t.check_output()
    t = OpTest("chunk_eval", {"Inference": col, "Label": col}, expected(0, 0, 0, 0, 0, 0), {"num_chunk_types": 3})
    with pytest.raises(fluid.core.EnforceNotMet, match=r"chunk_eval: Label 'in_Label_label_var' \[4, 1\] has no LoD: "
                                                       r"feed Inference and Label as LoDTensors, or give SeqLength"):
        t.check_output()
    # as in Fluid, a Label with LoD is read by its LoD, and SeqLength (here out of range) is not read
    t = OpTest("chunk_eval", {"Inference": (col, [[2, 2]]), "Label": (col, [[2, 2]]),
                              "SeqLength": np.array([9, 9, 9, 9], "int64")},
               expected(1.0, 1.0, 1.0, 4, 4, 4), {"num_chunk_types": 3})  # four B-0 chunks
    t.check_output()


def test_seq_length_errors():
    pad = np.zeros((2, 3), "int64")
    for lens, message in (([2, 4], r"SeqLength 'in_SeqLength_seqlength_var'\[1\] = 4 is not a length in \[0, 3\]"),
                          ([2], r"SeqLength 'in_SeqLength_seqlength_var' \[1\] must hold one length per row of "
                                r"Inference 'in_Inference_inference_var' \[2, 3\]")):
        t = OpTest("chunk_eval", {"Inference": pad, "Label": pad, "SeqLength": np.array(lens, "int64")},
                   expected(0, 0, 0, 0, 0, 0), {"num_chunk_types": 3})
        with pytest.raises(fluid.core.EnforceNotMet, match="chunk_eval: " + message):
            t.check_output()


def build(inf_shape, label_shape, attrs, seq_shape=None, dtype="int64"):
    block = fluid.Program().global_block()
    inputs = {"Inference": [declare(block, "inf", inf_shape, dtype)],
              "Label": [declare(block, "label", label_shape, "int64")]}
    if seq_shape is not None:
        inputs["SeqLength"] = [declare(block, "n", seq_shape, "int64")]
    outs = {s: [declare(block, s.lower(), None)] for s in ("Precision", "Recall", "F1-Score", "NumInferChunks",
                                                            "NumLabelChunks", "NumCorrectChunks")}
    block.append_op(type="chunk_eval", inputs=inputs, outputs=outs, attrs=attrs)


@pytest.mark.parametrize("args,message", [
    (([-1, 1], [-1, 2], {"num_chunk_types": 2}), r"Inference 'inf' \[-1, 1\] and Label 'label' \[-1, 2\] must have "
                                                 r"the same shape"),
    (([-1, 1], [-1, 1], {"num_chunk_types": 2}, None, "float32"), r"Inference 'inf' \[-1, 1\] must be int64 tag ids, "
                                                                  r"got float32"),
    (([-1, 4, 2], [-1, 4, 2], {"num_chunk_types": 2}, [-1]), r"Inference 'inf' \[-1, 4, 2\] must be \[N, L\] or "
                                                             r"\[N, L, 1\] when SeqLength is given"),
    (([3, 4], [3, 4], {"num_chunk_types": 2}, [2]), r"SeqLength 'n' \[2\] must hold one length per row of Inference "
                                                    r"'inf' \[3, 4\]"),
    (([-1, 1], [-1, 1], {"num_chunk_types": 2, "chunk_scheme": "BIO"}), r"attribute 'chunk_scheme' = 'BIO' is invalid: "
                                                                    r"must be one of 'IOB', 'IOE', 'IOBES', 'plain'"),
    (([-1, 1], [-1, 1], {}), r"attribute 'num_chunk_types' is required"),
    (([-1, 1], [-1, 1], {"num_chunk_types": -1}), r"attribute 'num_chunk_types' = -1 is invalid"),
])
def test_build_time_errors(args, message):
    with pytest.raises(fluid.core.EnforceNotMet, match=message):
        build(*args)
