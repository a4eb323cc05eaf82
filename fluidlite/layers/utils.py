"""Nested structures of Variables (Fluid 1.8 ``layers/utils.py``): the RNN cell API, the decoders and ``cond``
take and return a Variable or any nesting of lists, tuples, namedtuples and dicts of them.

A structure's leaves are everything that is not a list, tuple (namedtuples included) or dict; a string is a leaf.
Dicts are walked in sorted key order, so ``flatten({"b": x, "a": y}) == [y, x]``, and packing rebuilds each
container with its own type (a namedtuple field by field, a dict in its own key order).
"""
from collections.abc import Sequence

__all__ = ["is_sequence", "flatten", "pack_sequence_as", "map_structure", "assert_same_structure"]


def is_sequence(seq):
    """True for a dict or a non-string Sequence (list, tuple, namedtuple): a node of a structure, not a leaf."""
    return isinstance(seq, dict) or (isinstance(seq, Sequence) and not isinstance(seq, str))


def _children(node):
    """A node's children in structure order: dict values by sorted key, else the items."""
    if isinstance(node, dict):
        return [node[k] for k in sorted(node)]
    return list(node)


def _rebuild(node, children):
    """A container like `node` holding `children` (in structure order)."""
    if isinstance(node, dict):
        by_key = dict(zip(sorted(node), children))
        return type(node)((k, by_key[k]) for k in node)
    if isinstance(node, tuple) and hasattr(node, "_fields"):  # a namedtuple takes its fields positionally
        return type(node)(*children)
    return type(node)(children)


def flatten(nest):
    """The leaves of `nest` in structure order; a leaf alone gives ``[nest]``."""
    if not is_sequence(nest):
        return [nest]
    flat = []
    for child in _children(nest):
        flat.extend(flatten(child))
    return flat


def _pack(structure, flat, index):
    """(next index, `structure` rebuilt with the leaves flat[index:])."""
    children = []
    for child in _children(structure):
        if is_sequence(child):
            index, packed = _pack(child, flat, index)
            children.append(packed)
        else:
            children.append(flat[index])
            index += 1
    return index, _rebuild(structure, children)


def pack_sequence_as(structure, flat_sequence):
    """`structure` with its leaves replaced, in order, by the items of the flat list `flat_sequence`."""
    if not is_sequence(flat_sequence):
        raise TypeError("pack_sequence_as: flat_sequence must be a list or tuple, got %s"
                        % type(flat_sequence).__name__)
    if not is_sequence(structure):
        if len(flat_sequence) != 1:
            raise ValueError("pack_sequence_as: the structure is a single leaf but flat_sequence has %d items"
                             % len(flat_sequence))
        return flat_sequence[0]
    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError("pack_sequence_as: the structure has %d leaves but flat_sequence has %d items. Structure: "
                         "%s, flat_sequence: %s" % (n, len(flat_sequence), structure, flat_sequence))
    return _pack(structure, list(flat_sequence), 0)[1]


def map_structure(func, *structure, **kwargs):
    """`func` applied leaf by leaf across structures of the same shape, packed as the first one. ``check_types``
    (default True) also requires the same container types (see assert_same_structure)."""
    check_types = kwargs.pop("check_types", True)
    if kwargs:
        raise TypeError("map_structure: unexpected keyword arguments %s" % sorted(kwargs))
    if not structure:
        raise TypeError("map_structure: needs at least one structure")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types)
    leaves = zip(*[flatten(s) for s in structure])
    return pack_sequence_as(structure[0], [func(*xs) for xs in leaves])


def _assert_same_nesting(nest1, nest2, check_types):
    if is_sequence(nest1) != is_sequence(nest2):
        raise ValueError("The two structures don't have the same nested structure.\n\nFirst structure: %s\n\n"
                         "Second structure: %s." % (nest1, nest2))
    if not is_sequence(nest1):
        return
    if check_types:
        if type(nest1) is not type(nest2):
            raise TypeError("The two structures don't have the same sequence type. First structure has type %s, "
                            "while second structure has type %s." % (type(nest1), type(nest2)))
        if isinstance(nest1, dict) and set(nest1) != set(nest2):
            raise ValueError("The two dictionaries don't have the same set of keys. First structure has keys %s, "
                             "while second structure has keys %s." % (sorted(nest1), sorted(nest2)))
    for a, b in zip(_children(nest1), _children(nest2)):
        _assert_same_nesting(a, b, check_types)


def assert_same_structure(nest1, nest2, check_types=True):
    """ValueError unless both have the same nesting and number of leaves; with `check_types`, TypeError unless
    their containers have the same types (a list is not a tuple) and ValueError unless their dicts the same keys."""
    n1, n2 = len(flatten(nest1)), len(flatten(nest2))
    if n1 != n2:
        raise ValueError("The two structures don't have the same number of elements. First structure (%d "
                         "elements): %s, second structure (%d elements): %s" % (n1, nest1, n2, nest2))
    _assert_same_nesting(nest1, nest2, check_types)
