"""fluid.embedding and fluid.one_hot (Fluid 1.6's ``fluid/input.py``): the layers of ops lookup_table_v2 and
one_hot_v2, which take ids of any shape (no trailing 1): Out = ids.shape + [width] / + [depth]."""
from .layers.nn import _lookup, _one_hot

__all__ = ["embedding", "one_hot"]


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,
              dtype="float32"):
    """Rows of a [vocab, width] table for int64 ids of any shape; padding_idx and is_sparse (a SelectedRows
    gradient) as in layers.embedding; is_distributed is recorded on the op, not acted on."""
    return _lookup("lookup_table_v2", "fluid.embedding", input, size, is_sparse, is_distributed, padding_idx,
                   param_attr, dtype)


def one_hot(input, depth, allow_out_of_range=False):
    """float32 one-hot rows of int ids of any shape (depth appended); `depth` an int or a 1-element int
    Variable. Ids outside [0, depth) raise unless allow_out_of_range (then all-zero rows)."""
    return _one_hot("one_hot_v2", "fluid.one_hot", input, depth, allow_out_of_range)
