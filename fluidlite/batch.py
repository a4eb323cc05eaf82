"""``paddle.batch``: group a sample reader's samples into lists (Fluid 1.x ``paddle.batch``/``fluid.io.batch``)."""

__all__ = ["batch"]


def batch(reader, batch_size, drop_last=False):
    """Return a reader whose items are lists of ``batch_size`` consecutive samples of ``reader``.

    A shorter final list is yielded unless ``drop_last`` is true. ``batch_size`` is converted with
    ``int()`` as Fluid does; a value that is not a positive integer raises ValueError.
    """
    try:
        size = int(batch_size)
    except (TypeError, ValueError):
        raise ValueError("batch: batch_size must be a positive integer, got %r" % (batch_size,)) from None
    if size <= 0:
        raise ValueError("batch: batch_size must be a positive integer, got %r" % (batch_size,))
    if not callable(reader):
        raise TypeError("batch: reader must be a callable returning an iterator of samples (a reader creator's "
                        "result, e.g. mnist.train()), got %s" % type(reader).__name__)

    def batch_reader():
        buf = []
        for sample in reader():
            buf.append(sample)
            if len(buf) == size:
                yield buf
                buf = []
        if buf and not drop_last:
            yield buf

    return batch_reader
