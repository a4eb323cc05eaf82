"""The tuning advisor: ``fluid.profiler.advise()`` reads a profile plus the programs it ran and returns ranked
findings (what costs time, the measured share of the step, the estimated saving, the evidence, the fix).

Every detector reads one ``_Profile``: the events, their self times and parsed args, the steps (one
``Executor.run`` event per exe.run) and the op instances (op events grouped by block and index, with the variables they
read and write). Estimates are models fed with the profile's own numbers: a fused op streams its external inputs
and outputs once at the fastest rate the unfused ops reached, keeps their arithmetic, costs one op's dispatch, and
each op call it removes also saves the executor's measured gap per op; removable work (copies, re-preparation,
Python time between runs) saves its measured time.
"""
import collections
import json
import re

from ._session import _state, step_event_indices
from ._session import events as _session_events
from .gpu import gpu_summary
from .report import GAP_PARENTS, _communication, pool_wait_ns, preempted, self_times

__all__ = ["advise", "Advice", "Finding", "format_findings", "KINDS"]

KINDS = ("fusable_chain", "duplicate_reduction", "gradient_sums", "copies", "per_run_setup", "dispatch_bound",
         "thread_utilisation", "preempted", "python_time", "exposed_communication", "hotspot")

SIGNIFICANT_SHARE = 0.05  # below this share of the step a finding is reported but the hottest kernel leads
MIN_SHARE = 0.002  # findings smaller than this share of the step are not worth a line
SUB_MICROSECOND_NS = 1000
DISPATCH_BOUND_OPS_PER_STEP = 10
HEADLINE_DISPATCH_SHARE = 0.5  # a step mostly made of tiny ops and gaps: that is the headline, whatever else fuses
EXPOSED_COMM_SHARE = 0.1  # the main thread waits for the comm stream this share of the step: worth a finding

_ACTIVATIONS = {"sigmoid", "tanh", "relu", "relu6", "leaky_relu", "exp", "log", "sqrt", "rsqrt", "square", "abs",
                "softplus", "softsign", "gelu", "swish", "hard_sigmoid", "hard_swish", "elu", "selu", "brelu",
                "logsigmoid", "tanh_shrink", "softshrink", "hard_shrink", "thresholded_relu", "stanh", "reciprocal",
                "sin", "cos", "ceil", "floor", "round", "pow", "sign"}
_ELEMENTWISE = {"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max",
                "elementwise_min", "elementwise_pow", "scale", "cast", "sum"} | _ACTIVATIONS
_ELEMENTWISE |= {t + "_grad" for t in _ELEMENTWISE}
_COPY_LIKE = {"assign", "scale", "cast"}  # the notes' identity(x): a copy of its input


class Finding:
    """One finding. share: its measured time over the profiled step time (fraction); estimated_saving_ms: per
    step; evidence: dict of ops, variables, creation sites and counts; fix: what to change in fluidlite terms."""
    __slots__ = ("kind", "title", "share", "estimated_saving_ms", "evidence", "fix")

    def __init__(self, kind, title, share, estimated_saving_ms, evidence, fix):
        self.kind, self.title, self.share = kind, title, share
        self.estimated_saving_ms, self.evidence, self.fix = estimated_saving_ms, evidence, fix

    def to_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "Finding(%s: %s, share %.1f%%, saving %.3f ms/step)" % (self.kind, self.title, 100 * self.share,
                                                                    self.estimated_saving_ms)


class Advice(list):
    """advise()'s result: the ranked Findings (a list) plus the profile's figures: steps (exe.run calls),
    step_ms (profiled time per step), events (how many were analysed). str() is the printed text."""

    def __init__(self, findings, steps, step_ms, events):
        super().__init__(findings)
        self.steps, self.step_ms, self.events = steps, step_ms, events

    def __str__(self):
        return format_findings(self)


_DIMS = re.compile(r"([^\s,\[\]()]+)\[([^\]]*)\]")


def _parse_dims(text):
    """'X[32, 128], Y[128, 512]' -> [('X', (32, 128)), ('Y', (128, 512))] (LoD suffixes ignored)."""
    out = []
    for slot, dims in _DIMS.findall(text or ""):
        try:
            out.append((slot, tuple(int(d) for d in dims.split(",") if d.strip())))
        except ValueError:
            continue
    return out


def _numel(dims):
    n = 1
    for d in dims:
        n *= max(d, 0)
    return n


def _op_key(block, op_type, inputs, outputs):
    """An op's identity in events and programs alike: the event's index counts the feed and fetch ops the executor
    adds, the program's does not; block, type and variables match in both."""
    return (block, op_type, frozenset(inputs), frozenset(outputs))


class _OpNode:
    """One op of a program (block, type, variables: _op_key) aggregated over its calls in the profile."""
    __slots__ = ("key", "type", "block", "index", "calls", "total_ns", "min_ns", "streamed", "inputs", "outputs",
                 "var_numel", "site", "first")

    def __init__(self, key, e, a):
        self.key, self.type, self.block, self.index = key, e["name"], a.get("block", 0), a.get("index", -1)
        self.calls, self.total_ns, self.min_ns, self.streamed = 0, 0, None, 0
        self.inputs, self.outputs = a.get("input_vars") or {}, a.get("output_vars") or {}
        self.site, self.first, self.var_numel = a.get("site"), e, {}
        for side, slots in ((a.get("inputs"), self.inputs), (a.get("outputs"), self.outputs)):
            seen = collections.Counter()
            for slot, dims in _parse_dims(side):  # the k-th dims of a slot belong to its k-th variable
                names = slots.get(slot) or []
                if seen[slot] < len(names):
                    self.var_numel[names[seen[slot]]] = _numel(dims)
                seen[slot] += 1

    def in_vars(self):
        return [v for names in self.inputs.values() for v in names]

    def out_vars(self):
        return [v for names in self.outputs.values() for v in names]


class _Profile:
    """The analysed profile: events, self times, parsed args, steps, op instances and the programs."""

    def __init__(self, evs, programs, from_session):
        self.evs = evs
        self.selfs = self_times(evs)
        self._args = {}
        self.args = [self._parse(e) for e in evs]
        # Steps: the exe.run calls (_session.step_event_indices: Executor.run, the whole call).
        self.runs = step_event_indices(evs)
        self.n_steps = max(len(self.runs), 1)
        self.run_ns = sum(evs[i]["dur_ns"] for i in self.runs)
        self.from_session = from_session
        # The profiled time: from the first recorded exe.run's start to the last one's end (the Python-side
        # Executor.run events; start/stop_profiler's own work, e.g. dropping a previous profile, is not the step's),
        # else the runs' events. Only for the session's own profile, and not under a schedule (its windows leave steps
        # unrecorded).
        self.span_ns = None
        self.python_runs = [evs[i] for i in self.runs if evs[i]["name"] == "Executor.run"]
        if self.python_runs and from_session and _state.schedule is None:
            self.span_ns = max(e["end_ns"] for e in self.python_runs) - min(e["start_ns"] for e in self.python_runs)
        if self.span_ns:
            self.wall_ns = self.span_ns
        elif self.run_ns:
            self.wall_ns = self.run_ns
        else:
            self.wall_ns = max(e["end_ns"] for e in evs) - min(e["start_ns"] for e in evs)
        self.wall_ns = max(self.wall_ns, 1)
        self.programs = programs
        self._program_ops = {}  # (block, index, type) -> (program, op)
        for program in programs:
            for b in range(program.num_blocks):
                for op in program.block(b).ops:
                    key = _op_key(b, op.type, op.input_arg_names, op.output_arg_names)
                    self._program_ops.setdefault(key, (program, op))
        self.nodes = {}
        per_args = {}  # (name, args text) -> (node, elements streamed): an op's args repeat on every call
        for e, a in zip(evs, self.args):
            if e["category"] != "Operator" or "input_vars" not in a:
                continue
            hit = per_args.get((e["name"], e["args"]))
            if hit is None:
                ins, outs = a.get("input_vars") or {}, a.get("output_vars") or {}
                key = _op_key(a.get("block", 0), e["name"], [v for n in ins.values() for v in n],
                              [v for n in outs.values() for v in n])
                node = self.nodes.get(key)
                if node is None:
                    node = self.nodes[key] = _OpNode(key, e, a)
                hit = per_args[(e["name"], e["args"])] = (node, self._event_numel(e, a))
            node, numel = hit
            d = e["dur_ns"]
            node.calls += 1
            node.total_ns += d
            node.min_ns = d if node.min_ns is None or d < node.min_ns else node.min_ns
            node.streamed += numel
        self._consumers = None
        # The executor's per-op floor: the cheapest op call of the profile (an op that does next to nothing).
        self.dispatch_ns = min((n.min_ns for n in self.nodes.values()), default=0)
        # And the executor's work between ops (the gap rows: freeing temporaries, log checks), per op it runs: an op
        # that a fusion removes saves its share of that too.
        gap_ns = sum(self.selfs[i] for i, e in enumerate(evs) if e["name"] in GAP_PARENTS)
        gap_ops = sum(1 for e in evs if e["category"] == "Operator" and e["parent"] >= 0
                      and evs[e["parent"]]["name"] in GAP_PARENTS)
        self.gap_per_op_ns = gap_ns / gap_ops if gap_ops else 0.0

    def _parse(self, e):
        text = e.get("args")
        if not text:
            return {}
        a = self._args.get(text)
        if a is None:
            try:
                a = json.loads("{" + text + "}")
            except ValueError as err:
                raise ValueError("advise: event %r has malformed args %r: %s" % (e["name"], text[:80], err)) from None
            self._args[text] = a
        return a

    def _event_numel(self, e, a):
        key = ("numel", e.get("args"))
        n = self._args.get(key)
        if n is None:
            n = self._args[key] = sum(_numel(d) for side in ("inputs", "outputs") for _, d in _parse_dims(a.get(side)))
        return n

    def per_step_ms(self, ns):
        return ns / self.n_steps / 1e6

    def share(self, ns):
        return ns / self.wall_ns

    def program_op(self, node):
        return self._program_ops.get(node.key, (None, None))[1]

    def itemsize(self, var):
        """Bytes per element of `var` (its declared dtype in a program that ran; float32 when unknown)."""
        for program in self.programs:
            v = program.global_block()._find_var_recursive(var)
            if v is None:
                for b in range(1, program.num_blocks):
                    v = program.block(b).vars.get(var)
                    if v is not None:
                        break
            if v is not None:
                try:
                    from ..framework import dtype_to_numpy
                    return dtype_to_numpy(v.dtype).itemsize
                except (TypeError, ValueError, KeyError):
                    return 4
        return 4

    def consumers(self):
        """Variable -> keys of the ops that read it: from the programs (ops that did not run count too), else from
        the op events."""
        if self._consumers is None:
            cons = collections.defaultdict(set)
            if self._program_ops:
                for key, (_, op) in self._program_ops.items():
                    for v in op.input_arg_names:
                        cons[v].add(key)
            for node in self.nodes.values():
                for v in node.in_vars():
                    cons[v].add(node.key)
            for e, a in zip(self.evs, self.args):  # a fetched variable has a reader outside the program
                if e["category"] == "Memcpy" and a.get("cause") == "fetch" and a.get("src"):
                    cons[a["src"]].add(("fetch",))
            self._consumers = cons
        return self._consumers

    def producers(self):
        prod = collections.defaultdict(set)
        for node in self.nodes.values():
            for v in node.out_vars():
                prod[v].add(node.key)
        return prod

    def is_parameter(self, var):
        for program in self.programs:
            v = program.global_block().vars.get(var)
            if v is not None:
                return bool(v.persistable)
        return False

    def children(self):
        kids = [[] for _ in self.evs]
        for i, e in enumerate(self.evs):
            if e["parent"] >= 0:
                kids[e["parent"]].append(i)
        return kids


def _ms(ns):
    return round(ns / 1e6, 4)


def _type_counts(nodes):
    return dict(collections.Counter(n.type for n in sorted(nodes, key=lambda n: (n.block, n.index))))


def _sites(nodes):
    # "<frozen runpy>" and the like: the program was built by code run as a module, no user line to name
    return sorted({n.site for n in nodes if n.site and not n.site.startswith("<frozen")})


def _fused_estimate(nodes, external_numel_calls, fused_calls, itemsize, dispatch_ns):
    """(saving_ns, fused_ns, GB/s) of replacing `nodes` by `fused_calls` calls of one fused op.

    Each op's time is a dispatch (`dispatch_ns`, the profile's cheapest op call) plus its work; the fastest
    streaming rate an op type among them reached (bytes over work) is what moving data costs. A fused op streams
    the `external_numel_calls` elements once at that rate, keeps every op's work beyond its own streaming (the
    arithmetic: exp, tanh, ...) and is dispatched once per fused call."""
    total_ns = sum(n.total_ns for n in nodes)
    by_type = collections.defaultdict(lambda: [0, 0])
    for n in nodes:
        by_type[n.type][0] += n.streamed * itemsize
        by_type[n.type][1] += max(n.total_ns - n.calls * dispatch_ns, 0)
    bw = max((b / w for b, w in by_type.values() if w > 0), default=0.0)  # bytes per ns = GB/s
    if bw <= 0:
        return 0.0, total_ns, 0.0
    compute_ns = sum(max(w - b / bw, 0.0) for b, w in by_type.values())
    fused_ns = external_numel_calls * itemsize / bw + compute_ns + fused_calls * dispatch_ns
    return total_ns - fused_ns, fused_ns, bw


# -- 1. fusable elementwise / activation chains --------------------------------------------------------------

def _fusable_chains(p):
    consumers, producers = p.consumers(), p.producers()
    nodes = p.nodes

    def elementwise(key):
        return len(key) > 1 and key[1] in _ELEMENTWISE

    candidates = {k for k in nodes if elementwise(k)}
    # split / concat join a chain only when the fused op can absorb them: every output of the split feeds the
    # chain (the fused op reads the split's input in place), every input of the concat comes from it.
    for k, n in nodes.items():
        if n.type == "split" and n.out_vars() and all(
                consumers.get(v) and all(elementwise(c) for c in consumers[v]) for v in n.out_vars()):
            candidates.add(k)
        elif n.type == "concat" and n.in_vars() and all(
                producers.get(v) and all(elementwise(c) for c in producers[v]) for v in n.in_vars()):
            candidates.add(k)
    parent = {k: k for k in candidates}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for v, prods in producers.items():
        cons = consumers.get(v)
        if not cons or not all(c in candidates for c in cons):
            continue  # an intermediate with another consumer must stay materialised
        for a in prods:
            if a not in candidates:
                continue
            for c in cons:
                if c in nodes:
                    parent[find(a)] = find(c)
    groups = collections.defaultdict(list)
    for k in candidates:
        groups[find(k)].append(nodes[k])
    findings = []
    for comp in groups.values():
        if len(comp) < 2:
            continue
        est = _group_estimate(comp, p, consumers, producers)
        saving, fused_ns, bw, total, gaps_saved = (est[k] for k in ("saving", "fused", "bw", "total", "gaps_saved"))
        ext_in, ext_out, inner, calls_per_block = est["ext_in"], est["ext_out"], est["inner"], est["calls_per_block"]
        # A hand-written LSTM cell: the fix offered today (the lstm_unit op on the gates) replaces only the cell's
        # part of the chain, so that part's estimate is the finding's saving; the whole chain's (what a general
        # fusion pass would save, issue 18) stays in the evidence.
        whole_saving, cell = saving, _lstm_cell_part(comp, consumers)
        if cell:
            cell_est = _group_estimate(cell, p, consumers, producers)
            saving = cell_est["saving"]
        if saving <= 0:
            continue
        types = _type_counts(comp)
        findings.append(Finding(
            "fusable_chain",
            "%d elementwise/activation ops in one fusable chain (%s)" % (len(comp), _short_types(types)),
            p.share(total), p.per_step_ms(saving),
            {"ops": types, "blocks": sorted(calls_per_block), "calls_per_step": sum(n.calls for n in comp) / p.n_steps,
             "inputs": sorted(ext_in), "outputs": sorted(ext_out), "intermediates": len(inner),
             "sites": _sites(comp), "chain_ms_per_step": p.per_step_ms(total),
             "fused_ms_per_step": p.per_step_ms(fused_ns), "gaps_saved_ms_per_step": p.per_step_ms(gaps_saved),
             "bandwidth_gb_s": round(bw, 3), "whole_chain_saving_ms_per_step": p.per_step_ms(whole_saving),
             "fix_replaces_ops": len(cell) if cell else len(comp)},
            _chain_fix(types)))
    return findings


def _group_estimate(group, p, consumers, producers):
    """The fused-op estimate of replacing the ops `group` by one fused op per block (one call per call of the
    group's most-called op there): its external inputs and outputs, the saving (the ops' time less the fused op's,
    plus the executor's gaps of the removed calls) and the figures behind it."""
    keys = {n.key for n in group}
    ext_in, ext_out, inner = {}, {}, set()
    for n in group:
        for v in n.in_vars():
            if not (producers.get(v, set()) & keys):
                ext_in[v] = max(ext_in.get(v, 0), n.var_numel.get(v, 0) * n.calls)
        for v in n.out_vars():
            cons = consumers.get(v, set())
            if cons and cons <= keys:
                inner.add(v)
            else:
                ext_out[v] = max(ext_out.get(v, 0), n.var_numel.get(v, 0) * n.calls)
    calls_per_block = collections.defaultdict(int)
    for n in group:
        calls_per_block[n.block] = max(calls_per_block[n.block], n.calls)
    fused_calls = sum(calls_per_block.values())
    itemsize = p.itemsize(next(iter(ext_in), "")) if ext_in else 4
    saving, fused_ns, bw = _fused_estimate(group, sum(ext_in.values()) + sum(ext_out.values()), fused_calls,
                                           itemsize, p.dispatch_ns)
    gaps_saved = max(sum(n.calls for n in group) - fused_calls, 0) * p.gap_per_op_ns
    return {"saving": saving + gaps_saved, "fused": fused_ns, "bw": bw, "total": sum(n.total_ns for n in group),
            "gaps_saved": gaps_saved, "ext_in": ext_in, "ext_out": ext_out, "inner": inner,
            "calls_per_block": calls_per_block}


def _grad_base(v):
    return v.split("@GRAD", 1)[0]


def _lstm_cell_part(comp, consumers):
    """The ops of a chain that Fluid's lstm_unit op computes: forward, the ops downstream of the split into the four
    gates (in the split's block); backward, the ops that write only gradients of those ops' inputs (the gates, the
    previous cell state, the intermediates). [] when the chain has no such split or is not an LSTM cell."""
    if not (sum(1 for n in comp if n.type == "sigmoid") >= 3 and sum(1 for n in comp if n.type == "tanh") >= 2):
        return []
    by_key = {n.key: n for n in comp}
    splits = [n for n in comp if n.type == "split" and len(n.out_vars()) == 4]
    if len(splits) != 1:
        return []
    block = splits[0].block
    forward, todo = {}, [splits[0]]
    while todo:
        n = todo.pop()
        if n.key in forward:
            continue
        forward[n.key] = n
        for v in n.out_vars():
            todo += [by_key[c] for c in consumers.get(v, ()) if c in by_key and by_key[c].block == block]
    inputs = {v for n in forward.values() for v in n.in_vars()}
    backward = [n for n in comp if n.block != block and n.out_vars() and
                all("@GRAD" in v and _grad_base(v) in inputs for v in n.out_vars())]
    return list(forward.values()) + backward


def _short_types(types):
    return ", ".join("%s x%d" % (t, c) if c > 1 else t for t, c in list(types.items())[:6]) + \
        (", ..." if len(types) > 6 else "")


def _chain_fix(types):
    sig, tanh = types.get("sigmoid", 0), types.get("tanh", 0)
    if sig >= 3 and tanh >= 2:
        return ("this is a hand-written LSTM cell: keep the fc that makes the gates and append the fused lstm_unit op "
                "on them (gates i, f, o, g: one op forward, one backward; fluidlite.bench.models.lstm.lstm_unit_cell "
                "shows how), or use fluid.layers.lstm_unit(x_t, h_prev, c_prev) (Fluid's layer: concat + one fc + "
                "lstm_unit) or fluid.layers.dynamic_lstm over the whole sequence")
    if sig >= 2 and tanh >= 1:
        return ("this looks like a hand-written GRU cell: use fluid.layers.gru_unit (one fused op per step) or "
                "fluid.layers.dynamic_gru over the whole sequence")
    return ("the fuse_elementwise_chains pass fuses such chains into one fused_elementwise op: it is on by default "
            "(BuildStrategy.fuse_elementwise_chains), so turn it back on where the strategy or "
            "FLUIDLITE_DISABLE_PASSES turned it off; a chain it leaves unfused has ops or shapes it does not take "
            "(docs/architecture.md, 'Elementwise fusion'): use a fused layer where one exists")


# -- 2. several reductions over the same input and axes ------------------------------------------------------

def _duplicate_reductions(p):
    if not p.programs:
        return []
    producer_node = {}
    for n in p.nodes.values():
        for v in n.out_vars():
            producer_node.setdefault((n.block, v), n)

    def root(block, v, path):
        """The variable `v` is an elementwise function of (through copies and elementwise ops whose inputs all
        have one root); `path` collects the copies met on the way (a fused reduction drops them)."""
        for _ in range(32):
            n = producer_node.get((block, v))
            if n is None or not (n.type in _COPY_LIKE or n.type in _ELEMENTWISE):
                return v
            roots = {root(block, u, path) for u in n.in_vars()}
            if len(roots) != 1:
                return v
            if n.type in _COPY_LIKE:
                path.add(n.key)
            v = roots.pop()
        return v

    groups = collections.defaultdict(list)
    copies = collections.defaultdict(set)
    for n in p.nodes.values():
        if not n.type.startswith("reduce_") or n.type.endswith("_grad"):
            continue
        op = p.program_op(n)
        if op is None or not n.in_vars():
            continue
        attrs = tuple(repr(op.attr(a)) if op.has_attr(a) else None for a in ("dim", "keep_dim", "reduce_all"))
        path = set()
        key = (n.block, n.type, attrs, root(n.block, n.in_vars()[0], path))
        groups[key].append(n)
        copies[key] |= path
    findings = []
    for key, reds in groups.items():
        if len(reds) < 2:
            continue
        red_ns = sum(n.total_ns for n in reds)
        copy_ns = sum(p.nodes[k].total_ns for k in copies[key])
        saving = red_ns - max(n.total_ns for n in reds) + copy_ns
        block, rtype, attrs, src = key
        findings.append(Finding(
            "duplicate_reduction",
            "%d %s ops with the same axes over %s (or elementwise functions of it)" % (len(reds), rtype, src),
            p.share(red_ns + copy_ns), p.per_step_ms(saving),
            {"ops": [n.type for n in reds], "input": src, "reduced": [n.in_vars()[0] for n in reds],
             "outputs": [n.out_vars()[0] for n in reds], "dim": attrs[0], "block": block,
             "copies": sorted(p.nodes[k].type + ":" + p.nodes[k].out_vars()[0] for k in copies[key]),
             "sites": _sites(reds), "calls_per_step": sum(n.calls for n in reds) / p.n_steps},
            "compute the %ss in one pass over %s: the fuse_reductions pass (BuildStrategy.fuse_reductions, on by "
            "default; was it turned off, or FLUIDLITE_DISABLE_PASSES set?) makes one fused_reduce of reductions of "
            "x, x * x (through identity copies), (x - mean)^2 and exp(x - max) whose intermediates nothing else reads; "
            "for other functions of x, reduce the stacked operands once, e.g. layers.%s(layers.stack([x, f(x)]), "
            "dim=[d + 1])" % (rtype, src, rtype)))
    return findings


# -- 3. many sum ops per parameter gradient ------------------------------------------------------------------

def _gradient_sums(p):
    per_param = collections.defaultdict(list)
    for n in p.nodes.values():
        if n.type != "sum" or not n.out_vars():
            continue
        base = n.out_vars()[0].split("@GRAD")[0]
        if "@GRAD" in n.out_vars()[0] and p.is_parameter(base):
            per_param[base].append(n)
    # Kernel-internal sums (no variables: the step gradients of the parameters a recurrent_grad adds per step)
    # count for their owner op.
    internal = {}
    for e, a in zip(p.evs, p.args):
        if e["name"] == "sum" and e["category"] == "Operator" and "input_vars" not in a and e["parent"] >= 0:
            r = internal.setdefault(p.evs[e["parent"]]["name"].split("::")[0], [0, 0, e["dur_ns"]])
            r[0] += 1
            r[1] += e["dur_ns"]
            r[2] = min(r[2], e["dur_ns"])
    findings = []
    sums = [n for ns in per_param.values() for n in ns]
    calls = sum(n.calls for n in sums)
    if sums and calls / p.n_steps > 1.5 * len(per_param):
        saving = 0.0
        for param, nodes in per_param.items():
            k = sum(n.calls for n in nodes)
            inputs = sum(len(n.in_vars()) * n.calls for n in nodes)
            # One n-ary sum per step reads each partial once (a sum's output feeding the next sum is no partial)
            # and writes the gradient once.
            partials = inputs - (k - p.n_steps)
            numel = max(n.var_numel.get(n.out_vars()[0], 0) for n in nodes)
            saving += _fused_estimate(nodes, (partials + p.n_steps) * numel, p.n_steps, p.itemsize(param),
                                      p.dispatch_ns)[0]
        total = sum(n.total_ns for n in sums)
        worst = max(per_param, key=lambda k: sum(n.calls for n in per_param[k]))
        findings.append(Finding(
            "gradient_sums",
            "%.0f sum ops per step accumulate the gradients of %d parameters" % (calls / p.n_steps, len(per_param)),
            p.share(total), p.per_step_ms(max(saving, 0.0)),
            {"parameters": {k: sum(n.calls for n in v) / p.n_steps for k, v in sorted(per_param.items())},
             "most_summed": worst, "sites": _sites(sums), "sum_ms_per_step": p.per_step_ms(total)},
            _sum_fix(None)))
    loop_steps = collections.Counter(e["name"].split("::")[0] for e in p.evs if e["name"].endswith("::step"))
    for owner, (calls, total, cheapest) in internal.items():
        k = loop_steps.get(owner, 0) / p.n_steps  # sums per parameter per run: one per loop step
        if k < 2:
            continue
        # No variables, no shapes: count operands. k in-place binary sums stream 3k operands; one n-ary sum of the
        # same partials reads k + 1 and writes 1 at the same bandwidth, and is dispatched once, not k times.
        fused_calls = calls / k
        saving = total - (total * (k + 2) / (3 * k) + fused_calls * cheapest)
        # The program cannot change how the loop op accumulates: no saving for the user to claim; what one n-ary
        # sum in the runtime would save is evidence.
        findings.append(Finding(
            "gradient_sums", "%s adds step gradients with %.0f sums per step" % (owner, calls / p.n_steps),
            p.share(total), 0.0,
            {"op": owner, "sums_per_step": calls / p.n_steps, "loop_steps_per_run": k,
             "parameters": round(calls / p.n_steps / k, 2), "sum_ms_per_step": p.per_step_ms(total),
             "runtime_n_ary_saving_ms_per_step": p.per_step_ms(max(saving, 0.0))},
            _sum_fix(owner)))
    return findings


def _sum_fix(loop_op):
    from .. import core
    if loop_op and core.get_recurrent_fluid_mode():
        return ("fluid.core.set_recurrent_fluid_mode(False): fluidlite's default recurrent mode adds each "
                "parameter's step gradients with one n-ary sum per run instead of a sum after every step")
    if loop_op:
        return ("%s adds each step's parameter gradients as the loop runs: nothing to change in the program; a "
                "whole-sequence op (fluid.layers.dynamic_lstm / dynamic_gru) has no per-step gradients" % loop_op)
    return ("a parameter read by many ops gets one gradient partial per read: read it once (one fc over the "
            "concatenated inputs, a StaticRNN parameter used once per step) or let the backward add the partials "
            "with one n-ary sum")


# -- 4. copies by cause --------------------------------------------------------------------------------------

_COPY_FIX = {
    "feed": "the feed op copies every fed tensor into its variable: feed only what the step reads, already in the "
            "variable's dtype (a conversion is another pass over it), and prepare batches off the step with a "
            "DataLoader",
    "fetch": "fetch less: only the variables you read, and the loss every N steps rather than every step",
    "step_input": "the StaticRNN copies each step's slice of its inputs: a sequence op over the whole input "
                  "(fluid.layers.dynamic_lstm / dynamic_gru) copies nothing",
    "step_output": "the StaticRNN copies each step's output into the output sequence: use dynamic_lstm / "
                   "dynamic_gru, or output only the steps you need",
    "memory_link": "memories are copied between steps: the default recurrent mode shares them "
                   "(fluid.core.set_recurrent_fluid_mode(False))",
    "gradient": "gradients are copied to accumulate: keep the default recurrent mode and avoid reading a "
                "variable from many ops",
    "array": "tensor array reads/writes copy: index the LoDTensorArray less, or use a sequence op",
    "assign": "assign-like ops (assign, select_input/output) copy their input: drop redundant layers.assign calls",
    "place_transform": "an input lives on another place than its kernel (Fluid's data transform): an op that runs "
                       "its CPU kernel in a GPU program (no CUDA kernel for the dtype, or force_cpu set) copies its "
                       "GPU inputs to the host, and the GPU ops after it copy its outputs back, on every run; keep "
                       "such state on one place (fill_constant(force_cpu=...) consistently) or give the op a CUDA "
                       "kernel",
}


def _copies(p):
    by_cause = {}
    for e, a in zip(p.evs, p.args):
        if e["category"] != "Memcpy":
            continue
        cause = a.get("cause", "unattributed")
        r = by_cause.setdefault(cause, {"count": 0, "bytes": 0, "ns": 0, "ops": collections.Counter(),
                                        "variables": collections.Counter()})
        r["count"] += 1
        r["bytes"] += max(e["bytes"], 0)
        r["ns"] += e["dur_ns"]
        if a.get("op"):
            r["ops"][a["op"]] += 1
        if a.get("src") or a.get("dst"):
            r["variables"]["%s -> %s" % (a.get("src", ""), a.get("dst", ""))] += 1
    findings = []
    for cause, r in by_cause.items():
        findings.append(Finding(
            "copies", "%.0f copies per step (%.3f MB) caused by %s" % (r["count"] / p.n_steps,
                                                                      r["bytes"] / p.n_steps / 1e6, cause),
            p.share(r["ns"]), p.per_step_ms(r["ns"]),
            {"cause": cause, "copies_per_step": r["count"] / p.n_steps, "bytes_per_step": r["bytes"] / p.n_steps,
             "ms_per_step": p.per_step_ms(r["ns"]),
             "by_op_per_step": {k: v / p.n_steps for k, v in r["ops"].most_common(5)},
             "by_variable_per_step": {k: v / p.n_steps for k, v in r["variables"].most_common(5)}},
            _COPY_FIX.get(cause, "profile with a build whose memcpy events carry their cause (fluidlite >= issue 17)"
                          if cause == "unattributed" else "see the ops and variables in the evidence")))
    return findings


# -- 5. per-run prepare, scope and variable creation ---------------------------------------------------------

_SETUP_EVENTS = ("Executor::prepare", "Executor::create_variables", "scope::new", "scope::delete")


def _per_run_setup(p):
    found = collections.defaultdict(list)
    for i, e in enumerate(p.evs):
        if e["name"] in _SETUP_EVENTS:
            found[e["name"]].append(i)
    if not found:
        return []
    # The first preparation of a program is expected; repeated ones are per-run work.
    repeated = {name: idx[1:] if name.startswith("Executor::") else idx for name, idx in found.items()}
    ns = sum(p.evs[i]["dur_ns"] for idx in repeated.values() for i in idx)
    counts = {name: len(idx) / p.n_steps for name, idx in found.items()}
    if ns <= 0 or max(len(v) for v in repeated.values()) < 2:
        return []
    feed_shapes = sorted({a.get("outputs", "") for e, a in zip(p.evs, p.args) if e["name"] == "feed"})
    evidence = {"events_per_step": counts, "programs_run": _state.programs_seen if p.programs else None,
                "feed_shapes": feed_shapes[:8], "ms_per_step": p.per_step_ms(ns)}
    from .. import core
    if core.get_recurrent_fluid_mode() and "scope::new" in found:
        fix = "fluid.core.set_recurrent_fluid_mode(False): the default mode reuses the loop's step scopes"
    elif len(found.get("Executor::prepare", ())) > 1:
        fix = ("build the Program once and reuse it with one Scope (a new Program or Scope per run prepares it "
               "again); keep the feed names and shapes fixed (pad or drop the last batch)")
    else:
        fix = "reuse the Scope across runs (a new Scope per run creates its variables again)"
    return [Finding("per_run_setup", "per-run setup: %s" % ", ".join(
        "%s x%.1f" % (k, v) for k, v in sorted(counts.items())) + " per step", p.share(ns), p.per_step_ms(ns),
        evidence, fix)]


# -- 6. dispatch-bound runs ----------------------------------------------------------------------------------

def _dispatch_bound(p, kids):
    ops = [i for i, e in enumerate(p.evs) if e["category"] == "Operator" and "input_vars" in p.args[i]] or \
        [i for i, e in enumerate(p.evs) if e["category"] == "Operator"]
    if not ops:
        return []
    short = sum(1 for i in ops if p.evs[i]["dur_ns"] < SUB_MICROSECOND_NS)
    op_set = set(ops)
    # Framework time: gaps (a parent's self time around its ops) and, with OpDetail, an op's own self time.
    gap_ns = sum(p.selfs[i] for i, k in enumerate(kids) if any(c in op_set for c in k) and i not in op_set)
    detail_ns = sum(p.selfs[i] for i in ops if any(p.evs[c]["category"] == "OperatorInner" for c in kids[i]))
    framework = gap_ns + detail_ns
    per_step = len(ops) / p.n_steps
    if per_step < DISPATCH_BOUND_OPS_PER_STEP or (short < 0.5 * len(ops) and framework < 0.2 * p.run_ns):
        return []
    durs = sorted(p.evs[i]["dur_ns"] for i in ops)
    # A sub-microsecond op is nearly all fixed cost: with the framework time it is what fewer, larger ops save.
    overhead = framework + sum(durs[:short])
    return [Finding(
        "dispatch_bound", "dispatch-bound: %.0f ops per step, %d%% of them under 1 us" % (
            per_step, round(100 * short / len(ops))),
        p.share(overhead), p.per_step_ms(overhead),
        {"ops_per_step": per_step, "sub_microsecond_ops_per_step": short / p.n_steps,
         "median_op_us": durs[len(durs) // 2] / 1e3,
         "gap_ms_per_step": p.per_step_ms(gap_ns), "op_framework_ms_per_step": p.per_step_ms(detail_ns)},
        "the step is many tiny ops: do more work per op (a larger batch, whole-sequence ops such as "
        "dynamic_lstm, fused layers) or fewer ops (drop no-op scale/assign/cast, compute constants once)")]


# -- 7. thread utilisation -----------------------------------------------------------------------------------

def _thread_utilisation(p):
    parts = collections.defaultdict(int)
    for e in p.evs:
        if e["name"] == "ThreadPool::part":
            parts[e.get("value", -1)] += e["dur_ns"]
    per_op = {}
    for e, a in zip(p.evs, p.args):
        if e["name"] != "ThreadPool::job":
            continue
        owner = p.evs[e["parent"]]["name"] if e["parent"] >= 0 else "(top level)"
        threads = int(a.get("threads", 1))
        r = per_op.setdefault(owner, {"jobs": 0, "job_ns": 0, "capacity_ns": 0, "busy_ns": 0, "threads": threads})
        r["jobs"] += 1
        r["job_ns"] += e["dur_ns"]
        r["capacity_ns"] += e["dur_ns"] * threads
        r["busy_ns"] += parts.get(e.get("value", -1), 0)
    findings = []
    for owner, r in per_op.items():
        idle = r["capacity_ns"] - r["busy_ns"]
        eff = r["busy_ns"] / r["capacity_ns"] if r["capacity_ns"] else 1.0
        if eff >= 0.75 or idle <= 0:
            continue
        findings.append(Finding(
            "thread_utilisation", "%s's parallel jobs keep %d threads %.0f%% busy" % (owner, r["threads"], 100 * eff),
            p.share(r["job_ns"]), p.per_step_ms(idle / r["threads"]),
            {"op": owner, "jobs_per_step": r["jobs"] / p.n_steps, "efficiency": round(eff, 3),
             "idle_core_ms_per_step": p.per_step_ms(idle), "job_ms_per_step": p.per_step_ms(r["job_ns"])},
            "the jobs are too small or unbalanced for %d threads: use fewer threads (fluid.core.set_num_threads, "
            "--threads) or a larger batch; a busy machine also idles the pool (check the preempted finding)"
            % r["threads"]))
    return findings


# -- 8. preempted samples ------------------------------------------------------------------------------------

def _preempted(p, kids):
    waits = pool_wait_ns(p.evs)  # waiting for the pool's workers is off the CPU by design, not preemption
    flagged = [i for i, e in enumerate(p.evs) if preempted(e, waits[i])]
    if not flagged:
        return []
    flagged_set = set(flagged)
    # The innermost preempted events: a parent of one lost the same time, counting both would double it.
    inner = [i for i in flagged if not any(c in flagged_set for c in kids[i])]
    lost = sum(p.evs[i]["dur_ns"] - p.evs[i]["cpu_ns"] for i in inner)
    names = collections.Counter(p.evs[i]["name"] for i in inner)
    worst = max(inner, key=lambda i: p.evs[i]["dur_ns"] - p.evs[i]["cpu_ns"])
    w = p.evs[worst]
    # A caveat on the profile, not a change to the program: it claims no saving (the other findings' figures carry
    # the same noise; the lost time is evidence).
    return [Finding(
        "preempted", "%d preempted samples lost %.3f ms of CPU: the profile is unreliable" % (len(inner), lost / 1e6),
        p.share(lost), 0.0,
        {"events": dict(names.most_common(8)), "lost_ms": _ms(lost), "lost_ms_per_step": p.per_step_ms(lost),
         "worst": {"name": w["name"], "dur_ms": _ms(w["dur_ns"]), "cpu_ms": _ms(w["cpu_ns"]),
                   "site": p.args[worst].get("site")}},
        "re-run on a quiet machine or with fewer threads (fluid.core.set_num_threads, --threads): the thread was "
        "off the CPU for most of these events")]


# -- 9. Python-side time outside exe.run ---------------------------------------------------------------------

def _python_time(p):
    # Between the first recorded exe.run's start and the last one's end, the time not inside an exe.run (the
    # Python-side Executor.run events), with two runs at least.
    runs = len(p.python_runs)
    if not p.span_ns or runs < 2:
        return []
    span = p.span_ns
    run_wall = sum(e["dur_ns"] for e in p.python_runs)
    outside = span - run_wall
    if outside <= 0:
        return []
    gaps = runs - 1
    users = collections.Counter()
    for e in p.evs:
        if e["category"] == "User" and e["parent"] < 0:
            users[e["name"]] += e["dur_ns"]
    return [Finding(
        "python_time", "%.3f ms per step in Python between exe.run calls" % (outside / gaps / 1e6),
        outside / span, outside / gaps / 1e6,
        {"runs": runs, "span_ms": _ms(span), "exe_run_wall_ms": _ms(run_wall), "outside_ms": _ms(outside),
         "user_ranges_ms": {k: _ms(v) for k, v in users.most_common(5)}},
        "the time between exe.run calls (data feeding, program building, fetch handling): build programs once, "
        "prepare batches ahead (fluid.io.DataLoader.from_generator), fetch only what you read; cProfile it "
        "(python -m fluidlite.bench --cprofile PATH)")]


# -- 10. exposed communication (data-parallel training) -------------------------------------------------------

def _exposed_communication(p):
    comm = _communication(p.evs)
    if not comm["ops"] or comm["exposed_ms"] <= 0:
        return []
    exposed_ns = comm["exposed_ms"] * 1e6
    if p.share(exposed_ns) < EXPOSED_COMM_SHARE:
        return []
    grads = [r for r in comm["ops"] if r["op"].startswith("c_allreduce")]
    calls = sum(r["calls"] for r in grads) / p.n_steps
    nbytes = sum(r["bytes"] for r in grads) / p.n_steps
    if calls <= 1.5:
        fix = ("the gradients travel as one bucket, sent when backward is over, so nothing overlaps: make the buckets "
               "smaller than the %.2f MB of gradients (DistributedStrategy.fuse_grad_size_in_MB, default "
               "fluidlite.distributed.collective.DEFAULT_FUSE_GRAD_SIZE_MB) so the first ones travel while backward "
               "computes the rest" % (nbytes / (1 << 20)))
    elif nbytes / calls < 64 * 1024:
        fix = ("%.0f collectives per step of %.0f KB on average: each pays the network's latency; turn "
               "fuse_all_reduce_ops on (DistributedStrategy) or raise fuse_grad_size_in_MB"
               % (calls, nbytes / calls / 1024))
    else:
        fix = ("the allreduces run longer than the backward they overlap with: the link's bandwidth is the limit "
               "(%.3f GB/s measured): a larger batch per rank (more compute per byte) or fewer, faster links; "
               "smaller buckets (fuse_grad_size_in_MB) start the first allreduce earlier" % (
                   sum(r["bytes"] for r in grads) / (sum(r["total_ms"] for r in grads) * 1e6) if grads else 0.0))
    # Hiding it all is the most a change of buckets can save: the wait goes, the transfers stay on the stream.
    return [Finding(
        "exposed_communication", "the step waits %.3f ms for the comm stream (%.0f%% of its communication exposed)"
        % (p.per_step_ms(exposed_ns), 100 * (1 - comm["overlap"])),
        p.share(exposed_ns), p.per_step_ms(exposed_ns),
        {"collectives_per_step": calls, "bytes_per_step": nbytes,
         "comm_ms_per_step": p.per_step_ms(comm["comm_ms"] * 1e6), "exposed_ms_per_step": p.per_step_ms(exposed_ns),
         "overlap": round(comm["overlap"], 3), "ops": {r["op"]: r["calls"] for r in comm["ops"]}},
        fix)]


# -- 11. an idle GPU ------------------------------------------------------------------------------------------

GPU_IDLE_SHARE = 0.3  # a device idle for this share of the runs that used it is reported


def _gpu_idle(p):
    findings = []
    runs = [p.evs[i] for i in p.runs]
    copies_to_host = sum(1 for e in p.evs if e["category"] == "Memcpy" and e["name"].startswith("memcpy:GPU->CPU"))
    for g in gpu_summary(p.evs, runs):
        if g["window_ms"] <= 0 or 1 - g["utilisation"] < GPU_IDLE_SHARE:
            continue
        idle_ns = g["idle_ms"] * 1e6
        ops = sum(1 for e in p.evs if e["category"] == "Operator") / p.n_steps
        kernels = g["kernels"] / p.n_steps
        fix = ("the GPU waits for the host, which launches %.0f ops per step (%.1f us of GPU work each on average): "
               "do more per launch: fuse elementwise chains (BuildStrategy.fuse_elementwise_ops), a larger batch, "
               "whole-sequence ops (dynamic_lstm) instead of per-step StaticRNN ops" % (
                   kernels, 1000 * g["busy_ms"] / max(g["kernels"], 1)))
        if copies_to_host:
            fix += ("; %.0f device-to-host copies per step each wait for the stream (fetches, ops running their CPU "
                    "kernel: the copies finding names them)" % (copies_to_host / p.n_steps))
        # The host work that leaves the GPU idle cannot all go: count the idle time in gaps between spans.
        saving_ns = g["idle_gap_ms"] * 1e6
        findings.append(Finding(
            "gpu_idle", "CUDAPlace(%d) is idle %.0f%% of the runs that use it (%.3f ms per step)" % (
                g["device"], 100 * (1 - g["utilisation"]), p.per_step_ms(idle_ns)),
            p.share(idle_ns), p.per_step_ms(saving_ns),
            {"device": g["device"], "utilisation": round(g["utilisation"], 4),
             "busy_ms_per_step": p.per_step_ms(g["busy_ms"] * 1e6), "idle_ms_per_step": p.per_step_ms(idle_ns),
             "gpu_spans_per_step": g["spans"] / p.n_steps, "ops_per_step": ops,
             "device_to_host_copies_per_step": copies_to_host / p.n_steps,
             "longest_idle_gaps": g["idle_gaps"]},
            fix))
    return findings


# -- 12. the hottest kernels ---------------------------------------------------------------------------------

def _hotspot(p):
    # An op's own time: its duration less the ops and loop steps nested in it (its thread-pool parts, copies and
    # OpDetail phases are its work, although summary()'s self time excludes them).
    nested = [0] * len(p.evs)
    for e in p.evs:
        if e["parent"] >= 0 and e["category"] not in ("ThreadPool", "Memcpy", "OperatorInner"):
            nested[e["parent"]] += e["dur_ns"]
    per_op = collections.defaultdict(lambda: [0, 0])
    for i, e in enumerate(p.evs):
        if e["category"] == "Operator":
            per_op[e["name"]][0] += 1
            per_op[e["name"]][1] += max(e["dur_ns"] - nested[i], 0)
    if not per_op:
        return []
    ranked = sorted(per_op.items(), key=lambda kv: -kv[1][1])
    name, (calls, ns) = ranked[0]
    shapes = collections.Counter(a.get("inputs") for e, a in zip(p.evs, p.args) if e["name"] == name)
    nodes = [n for n in p.nodes.values() if n.type == name]
    return [Finding(
        "hotspot", "compute-bound: %s takes %.0f%% of the step in its kernel" % (name, 100 * p.share(ns)),
        p.share(ns), 0.0,
        {"op": name, "calls_per_step": calls / p.n_steps, "ms_per_step": p.per_step_ms(ns),
         "shapes": dict(shapes.most_common(3)), "sites": _sites(nodes),
         "next": [(k, round(p.share(v[1]), 4)) for k, v in ranked[1:4]]},
        "nothing structural to fix: the time is in %s's kernel; more threads (fluid.core.set_num_threads), a larger "
        "batch per step, or a smaller layer are the levers" % name)]


# -- the API -------------------------------------------------------------------------------------------------

def _check_programs(programs):
    from ..framework import Program
    if programs is None:
        return list(_state.programs)
    if isinstance(programs, Program):
        return [programs]
    if isinstance(programs, (list, tuple)) and all(isinstance(q, Program) for q in programs):
        return list(programs)
    raise TypeError("advise: programs must be None, a fluidlite Program or a list of Programs, got %r"
                    % (type(programs).__name__,))


_EVENT_KEYS = ("name", "category", "start_ns", "end_ns", "dur_ns", "parent", "bytes", "args")


def _check_events(evs):
    if not isinstance(evs, (list, tuple)):
        raise TypeError("advise: events must be a list of Event dicts (fluid.profiler.events()), got %s"
                        % type(evs).__name__)
    for i, e in enumerate(evs):
        missing = [k for k in _EVENT_KEYS if not isinstance(e, dict) or k not in e]
        if missing:
            raise ValueError("advise: events[%d] is not a profiler Event: missing %s" % (i, ", ".join(missing)))
        if not -1 <= e["parent"] < i:
            raise ValueError("advise: events[%d] (%s) has parent %r: expected -1 or an earlier index"
                             % (i, e["name"], e["parent"]))
    return list(evs)


def advise(programs=None, events=None, top=10, print_report=True):
    """Ranked findings (a list of Finding, best estimated saving first) for the last profile, or `events`, and
    the programs it ran (default: those Executor.run ran while recording). Prints them unless print_report is
    False. Raises RuntimeError when there is no profile."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError("advise: top must be an integer >= 1, got %r" % (top,))
    from_session = events is None
    evs = _session_events() if from_session else _check_events(events)
    if not evs:
        raise RuntimeError("advise: no profile to analyse: run the steps under fluid.profiler.profiler(...) (or "
                           "start_profiler/stop_profiler) first, or pass events=")
    p = _Profile(evs, _check_programs(programs), from_session)
    kids = p.children()
    findings = (_fusable_chains(p) + _duplicate_reductions(p) + _gradient_sums(p) + _copies(p) +
                _per_run_setup(p) + _dispatch_bound(p, kids) + _thread_utilisation(p) + _preempted(p, kids) +
                _python_time(p) + _exposed_communication(p) + _gpu_idle(p))
    step_ms = p.per_step_ms(p.wall_ns)
    findings = [f for f in findings if f.share >= MIN_SHARE or f.estimated_saving_ms >= MIN_SHARE * step_ms]
    findings.sort(key=lambda f: (not (f.kind == "dispatch_bound" and f.share >= HEADLINE_DISPATCH_SHARE),
                                 -f.estimated_saving_ms))
    if not any(f.estimated_saving_ms >= SIGNIFICANT_SHARE * step_ms for f in findings):
        findings = _hotspot(p) + findings  # nothing structural stands out: say where the kernel time goes
    # A profile that lost a noticeable share of its time to preemption says so first: every figure below carries it.
    caveats = [f for f in findings if f.kind == "preempted" and f.share >= SIGNIFICANT_SHARE]
    findings = caveats + [f for f in findings if f not in caveats]
    advice = Advice(findings[:top], p.n_steps, step_ms, len(evs))
    if print_report:
        print(format_findings(advice), end="")
    return advice


def format_findings(findings):
    """The advisor's text: a header with the step figures (when `findings` is an Advice), then one numbered block
    per finding."""
    lines = ["", "------------------------->     Advisor     <-------------------------", ""]
    if isinstance(findings, Advice):
        lines += ["Profile: %d steps (exe.run), %.3f ms per step, %d events; findings ranked by estimated saving"
                  % (findings.steps, findings.step_ms, findings.events), ""]
    if not findings:
        lines += ["No findings.", ""]
    for k, f in enumerate(findings, 1):
        lines.append("%d. [%s] %s" % (k, f.kind, f.title))
        lines.append("   share %.1f%% of the step, estimated saving %.3f ms per step"
                     % (100 * f.share, f.estimated_saving_ms))
        for key, value in f.evidence.items():
            if value not in (None, [], {}):
                lines.append("   %s: %s" % (key, _show(value)))
        lines.append("   fix: %s" % f.fix)
        lines.append("")
    return "\n".join(lines) + "\n"


def _show(value):
    if isinstance(value, float):
        return "%.4g" % value
    if isinstance(value, dict):
        return ", ".join("%s: %s" % (k, _show(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_show(v) for v in value)
    return str(value)
