"""Times the tensor-array and rank-table ops (DynamicRNN's machinery) on a LoD batch of 64 sequences of 5-100 steps,
width 256, float32, from fluidlite's own profiler events, beside PyTorch doing the same data movement:

    lod_tensor_to_array   the batch split into time steps in rank order   torch pack_sequence (enforce_sorted=False)
    array_to_lod_tensor   the steps joined back in the original order     torch.cat of the steps + index_select
    lod_rank_table        rank the 64 sequences                           (torch: a sort of the lengths)
    reorder_lod_tensor_by_rank  64 rows [64, 256] in rank order           torch.index_select
    shrink_rnn_memory     the running rows of a [64, 256] memory          a slice + clone
    write_to_array / read_from_array  one [64, 256] entry                 clone
    tensor_array_to_tensor  30 entries [64, 256] stacked                  torch.stack

    PYTHONPATH=. python benchmarks/tensor_array_ops.py [--runs 50] [--threads 2]

Each figure is the fastest of --runs calls after warm-up (the minimum: on a shared machine the median moves with the
other processes' load); fluidlite's are op events (the executor's overhead is not counted), PyTorch's the wall time
of the same calls. Results are checked against each other before timing.
"""
import argparse

import numpy as np

import fluidlite as fluid
from fluidlite.bench import seconds_per_call

L = fluid.layers


def op_times(main, feed, fetch, names, runs):
    """The fastest call of each op type in `names`, in µs, from the profiler's events over `runs` runs."""
    exe = fluid.Executor(fluid.CPUPlace())
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    fluid.profiler.start_profiler("CPU")
    for _ in range(runs):
        exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    fluid.profiler.stop_profiler(print_report=False, profile_path="/tmp/tensor_array_ops.trace")
    evs = fluid.profiler.events()
    return {n: min(e["dur_ns"] for e in evs if e["name"] == n) / 1e3 for n in names}


def wall_us(fn, runs):
    """The fastest of `runs` single calls of fn after 3 warm-up calls, in µs."""
    return seconds_per_call(fn, 1, runs, 3)[1] * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    fluid.core.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    rng = np.random.RandomState(0)
    lens = [int(n) for n in rng.randint(5, 101, 64)]
    width, steps = 256, 30
    x = rng.uniform(-1, 1, (sum(lens), width)).astype("float32")
    m = rng.uniform(-1, 1, (64, width)).astype("float32")

    # Three programs, so that the large copies of the first do not leave the small ops of the others cold in cache.
    split, split_vars = fluid.Program(), {}
    with fluid.program_guard(split, fluid.Program()), fluid.unique_name.guard():
        xv = L.data("x", shape=[width], dtype="float32", lod_level=1)
        table = L.lod_rank_table(xv)
        split_vars["arr"] = L.lod_tensor_to_array(xv, table)
        split_vars["back"] = L.array_to_lod_tensor(split_vars["arr"], table)
    memory, memory_vars = fluid.Program(), {}
    with fluid.program_guard(memory, fluid.Program()), fluid.unique_name.guard():
        xv = L.data("x", shape=[width], dtype="float32", lod_level=1)
        mv = L.data("m", shape=[width], dtype="float32")
        table = L.lod_rank_table(xv)
        reordered = L.reorder_lod_tensor_by_rank(mv, table)
        memory_vars["shrunk"] = L.shrink_memory(reordered, L.fill_constant([1], "int64", 50), table)
    arrays, array_vars = fluid.Program(), {}
    with fluid.program_guard(arrays, fluid.Program()), fluid.unique_name.guard():
        mv = L.data("m", shape=[width], dtype="float32")
        out = L.create_array("float32")
        for t in range(steps):
            L.array_write(mv, L.fill_constant([1], "int64", t), array=out)
        array_vars["read"] = L.array_read(out, L.fill_constant([1], "int64", 3))
        array_vars["stacked"], _ = L.tensor_array_to_tensor(out, axis=0, use_stack=True)
    feed = {"x": fluid.create_lod_tensor(x, [lens], fluid.CPUPlace()), "m": m}
    ours = {}
    for prog, fetch, names in [
            (split, [split_vars["arr"], split_vars["back"]],
             ["lod_rank_table", "lod_tensor_to_array", "array_to_lod_tensor"]),
            (memory, [memory_vars["shrunk"]], ["reorder_lod_tensor_by_rank", "shrink_rnn_memory"]),
            (arrays, [array_vars["read"], array_vars["stacked"]],
             ["write_to_array", "read_from_array", "tensor_array_to_tensor"])]:
        ours.update(op_times(prog, {k: v for k, v in feed.items() if prog.global_block().has_var(k)}, fetch, names,
                             args.runs))
    names = list(ours)
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(split, feed={"x": feed["x"]}, fetch_list=[split_vars["arr"], split_vars["back"]],
                  return_numpy=False)
    got.append(exe.run(memory, feed=feed, fetch_list=[memory_vars["shrunk"]])[0])
    order = sorted(range(64), key=lambda i: -lens[i])
    np.testing.assert_array_equal(np.array(got[1]), x)
    np.testing.assert_array_equal(got[2], m[order][:sum(n > 50 for n in lens)])
    theirs = {}
    if torch:
        from torch.nn.utils.rnn import pack_sequence
        xt, mt = torch.tensor(x), torch.tensor(m)
        seqs = list(torch.split(xt, lens))
        packed = pack_sequence(seqs, enforce_sorted=False)
        offsets = np.concatenate([[0], np.cumsum(lens)])
        steps_np = [np.concatenate([x[offsets[i] + t:offsets[i] + t + 1] for i in order if lens[i] > t])
                    for t in range(max(lens))]
        # torch orders equal lengths its own way (an unstable sort): the same rows per step, maybe permuted
        assert packed.batch_sizes.tolist() == [len(s) for s in steps_np]
        starts = np.cumsum([0] + [len(s) for s in steps_np[:-1]])
        np.testing.assert_allclose(np.add.reduceat(packed.data.numpy(), starts),
                                   np.array([s.sum(0) for s in steps_np]), rtol=1e-4, atol=1e-4)
        for e, want in zip(got[0], steps_np):
            np.testing.assert_array_equal(np.array(e), want)
        step_ts = [torch.tensor(s) for s in steps_np]
        packed_rows = np.concatenate([[offsets[i] + t for i in order if lens[i] > t] for t in range(max(lens))])
        inverse = torch.tensor(np.argsort(packed_rows))
        order_t = torch.tensor(order)
        theirs = {
            "lod_rank_table": wall_us(lambda: torch.sort(torch.tensor(lens), descending=True, stable=True), args.runs),
            "lod_tensor_to_array": wall_us(lambda: pack_sequence(list(torch.split(xt, lens)), enforce_sorted=False),
                                           args.runs),
            "array_to_lod_tensor": wall_us(lambda: torch.index_select(torch.cat(step_ts), 0, inverse), args.runs),
            "reorder_lod_tensor_by_rank": wall_us(lambda: torch.index_select(mt, 0, order_t), args.runs),
            "shrink_rnn_memory": wall_us(lambda: mt[:40].clone(), args.runs),
            "write_to_array": wall_us(lambda: mt.clone(), args.runs),
            "read_from_array": wall_us(lambda: mt.clone(), args.runs),
            "tensor_array_to_tensor": wall_us(lambda: torch.stack([mt] * steps), args.runs),
        }
    print("batch: 64 sequences of 5-100 steps, [%d, %d] float32; %d threads" % (sum(lens), width, args.threads))
    print("%-28s %14s %14s %8s" % ("op (µs, fastest of %d)" % args.runs, "fluidlite", "torch", "ratio"))
    for n in names:
        ref = theirs.get(n)
        print("%-28s %14.1f %14s %8s" % (n, ours[n], "-" if ref is None else "%.1f" % ref,
                                         "-" if ref is None else "%.2fx" % (ref / ours[n])))


if __name__ == "__main__":
    main()
