"""Python references for the rank-table ops (tests/ops/test_lod_rank_table.py, test_lod_tensor_to_array.py,
test_shrink_rnn_memory.py, test_reorder_lod_tensor_by_rank.py), written one sequence at a time from the recursive
sequence lengths: a LoD tensor is seen as nested lists (level-0 sequences -> ... -> rows), never through the ops'
offset arithmetic."""
import numpy as np


def nested(x, lens):
    """x's rows as nested lists, one nesting per LoD level: nested(x, [[2, 1]]) = [[row0, row1], [row2]]. Each
    level's lengths are taken in order, depth first (the order the LoD lists them in)."""
    rows = iter(list(x))
    counts = [iter(level_lens) for level_lens in lens]

    def node(level):
        n = next(counts[level])
        if level == len(lens) - 1:
            return [next(rows) for _ in range(n)]
        return [node(level + 1) for _ in range(n)]

    return [node(0) for _ in range(len(lens[0]))]


def flatten(tree, depth):
    """The nodes `depth` nestings down, in order (depth 0: [tree])."""
    nodes = [tree]
    for _ in range(depth):
        nodes = [child for node in nodes for child in node]
    return nodes


def rows_of(node, depth):
    """The rows under a node that is `depth` nestings above the rows, with the lengths of its inner levels."""
    lengths = []
    level = [node]
    for _ in range(depth):
        lengths.append([len(n) for n in level])
        level = [child for n in level for child in n]
    return level, lengths


def sequences_at(x, lens, level):
    """The sequences of LoD level `level`: each a list of its elements, each element (rows array, finer lengths)."""
    seqs = flatten(nested(x, lens), level + 1)
    depth = len(lens) - level - 1  # nestings from an element down to the rows
    out = []
    for seq in seqs:
        elements = []
        for element in seq:
            rows, finer = rows_of(element, depth) if depth else ([element], [])
            elements.append((np.array(rows).reshape((-1,) + x.shape[1:]), finer))
        out.append(elements)
    return out


def rank_order(lengths):
    """Sequence indices longest first, equal lengths in their order (Python's sort is stable)."""
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def join_lengths(parts):
    """The LoD lengths of elements placed one after another: level by level concatenation."""
    if not parts or not parts[0]:
        return []
    return [sum((p[level] for p in parts), []) for level in range(len(parts[0]))]


def to_array(x, lens, level):
    """lod_tensor_to_array's entries, (rows, lens or None): step t of each sequence longer than t, in rank order."""
    seqs = sequences_at(x, lens, level)
    order = rank_order([len(s) for s in seqs])
    steps = len(seqs[order[0]]) if seqs else 0
    entries = []
    for t in range(steps):
        elements = [seqs[i][t] for i in order if len(seqs[i]) > t]
        rows = np.concatenate([e[0] for e in elements])
        finer = join_lengths([e[1] for e in elements])
        entries.append((rows, finer) if finer else rows)
    return entries
