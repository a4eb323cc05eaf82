"""Each collective op on the ranks of `mpiexec -n P`, checked against numpy on every rank (tests/test_distributed.py).
Prints "rank R: ok" when every check passed; any failure raises (and the excepthook aborts the job)."""
import numpy as np

import fluidlite as fluid
from fluidlite import core
from fluidlite.distributed import comm


def run_op(op_type, inputs, outputs, attrs, out_shapes=None):
    """Runs one op on fresh variables; inputs {slot: [(name, array)]}, outputs {slot: [name]}; returns {name: array}."""
    main = fluid.Program()
    block = main.global_block()
    feed = {}
    for pairs in inputs.values():
        for name, arr in pairs:
            block.create_var(name=name, shape=arr.shape, dtype=str(arr.dtype))
            feed[name] = arr
    for names in outputs.values():
        for n in names:
            if not block.has_var(n):
                block.create_var(name=n, shape=(out_shapes or {}).get(n, [-1]), dtype="float32")
    block.append_op(type=op_type, inputs={s: [n for n, _ in p] for s, p in inputs.items()}, outputs=outputs,
                    attrs=attrs)
    fetch = [n for names in outputs.values() for n in names]
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        got = exe.run(main, feed=feed, fetch_list=fetch)
    return dict(zip(fetch, got))


def value(rank, shape, dtype, k=0):
    """What rank `rank` contributes: distinct per rank, exact in every dtype."""
    base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 7 + 1
    return (base * (rank + 1) + k).astype(dtype)


def main():
    rank, size = comm.init()
    ranks = range(size)
    for dtype in ("float32", "float64", "int32", "int64"):
        for op, ref in (("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod)):
            a = value(rank, (3, 4), dtype)
            b = value(rank, (5,), dtype, 1)
            for calc in (False, True):
                got = run_op("c_allreduce_" + op, {"X": [("a", a), ("b", b)]}, {"Out": ["a", "b"]},
                             {"ring_id": 0, "use_calc_stream": calc})
                want_a = ref(np.stack([value(r, (3, 4), dtype) for r in ranks]), axis=0).astype(dtype)
                want_b = ref(np.stack([value(r, (5,), dtype, 1) for r in ranks]), axis=0).astype(dtype)
                np.testing.assert_array_equal(got["a"], want_a, err_msg="%s %s" % (op, dtype))
                np.testing.assert_array_equal(got["b"], want_b, err_msg="%s %s" % (op, dtype))
                assert got["a"].dtype == np.dtype(dtype)
    # allreduce into another output variable leaves X alone
    x = value(rank, (2, 2), "float32")
    got = run_op("c_allreduce_sum", {"X": [("x", x)]}, {"Out": ["y"]}, {"ring_id": 0}, {"y": [2, 2]})
    np.testing.assert_array_equal(got["y"], sum(value(r, (2, 2), "float32") for r in ranks))
    # broadcast from the last rank
    root = size - 1
    got = run_op("c_broadcast", {"X": [("p", value(rank, (4, 3), "float32")), ("q", value(rank, (2,), "float32"))]},
                 {"Out": ["p", "q"]}, {"ring_id": 0, "root": root})
    np.testing.assert_array_equal(got["p"], value(root, (4, 3), "float32"))
    np.testing.assert_array_equal(got["q"], value(root, (2,), "float32"))
    # allgather: ranks' parts stacked on dim 0; reducescatter: this rank's rows of the sum
    got = run_op("c_allgather", {"X": [("g", value(rank, (2, 3), "float32"))]}, {"Out": ["G"]},
                 {"ring_id": 0, "nranks": size}, {"G": [2 * size, 3]})
    np.testing.assert_array_equal(got["G"], np.concatenate([value(r, (2, 3), "float32") for r in ranks]))
    full = (2 * size, 3)
    got = run_op("c_reducescatter", {"X": [("s", value(rank, full, "float64"))]}, {"Out": ["S"]},
                 {"ring_id": 0, "nranks": size}, {"S": [2, 3]})
    total = sum(value(r, full, "float64") for r in ranks)
    np.testing.assert_array_equal(got["S"], total[2 * rank:2 * rank + 2])
    run_op("barrier", {"X": [("z", np.zeros(1, "float32"))]}, {"Out": ["z"]}, {"ring_id": 0})
    stats = core.comm_ring_stats(0)
    assert stats["nranks"] == size and stats["rank"] == rank and stats["pending"] == 0, stats
    assert stats["collectives"] > 0 and stats["bytes"] > 0, stats
    # errors: a root that is no rank; nranks that is not the ring's; dtypes that differ within one bucket
    for op, ins, outs, attrs, text in (
            ("c_broadcast", {"X": [("e", np.ones(2, "float32"))]}, ["e"], {"root": size},
             "c_broadcast: root %d is not a rank of ring 0 (%d ranks)" % (size, size)),
            ("c_allgather", {"X": [("e", np.ones(2, "float32"))]}, ["E"], {"nranks": size + 1},
             "c_allgather: attribute nranks = %d but ring 0 has %d ranks" % (size + 1, size)),
            ("c_allreduce_sum", {"X": [("e", np.ones(2, "float32")), ("f", np.ones(2, "float64"))]}, ["e", "f"], {},
             "c_allreduce_sum: X[1] 'f' has dtype float64, X[0] 'e' has float32; the tensors of one collective "
             "travel as one buffer of one dtype")):
        try:
            run_op(op, ins, {"Out": outs}, dict(attrs, ring_id=0), {"e": [2], "E": [-1]})
        except core.EnforceNotMet as e:
            assert text in str(e), (text, str(e))
        else:
            raise AssertionError("%s did not raise" % op)
    comm.barrier()
    print("rank %d: ok" % rank, flush=True)


if __name__ == "__main__":
    main()
