"""Every registered op, every numeric, list and string attribute set to extreme values (int32 limits, 0, -1,
empty and oversized lists, NaN/inf), both when the op is appended and through op._set_attr after it was
built (which skips the build-time checks), then run: each case must raise a Python exception or run, never
kill the process. The sweep runs in a child process (a crash would take pytest down) with a memory cap, so
an extreme size attribute meets a failed allocation instead of the machine's memory. The ops of three
training programs also get their argument lists emptied, tripled, reversed and padded with @EMPTY@."""
import os
import subprocess
import sys
import textwrap

CHILD = r"""
import math, os, resource, sys
# A huge allocation must fail, not swap; AddressSanitizer (tools/sanitize.sh) maps terabytes of shadow memory
# and caps allocations itself (allocator_may_return_null is off: a huge one aborts with a report).
if "libasan" not in os.environ.get("LD_PRELOAD", ""):
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
import numpy as np
import fluidlite as fluid
from fluidlite import core

I32, I64 = 2**31 - 1, 2**63 - 1
EXTREMES = {
    "INT": [-I32 - 1, I32, 0, -1],
    "LONG": [-I64 - 1, I64, 0, -1],
    "FLOAT": [math.nan, math.inf, -math.inf, -1e30],
    "STRING": ["", "bogus"],
}
INT_SLOTS = {"Ids", "Index", "Label", "Indices", "Length", "SeqLen"}


def list_values(default):
    n = max(len(default or []), 2)
    return [[], [I32] * n, [-I32 - 1] * n, [0] * n, [-1] * n, [1] * 64]


def cases(proto):
    for a in proto["attrs"]:
        t = a["type"]
        if t in EXTREMES:
            values = EXTREMES[t]
        elif t in ("INTS", "LONGS"):
            values = list_values(a["default"])
            if t == "LONGS":
                values = values + [[I64] * 2, [-I64 - 1] * 2]
        elif t == "FLOATS":
            values = [[], [math.nan] * 2, [math.inf] * 64]
        else:
            continue
        for v in values:
            yield a["name"], v


def build(t, proto, shape, attrs):
    prog = fluid.Program()
    block = prog.global_block()
    feed, ins, outs = {}, {}, {}
    for s in proto["inputs"]:
        names = []
        for k in range(2 if s["duplicable"] else 1):
            n = "%s_%d" % (s["name"].replace("@", "_"), k)
            int_slot = s["name"] in INT_SLOTS
            block.create_var(name=n, shape=shape, dtype="int64" if int_slot else "float32")
            feed[n] = (np.ones(shape, "int64") if int_slot else
                       np.linspace(-1, 1, int(np.prod(shape))).reshape(shape).astype("float32"))
            names.append(n)
        ins[s["name"]] = names
    for s in proto["outputs"]:
        names = []
        for k in range(2 if s["duplicable"] else 1):
            n = "out_%s_%d" % (s["name"].replace("@", "_"), k)
            block.create_var(name=n, dtype="float32")
            names.append(n)
        outs[s["name"]] = names
    op = block.append_op(type=t, inputs=ins, outputs=outs, attrs=attrs)
    return prog, op, feed


def run(exe, prog, feed):
    exe.run(prog, feed=feed, fetch_list=[], scope=fluid.Scope())


exe = fluid.Executor(fluid.CPUPlace())
n = 0
for t in core.op_types():
    if t in ("feed", "fetch"):
        continue
    proto = core.op_proto(t)
    for shape in ([2, 3], [2, 2, 4, 4]):
        for name, v in cases(proto):
            for via_set_attr in (False, True):
                n += 1
                print("case", t, shape, name, repr(v)[:60], "set_attr" if via_set_attr else "append",
                      file=sys.stderr, flush=True)
                try:
                    if via_set_attr:
                        prog, op, feed = build(t, proto, shape, {})
                        op._set_attr(name, v)
                    else:
                        prog, op, feed = build(t, proto, shape, {name: v})
                    run(exe, prog, feed)
                except (core.EnforceNotMet, ValueError, TypeError, MemoryError, OverflowError):
                    pass

# The same extremes on every op of real training programs (forward, grad and optimizer ops with valid
# inputs), set through op._set_attr after minimize and run: this reaches the kernels, grad kernels included.
L = fluid.layers


def model_dense():
    x = L.data("x", shape=[6])
    label = L.data("label", shape=[1], dtype="int64")
    h = L.fc(x, size=8, act="relu")
    a, b = L.split(h, num_or_sections=2, dim=1)
    h = L.concat([L.elementwise_mul(a, b), L.tanh(a), L.sigmoid(b), L.leaky_relu(a), L.relu6(b)], axis=1)
    h = L.dropout(L.scale(h, scale=2.0, bias=0.5), dropout_prob=0.1)
    logits = L.fc(L.reshape(L.transpose(L.reshape(h, [-1, 4, 5]), perm=[0, 2, 1]), [-1, 20]), size=3)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label))
    probs = L.softmax(logits)
    loss = loss + L.reduce_sum(L.cross_entropy(probs, label)) * 0.1 + L.reduce_mean(L.square(probs))
    L.accuracy(probs, label, k=2)
    L.topk(probs, k=2)
    return loss, {"x": np.linspace(-1, 1, 24).reshape(4, 6).astype("float32"),
                  "label": np.array([[0], [1], [2], [1]], "int64")}


def model_conv():
    img = L.data("img", shape=[2, 8, 8])
    label = L.data("label", shape=[1], dtype="int64")
    c = L.conv2d(img, num_filters=4, filter_size=3, padding=1, stride=1)
    c = L.batch_norm(c, act="relu")
    c = L.pool2d(c, pool_size=2, pool_stride=2, pool_type="max")
    c = L.pool2d(c, pool_size=2, pool_stride=1, pool_type="avg")
    f = L.flatten(L.unsqueeze(L.squeeze(L.unsqueeze(c, axes=[1]), axes=[1]), axes=[4]), axis=1)
    s = L.slice(f, axes=[1], starts=[0], ends=[12])
    g = L.gather(s, L.cast(L.reshape(label, [-1]), "int32"))
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(s, size=3), label)) + L.reduce_max(g) * 0.01
    st = L.stack([s, s], axis=1)
    loss = loss + L.reduce_mean(L.unstack(st, axis=1)[0]) + L.mean(L.matmul(s, s, transpose_y=True))
    return loss, {"img": np.linspace(0, 1, 512).reshape(4, 2, 8, 8).astype("float32"),
                  "label": np.array([[0], [1], [2], [1]], "int64")}


def model_seq():
    ids = L.data("ids", shape=[1], dtype="int64")
    emb = L.embedding(ids, size=[10, 8])
    c0 = L.fc(emb, size=4)
    h, c = L.lstm_unit(emb, c0, c0)
    x = L.data("seq", shape=[3, 4, 2], append_batch_size=False)
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        m = rnn.memory(shape=[-1, 2], batch_ref=x_t)
        nh = L.fc([x_t, m], size=2, act="tanh")
        rnn.update_memory(m, nh)
        rnn.step_output(nh)
    return L.mean(h) + L.mean(rnn()) + L.mean(L.sums([c, c])), {
        "ids": np.array([[1], [2], [3], [9]], "int64"), "seq": np.linspace(0, 1, 24).reshape(3, 4, 2).astype("float32")}


for build_model, opt in ((model_dense, "adam"), (model_conv, "momentum"), (model_seq, "sgd")):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, feed = build_model()
        {"adam": fluid.optimizer.Adam(0.01), "momentum": fluid.optimizer.Momentum(0.01, 0.9),
         "sgd": fluid.optimizer.SGD(0.01)}[opt].minimize(loss)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    ops = [op for b in range(main.num_blocks) for op in main.block(b).ops]
    for op in ops:
        proto = core.op_proto(op.type)
        for name, v in cases(proto):
            n += 1
            print("model case", build_model.__name__, op.type, name, repr(v)[:60], file=sys.stderr, flush=True)
            good = op.attr(name) if op.has_attr(name) else None
            try:
                op._set_attr(name, v)
                exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
            except (core.EnforceNotMet, ValueError, TypeError, MemoryError, OverflowError):
                pass
            if good is not None:
                op._set_attr(name, good)
            else:
                op.desc.remove_attr(name)
        # slot counts: an emptied, tripled, reversed or @EMPTY@-padded argument list
        for side in ("input", "output"):
            for slot in (op.input_names if side == "input" else op.output_names):
                good = op.input(slot) if side == "input" else op.output(slot)
                for bad in ([], good * 3, good[::-1], good[:1] + ["@EMPTY@"], ["@EMPTY@"] * 2):
                    n += 1
                    print("slot case", build_model.__name__, op.type, side, slot, bad, file=sys.stderr, flush=True)
                    try:
                        getattr(op.desc, "set_" + side)(slot, bad)
                        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
                    except (core.EnforceNotMet, ValueError, TypeError, MemoryError, OverflowError):
                        pass
                    getattr(op.desc, "set_" + side)(slot, good)
print("cases", n, flush=True)
"""


def test_extreme_attributes_never_crash():
    env = dict(os.environ, OMP_NUM_THREADS="1", FLUIDLITE_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    last = p.stderr.strip().splitlines()[-6:]
    assert p.returncode == 0, "child died (rc %d) at:\n%s" % (p.returncode, "\n".join(last))
    assert p.stdout.startswith("cases "), p.stdout + "\n".join(last)
    assert int(p.stdout.split()[1]) > 6000  # every op's attributes were swept
