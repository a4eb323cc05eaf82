"""Beam search layers (Fluid 1.8's layers.beam_search, beam_search_decode and gather_tree): one LoD step of beam
search over the live prefixes of each source, the back-trace of all steps into full hypotheses, and the back-trace
of a batched [T, batch, beam] search. The ops are kernels/beam_search.cc, beam_search_decode.cc and gather_tree.cc;
docs/control_flow.md ("Beam search") describes the LoD they read and write."""
from ..framework import Variable
from ..layer_helper import LayerHelper
from .checks import check_dtype

__all__ = ["beam_search", "beam_search_decode", "gather_tree"]


def beam_search(pre_ids, pre_scores, ids, scores, beam_size, end_id, level=0, is_accumulated=True, name=None,
                return_parent_idx=False):
    """One step of beam search. ``scores`` ([prefixes, K], float32/float64) holds the candidates of every live
    prefix, one row each, and its 2-level LoD groups the prefixes by source (``[[0, 1, .., batch], [0, 1, ..,
    batch]]`` at the first step); ``ids`` (int64, same shape) their ids, or None to use each candidate's index.
    ``pre_ids`` (int64) and ``pre_scores`` are the previous step's ``selected_ids`` and ``selected_scores``, one per
    prefix. For each source the ``beam_size`` best candidates of all its prefixes are kept; a prefix whose pre_id is
    ``end_id`` carries only itself on (end_id, its pre_score); with ``is_accumulated=False`` the scores are
    probabilities and pre_score + log(score) is compared. A source whose beams have all ended is pruned.

    Returns (selected_ids, selected_scores), [kept, 1] each with the 2-level LoD {prefixes of each source, kept
    candidates of each prefix}, and with ``return_parent_idx`` also parent_idx (int32 [kept]: the row of the prefix
    each candidate extends, for gathering the decoder's states)."""
    check_dtype("beam_search", "pre_ids", pre_ids, ("int64",))
    check_dtype("beam_search", "pre_scores", pre_scores, ("float32", "float64"))
    if ids is not None and not isinstance(ids, Variable):
        raise TypeError("beam_search: 'ids' must be a Variable or None, got %s" % type(ids).__name__)
    check_dtype("beam_search", "scores", scores, ("float32", "float64"))
    helper = LayerHelper("beam_search", name=name)
    inputs = {"pre_ids": [pre_ids], "pre_scores": [pre_scores], "scores": [scores]}
    if ids is not None:
        inputs["ids"] = [ids]
    selected_scores = helper.create_variable_for_type_inference(dtype=pre_scores.dtype)
    selected_ids = helper.create_variable_for_type_inference(dtype=pre_ids.dtype)
    parent_idx = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="beam_search", inputs=inputs,
                     outputs={"selected_ids": [selected_ids], "selected_scores": [selected_scores],
                              "parent_idx": [parent_idx]},
                     attrs={"level": level, "beam_size": beam_size, "end_id": end_id,
                            "is_accumulated": is_accumulated})
    if return_parent_idx:
        return selected_ids, selected_scores, parent_idx
    return selected_ids, selected_scores


def beam_search_decode(ids, scores, beam_size, end_id, name=None):
    """The full hypotheses of a beam search, traced back through ``ids`` and ``scores``: LoDTensorArrays whose entry t
    holds step t's selected ids (int64) and scores (float32 or float64), as beam_search returns them (entry 0: the
    start ids and scores). Returns (sentence_ids, sentence_scores), flat [tokens] LoDTensors with the 2-level LoD
    {beam_size hypotheses per source, best first; the tokens of each}; a hypothesis that ended carries end_id once at
    its end."""
    check_dtype("beam_search_decode", "ids", ids, ("int64",))
    check_dtype("beam_search_decode", "scores", scores, ("float32", "float64"))
    helper = LayerHelper("beam_search_decode", name=name)
    sentence_ids = helper.create_variable_for_type_inference(dtype=ids.dtype)
    sentence_scores = helper.create_variable_for_type_inference(dtype=scores.dtype)
    helper.append_op(type="beam_search_decode", inputs={"Ids": [ids], "Scores": [scores]},
                     outputs={"SentenceIds": [sentence_ids], "SentenceScores": [sentence_scores]},
                     attrs={"beam_size": beam_size, "end_id": end_id})
    return sentence_ids, sentence_scores


def gather_tree(ids, parents):
    """The full beams of a batched beam search: ``ids`` and ``parents`` (int32 or int64, [max_time, batch_size,
    beam_size]) hold each step's chosen ids and the beam of the previous step each extends; the result has their
    shape, and out[t][b][k] is the id at step t of the beam that ends in beam k at the last step."""
    check_dtype("gather_tree", "ids", ids, ("int32", "int64"))
    check_dtype("gather_tree", "parents", parents, ("int32", "int64"))
    helper = LayerHelper("gather_tree")
    out = helper.create_variable_for_type_inference(dtype=ids.dtype)
    helper.append_op(type="gather_tree", inputs={"Ids": [ids], "Parents": [parents]}, outputs={"Out": [out]})
    return out
