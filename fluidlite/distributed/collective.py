"""The collective program rewrite (Fluid's GradAllReduce transpiler, with fuse_all_reduce_ops): what turns a
single-process training program into the same program for each of P ranks.

Main program, after ``append_backward`` and before the updates:
- ``scale`` the loss gradient seed by 1/P, so that the sum over ranks of the gradients is the gradient of the
  mean loss over the global batch (P x the rank's batch): exactly what one process computes on the whole batch;
- a ``c_allreduce_sum`` per *bucket*: the gradients, in the order backward finishes them, grouped into buckets of
  up to ``fuse_grad_size_in_MB`` (one buffer, one collective each), each inserted right after the op that writes
  the bucket's last gradient, so the bucket travels on the comm stream while backward computes the next ones;
- a ``c_sync_comm_stream`` before the first op that reads a gradient still in flight (the clip or the update).

Startup program: a ``c_broadcast`` from rank 0 of every parameter (one per dtype), then ``c_sync_comm_stream``: all
ranks start from rank 0's initial values whatever their seeds.

``check_same_program`` compares the ranks' parameters (names, shapes, dtypes) and op lists once, at start-up, and
names the first difference: a rank that built another model fails there, not in a collective later.
"""
import hashlib

import numpy as np

from .. import core
from ..framework import OpRole, dtype_to_numpy, grad_var_name
from . import comm

__all__ = ["transpile", "insert_grad_allreduce", "insert_param_broadcast", "check_same_program",
           "DEFAULT_FUSE_GRAD_SIZE_MB", "COLLECTIVE_OPS"]

# Bucket size when the strategy does not set one. Fluid's 32 MB makes a small model's whole gradient one bucket,
# sent only when backward is over; 4 MB buckets leave resnet_small several to overlap with backward, and at the
# measured ~6 us per collective (docs/distributed.md) smaller buckets cost nothing worth counting.
DEFAULT_FUSE_GRAD_SIZE_MB = 4.0

COLLECTIVE_OPS = frozenset(["c_allreduce_sum", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod",
                            "c_broadcast", "c_allgather", "c_reducescatter", "c_sync_comm_stream",
                            "c_sync_calc_stream", "barrier"])


def _nbytes(var):
    n = 1
    for d in var.shape:
        n *= max(int(d), 1)
    return n * np.dtype(dtype_to_numpy(var.dtype)).itemsize


def _is_sparse(var):
    return int(var.type) == int(core.VarDesc.VarType.SELECTED_ROWS)


def _already_transpiled(block):
    return any(op.type == "c_allreduce_sum" for op in block.ops)


def _is_async_allreduce(op):
    return op.type == "c_allreduce_sum" and not (op.has_attr("use_calc_stream") and op.attr("use_calc_stream"))


def _params_grads_of(block):
    """(param, grad) pairs from the op_role_var marks append_backward leaves on each gradient's last writer."""
    pairs, seen = [], set()
    for op in block.ops:
        if not op.has_attr("op_role_var"):
            continue
        rv = list(op.attr("op_role_var"))
        for i in range(0, len(rv) - 1, 2):
            p, g = rv[i], rv[i + 1]
            if g in seen or not block.has_var(p) or not block.has_var(g):
                continue
            if int(op.attr("op_role")) & int(OpRole.Optimize):
                continue
            seen.add(g)
            pairs.append((block.var(p), block.var(g)))
    return pairs


def _last_writer(block, names):
    """{name: index of the last op in block writing it} for the given names."""
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            if n in names:
                last[n] = i
    return last


def _buckets(grads, last, limit_bytes):
    """Gradients in the order backward finishes them, grouped: a bucket closes when it reaches `limit_bytes` (0:
    one gradient per bucket) or the dtype changes. Returns [(insert_after_index, [grad vars])]."""
    order = sorted(grads, key=lambda g: (last[g.name], g.name))
    out, cur, cur_bytes = [], [], 0
    for g in order:
        if cur and (limit_bytes <= 0 or cur_bytes >= limit_bytes or cur[-1].dtype != g.dtype):
            out.append(cur)
            cur, cur_bytes = [], 0
        cur.append(g)
        cur_bytes += _nbytes(g)
    if cur:
        out.append(cur)
    return [(max(last[g.name] for g in b), b) for b in out]


def _loss_seed_index(block, loss_name):
    """The op that seeds loss@GRAD (append_backward's fill_constant, op_role Backward|Loss), or None."""
    want = grad_var_name(loss_name) if loss_name else None
    for i, op in enumerate(block.ops):
        role = int(op.attr("op_role")) if op.has_attr("op_role") else 0
        if role & int(OpRole.Loss) and role & int(OpRole.Backward):
            if want is None or want in op.output_arg_names:
                return i
    return None


def insert_grad_allreduce(program, nranks, ring_id=0, fuse=True, fuse_grad_size_mb=None, loss_name=None,
                          params_grads=None):
    """Rewrites `program` (its global block) for data-parallel training over `nranks` ranks; see the module doc.
    Returns the buckets: [[grad name, ...], ...] in the order they are sent."""
    block = program.global_block()
    if _already_transpiled(block):
        raise ValueError("fleet: program %s already has the collective gradient ops (it was transpiled once: "
                         "minimize/transpile each program only once)" % getattr(program, "_name", "<program>"))
    pairs = params_grads if params_grads is not None else _params_grads_of(block)
    grads = [g for p, g in pairs if g is not None and getattr(p, "trainable", True)]
    for g in grads:
        if _is_sparse(g):
            raise NotImplementedError(
                "fleet: the gradient '%s' is sparse (a SelectedRows, from an embedding with is_sparse=True); "
                "collective training allreduces dense gradients: build that layer with is_sparse=False" % g.name)
    if not grads:
        raise ValueError("fleet: the program has no parameter gradients to allreduce: call minimize (or "
                         "append_backward) on the loss before transpiling")
    last = _last_writer(block, {g.name for g in grads})
    missing = [g.name for g in grads if g.name not in last]
    if missing:
        raise ValueError("fleet: no op writes the gradient(s) %s in the main block" % ", ".join(missing[:4]))
    mb = DEFAULT_FUSE_GRAD_SIZE_MB if fuse_grad_size_mb is None else float(fuse_grad_size_mb)
    if fuse and not mb > 0:
        raise ValueError("fleet: fuse_grad_size_in_MB must be > 0, got %r" % (fuse_grad_size_mb,))
    buckets = _buckets(grads, last, int(mb * (1 << 20)) if fuse else 0)

    seed = _loss_seed_index(block, loss_name)
    scale_after_sync = seed is None and nranks > 1
    # Insert from the back so that earlier indices stay valid.
    inserts = [(after, "allreduce", b) for after, b in buckets]
    if seed is not None and nranks > 1:
        inserts.append((seed, "scale", None))
    for after, kind, bucket in sorted(inserts, key=lambda t: (t[0], t[1] == "scale"), reverse=True):
        if kind == "scale":
            loss_grad = block.ops[seed].output_arg_names[0]
            block._insert_op(after + 1, type="scale", inputs={"X": [loss_grad]}, outputs={"Out": [loss_grad]},
                             attrs={"scale": 1.0 / nranks, "op_role": int(OpRole.Backward)})
        else:
            names = [g.name for g in bucket]
            block._insert_op(after + 1, type="c_allreduce_sum", inputs={"X": names}, outputs={"Out": names},
                             attrs={"ring_id": ring_id, "use_calc_stream": False, "op_role": int(OpRole.Backward)})
    _insert_syncs(block, ring_id, scale_after_sync, nranks)
    return [[g.name for g in b] for _, b in buckets]


def _insert_syncs(block, ring_id, scale_after_sync, nranks):
    """A c_sync_comm_stream before the first op that touches a gradient still in flight (and at the end if one
    is left); with `scale_after_sync` (no loss seed to scale) the synced gradients are scaled by 1/nranks there."""
    in_flight, i = set(), 0
    while i < len(block.ops):
        op = block.ops[i]
        if _is_async_allreduce(op):
            in_flight.update(op.input_arg_names)
            i += 1
            continue
        if in_flight and in_flight.intersection(op.input_arg_names + op.output_arg_names):
            i = _sync_at(block, i, sorted(in_flight), ring_id, scale_after_sync, nranks)
            in_flight.clear()
            continue
        i += 1
    if in_flight:
        _sync_at(block, len(block.ops), sorted(in_flight), ring_id, scale_after_sync, nranks)


def _sync_at(block, index, names, ring_id, scale_after_sync, nranks):
    block._insert_op(index, type="c_sync_comm_stream", inputs={"X": names}, outputs={"Out": names},
                     attrs={"ring_id": ring_id, "op_role": int(OpRole.Backward)})
    index += 1
    if scale_after_sync:
        for n in names:
            block._insert_op(index, type="scale", inputs={"X": [n]}, outputs={"Out": [n]},
                             attrs={"scale": 1.0 / nranks, "op_role": int(OpRole.Backward)})
            index += 1
    return index


def insert_param_broadcast(startup_program, main_program, ring_id=0, root=0):
    """Appends to `startup_program` a c_broadcast from `root` of every parameter of `main_program` that the
    startup program creates (one op per dtype), then a c_sync_comm_stream."""
    sblock = startup_program.global_block()
    created = set()
    for op in sblock.ops:
        created.update(op.output_arg_names)
    by_dtype = {}
    for p in main_program.global_block().all_parameters():
        if p.name in created and sblock.has_var(p.name):
            by_dtype.setdefault(int(p.dtype), []).append(p.name)
    names = []
    for dtype in sorted(by_dtype):
        group = sorted(by_dtype[dtype])
        sblock.append_op(type="c_broadcast", inputs={"X": group}, outputs={"Out": group},
                         attrs={"ring_id": ring_id, "root": root, "use_calc_stream": False,
                                "op_role": int(OpRole.Forward)})
        names += group
    if names:
        sblock.append_op(type="c_sync_comm_stream", inputs={"X": names}, outputs={"Out": names},
                         attrs={"ring_id": ring_id, "op_role": int(OpRole.Forward)})
    return names


def _signature(program):
    """(parameters as (name, shape, dtype), digest of the op types of every block) of `program`."""
    params = sorted((p.name, tuple(int(d) for d in p.shape), str(dtype_to_numpy(p.dtype)))
                    for p in program.global_block().all_parameters())
    h = hashlib.sha1()
    for b in program.blocks:
        for op in b.ops:
            h.update(op.type.encode() + b";")
        h.update(b"|")
    return params, h.hexdigest()


def check_same_program(program, what="main program"):
    """Every rank must train the same model: compares the ranks' parameters and op lists and raises naming the
    first rank and parameter that differ from rank 0's. A collective itself, so every rank must call it."""
    mine = _signature(program)
    all_sigs = comm.allgather_object(mine, "fleet: the start-up program check")
    ref_params, ref_ops = all_sigs[0]
    for r, (params, ops) in enumerate(all_sigs):
        if params != ref_params:
            a, b = dict((n, (s, d)) for n, s, d in ref_params), dict((n, (s, d)) for n, s, d in params)
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    def desc(v):
                        return "missing" if v is None else "shape %s, %s" % (list(v[0]), v[1])
                    raise ValueError("fleet: the ranks build different models: parameter '%s' of the %s is %s on "
                                     "rank 0 but %s on rank %d" % (name, what, desc(a.get(name)), desc(b.get(name)), r))
        if ops != ref_ops:
            raise ValueError("fleet: the ranks build different programs: the ops of the %s on rank %d differ from "
                             "rank 0's (same parameters, other ops)" % (what, r))


def transpile(main_program, startup_program, nranks, ring_id=0, fuse=True, fuse_grad_size_mb=None, loss_name=None,
              params_grads=None, check=True):
    """The whole rewrite: start-up check, gradient allreduce in `main_program`, parameter broadcast in
    `startup_program`. Returns the gradient buckets."""
    if check and comm.is_initialized():
        check_same_program(main_program)
    buckets = insert_grad_allreduce(main_program, nranks, ring_id, fuse, fuse_grad_size_mb, loss_name, params_grads)
    if startup_program is not None:
        insert_param_broadcast(startup_program, main_program, ring_id)
    return buckets
