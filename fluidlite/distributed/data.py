"""Each rank's share of the data: ``shard_reader`` for Fluid readers (and so for ``DataLoader.from_generator``);
``fleet.split_files`` shares out files instead.

    reader = fluidlite.distributed.shard_reader(my_sample_reader)      # after fleet.init(role)
    loader.set_sample_generator(reader, batch_size=per_rank_batch)     # or fluid.io.batch(reader, ...)

Rank r of P gets samples r, r + P, r + 2P, ... of the wrapped reader: the ranks' shares are disjoint and together
cover the data, whatever its length, without reading it twice or knowing its length in advance. Every rank must
run the same number of steps (a rank that runs out first leaves the others waiting in the gradient allreduce until
FLUIDLITE_COMM_TIMEOUT), so when the number of samples need not be a multiple of P, pass ``drop_last=True``: the
last incomplete round of P samples is dropped and every rank gets the same count.
"""
from . import comm

__all__ = ["shard_reader"]


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError("shard_reader: %s must be an int >= %d, got %r" % (name, low, value))


def shard_reader(reader, rank=None, nranks=None, drop_last=False):
    """The reader of this rank's samples of `reader` (a zero-argument callable returning an iterator): every
    `nranks`-th sample starting at `rank`. rank and nranks default to the job's (fluidlite.distributed.comm, set up
    by fleet.init), looked up when the reader is called."""
    if not callable(reader):
        raise TypeError("shard_reader: reader must be a callable returning an iterator of samples, got %s"
                        % type(reader).__name__)
    if nranks is not None:
        _check_int("nranks", nranks, 1)
    if rank is not None:
        _check_int("rank", rank, 0)
        if nranks is not None and rank >= nranks:
            raise ValueError("shard_reader: rank %d is not below nranks %d" % (rank, nranks))

    def sharded_reader():
        r = comm.rank() if rank is None else rank
        n = comm.size() if nranks is None else nranks
        if r >= n:
            raise ValueError("shard_reader: rank %d is not below nranks %d" % (r, n))
        mine, have = None, False
        for i, sample in enumerate(reader()):
            if i % n == r:
                mine, have = sample, True
            if i % n == n - 1 or not drop_last:  # a round of n samples is complete (or rounds do not matter)
                if have:
                    yield mine
                    mine, have = None, False
        # With drop_last, `mine` of an incomplete last round is dropped: not every rank got one.

    return sharded_reader
