"""ScalarArray: what Executor.run returns for a fetched value of rank >= 1 (a loss of shape [1], a
prediction of shape [N, 1]).

Fluid 1.x scripts write ``float(loss)``, ``int(acc)`` and ``"%.2f" % loss`` on one-element values, and
``"%.2f" % val`` on each row ``val`` of a [N, 1] fetch (the book's fit_a_line prints its predictions so);
numpy 2.4 refuses to convert an array of rank >= 1 to a Python scalar (earlier 2.x and 1.25+ warn). A
ScalarArray is a plain ndarray view of the fetched buffer that adds only that conversion, for one-element
arrays (the fetch, or a row or slice of it): indexing, arithmetic, ufuncs, printing and
``isinstance(x, np.ndarray)`` behave as for any ndarray. Ufunc results of other sizes are plain ndarrays,
0-d ones numpy scalars (as for an ndarray); arrays of other sizes made otherwise (``np.concatenate`` of
several losses, a whole [N, 1] fetch) convert as ndarray does (numpy's error).
``operator.index`` is not added: numpy never allowed it on rank >= 1 arrays, so no Fluid script uses it.
"""
import numpy as np

__all__ = ["ScalarArray"]


class ScalarArray(np.ndarray):
    """A fetched array whose one-element values convert to a Python scalar (``float``, ``int``, ``complex``)."""

    def _scalar(self):
        base = self.view(np.ndarray)
        return base.reshape(()) if base.size == 1 else base  # not size 1: numpy's own error

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        # As for an ndarray, a 0-d ufunc result (np.mean(loss), loss.sum()) is a numpy scalar; a result of
        # several elements is a plain ndarray (float() refuses it anyway); one element stays a ScalarArray.
        if arr.ndim == 0:
            return arr.view(np.ndarray)[()]
        if arr.size != 1:
            return arr.view(np.ndarray)
        return arr.view(ScalarArray)

    def __reduce__(self):  # pickles as the plain ndarray it is, so unpickling does not need fluidlite
        return self.view(np.ndarray).__reduce__()

    def __repr__(self):  # "array([0.5], dtype=float32)", as the ndarray it is
        return repr(self.view(np.ndarray))
