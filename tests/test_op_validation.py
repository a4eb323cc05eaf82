"""Op checks at every entry point: the attributes and slots an op's registration declares are checked when
Python appends the op, when the executor prepares it (so op._set_attr after minimize meets them) and when a
program is read from bytes; a generated grad op also runs its forward op's shape inference over its own
inputs, so a grad op whose attributes disagree with its inputs fails as its forward op would. Each case
below crashed the process (SIGSEGV, SIGFPE, double free) before these checks. Also: the block structure of
a program read from bytes (sub-block references, nesting depth), and INTS attributes beyond int32."""
import struct

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name

L = fluid.layers
N = 4  # batch


def _mlp_head(x, size=5):
    return L.fc(x, size=size)


def _mul_case():
    x = L.data("x", shape=[3])
    return L.mean(_mlp_head(x)), {"x": np.ones((N, 3), "float32")}


def _softmax_case():
    x = L.data("x", shape=[3])
    return L.mean(L.softmax(_mlp_head(x))), {"x": np.ones((N, 3), "float32")}


def _swce_case():
    x = L.data("x", shape=[3])
    label = L.data("label", shape=[1], dtype="int64")
    loss = L.softmax_with_cross_entropy(_mlp_head(x), label)
    return L.mean(loss), {"x": np.ones((N, 3), "float32"), "label": np.zeros((N, 1), "int64")}


def _concat_case():
    x = L.data("x", shape=[3])
    return L.mean(L.concat([_mlp_head(x, 3), _mlp_head(x, 3)], axis=1)), {"x": np.ones((N, 3), "float32")}


def _transpose_case():
    x = L.data("x", shape=[3])
    return L.mean(L.transpose(_mlp_head(x), perm=[1, 0])), {"x": np.ones((N, 3), "float32")}


def _conv_case():
    img = L.data("img", shape=[2, 6, 6])
    return L.mean(L.conv2d(img, num_filters=2, filter_size=3)), {"img": np.ones((N, 2, 6, 6), "float32")}


def _rnn_case():
    x = L.data("x", shape=[3, N, 2], append_batch_size=False)
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)
        h = L.fc([x_t, h_prev], size=2, act="tanh")
        rnn.update_memory(h_prev, h)
        rnn.step_output(h)
    return L.mean(rnn()), {"x": np.ones((3, N, 2), "float32")}


# (model, the op to corrupt, attribute, bad value, the error) -- the crashes of issue 12.
CASES = [
    ("mul_grad", _mul_case, "mul_grad", "x_num_col_dims", -2147483647,
     r"op mul_grad: attribute 'x_num_col_dims' = -2147483647 is invalid: must be in \[1, 8\]"),
    ("softmax_grad", _softmax_case, "softmax_grad", "axis", 2**31 - 1,
     r"op softmax_grad: attribute 'axis' = 2147483647 is invalid: must be in \[-9, 8\]"),
    ("swce_grad", _swce_case, "softmax_with_cross_entropy_grad", "axis", 2**31 - 1,
     r"op softmax_with_cross_entropy_grad: attribute 'axis' = 2147483647 is invalid: must be in \[-9, 8\]"),
    ("concat_grad", _concat_case, "concat_grad", "axis", 0,
     r"concat_grad: Out@GRAD '[^']+' has dims \[.*\] but concat computes Out \[.*\] from the inputs and "
     r"attributes \(axis = 0\)"),
    # transpose2's gradient is a transpose2 by the inverse permutation (the last transpose2 of the program)
    ("transpose2_grad", _transpose_case, "transpose2", "axis", [-1, -1],
     r"op transpose2: attribute 'axis' = \[-1, -1\] is invalid: must be a permutation of \[0, 2\): element 0 is -1"),
    ("conv2d_grad_groups", _conv_case, "conv2d_grad", "groups", 0,
     r"op conv2d_grad: attribute 'groups' = 0 is invalid: must be >= 1"),
    ("conv2d_grad_strides", _conv_case, "conv2d_grad", "strides", [0, 0],
     r"op conv2d_grad: attribute 'strides' = \[0, 0\] is invalid: element 0 \(0\) must be >= 1"),
    ("conv2d_grad_paddings", _conv_case, "conv2d_grad", "paddings", [],
     r"op conv2d_grad: attribute 'paddings' = \[\] is invalid: must have 2 values, not 0"),
    ("conv2d_grad_dilations", _conv_case, "conv2d_grad", "dilations", [],
     r"op conv2d_grad: attribute 'dilations' = \[\] is invalid: must have 2 values, not 0"),
    ("recurrent_grad", _rnn_case, "recurrent_grad", "states", [],
     r"op recurrent_grad: attributes 'ex_states' \(1 names\) and 'states' \(0 names\) must name the same number "
     r"of memories"),
]
IDS = [c[0] for c in CASES]


def _train(model):
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        loss, feed = model()
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss, feed


def _last_op(program, op_type):
    ops = [op for b in range(program.num_blocks) for op in program.block(b).ops if op.type == op_type]
    assert ops, "no %s op in the program" % op_type
    return ops[-1]


def _scope_after_startup(startup):
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    return scope


def test_the_models_train_unchanged():
    """The checks reject no valid op: every model of CASES trains, and runs again after a bad attribute is
    set back to its value."""
    exe = fluid.Executor(fluid.CPUPlace())
    for model in {c[1] for c in CASES}:
        main, startup, loss, feed = _train(model)
        scope = _scope_after_startup(startup)
        first, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        second, = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        assert np.isfinite(first).all() and np.isfinite(second).all()


@pytest.mark.parametrize("name,model,op_type,attr,bad,match", CASES, ids=IDS)
def test_set_attr_after_minimize_raises(name, model, op_type, attr, bad, match):
    main, startup, loss, feed = _train(model)
    scope = _scope_after_startup(startup)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    op = _last_op(main, op_type)
    good = op.attr(attr)
    op._set_attr(attr, bad)
    with pytest.raises(core.EnforceNotMet, match=match):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    op._set_attr(attr, good)  # the executor and scope stay usable
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


@pytest.mark.parametrize("name,model,op_type,attr,bad,match", CASES, ids=IDS)
def test_append_op_raises(name, model, op_type, attr, bad, match):
    main, startup, loss, feed = _train(model)
    op = _last_op(main, op_type)
    block = op.block
    attrs = {n: op.attr(n) for n in op.attr_names if n != "sub_block"}
    if op.has_attr("sub_block"):
        attrs["sub_block"] = main.block(op.attr("sub_block"))
    attrs[attr] = bad
    before = len(block.ops)
    with pytest.raises(core.EnforceNotMet, match=match):
        block.append_op(type=op_type, inputs={k: op.input(k) for k in op.input_names},
                        outputs={k: op.output(k) for k in op.output_names}, attrs=attrs)
    assert len(block.ops) == before  # the rejected op is not left in the block


# ---------------------------------------------------------------- programs read from bytes

_TYPE_CODE = {int: 0, list: 3}  # AttrType INT, INTS (the attribute's type in the serialized program)


def _encode(value):
    if isinstance(value, int):
        return struct.pack("<i", value)
    if all(isinstance(v, int) for v in value):
        return struct.pack("<I", len(value)) + b"".join(struct.pack("<i", v) for v in value)
    return struct.pack("<I", len(value)) + b"".join(struct.pack("<I", len(s)) + s.encode() for s in value)


def _edited_bytes(program, op, attr, bad):
    """The program's bytes with one attribute value of one op replaced in place: the op's value is first set
    to a sentinel that occurs nowhere else, then the sentinel's bytes are swapped for the bad value's."""
    good = op.attr(attr)
    if isinstance(good, int):
        sentinel, code = 0x5EED, 0
    elif good and isinstance(good[0], str):
        sentinel, code = ["@SENTINEL@"], 5  # STRINGS
    else:
        sentinel, code = [0x5EED, 0x5EED], 3
    op._set_attr(attr, sentinel)
    data = program.desc.serialize_to_string()
    op._set_attr(attr, good)
    key = struct.pack("<I", len(attr)) + attr.encode() + bytes([code])
    old = key + _encode(sentinel)
    assert data.count(old) == 1
    return data.replace(old, key + _encode(bad))


@pytest.mark.parametrize("name,model,op_type,attr,bad,match", CASES, ids=IDS)
def test_edited_program_bytes_raise(name, model, op_type, attr, bad, match):
    main, startup, loss, feed = _train(model)
    data = _edited_bytes(main, _last_op(main, op_type), attr, bad)
    if name == "concat_grad":  # a valid axis: only the shapes at run time disagree
        loaded = fluid.Program.parse_from_string(data)
        scope = _scope_after_startup(startup)
        with pytest.raises(core.EnforceNotMet, match=match):
            fluid.Executor(fluid.CPUPlace()).run(loaded, feed=feed, fetch_list=[loss.name], scope=scope)
        return
    with pytest.raises(core.EnforceNotMet, match=match):
        fluid.Program.parse_from_string(data)


def test_grad_op_inputs_checked_against_forward_at_run_time():
    """A shape-dependent check: softmax_grad's axis is in the attribute range but not in X's rank."""
    main, startup, loss, feed = _train(_softmax_case)
    scope = _scope_after_startup(startup)
    _last_op(main, "softmax_grad")._set_attr("axis", 5)
    with pytest.raises(core.EnforceNotMet, match=r"softmax_grad: axis=5 is out of range for X '[^']+' \[4, 5\]"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[loss], scope=scope)


# ---------------------------------------------------------------- sub-blocks


def _rnn_program():
    main, startup, loss, feed = _train(_rnn_case)
    return main, startup, loss, feed


def test_recurrent_whose_sub_block_is_its_own_block_raises():
    main, startup, loss, feed = _rnn_program()
    scope = _scope_after_startup(startup)
    rec = _last_op(main, "recurrent")
    rec._set_attr("sub_block", main.global_block())
    with pytest.raises(core.EnforceNotMet, match=r"op recurrent in block 0: attribute 'sub_block' = block\[0\] is "
                                                 r"not nested in block 0"):
        fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[loss], scope=scope)
    data = main.desc.serialize_to_string()
    with pytest.raises(core.EnforceNotMet, match=r"op recurrent in block 0: attribute 'sub_block' = block\[0\]"):
        fluid.Program.parse_from_string(data)


def test_sub_block_out_of_range_raises():
    main, startup, loss, feed = _rnn_program()
    _last_op(main, "recurrent_grad")._set_attr("sub_block", 99)
    with pytest.raises(core.EnforceNotMet, match=r"op recurrent_grad: attribute 'sub_block' = block\[99\] is not a "
                                                 r"block of the program \(it has 3 blocks\)"):
        fluid.Program.parse_from_string(main.desc.serialize_to_string())


# A program written from scratch in the serialized format (csrc/desc.cc): blocks of ops, no variables.
def _str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _slots(slots):
    out = struct.pack("<I", len(slots))
    for name, args in slots.items():
        out += _str(name) + struct.pack("<I", len(args)) + b"".join(_str(a) for a in args)
    return out


def _op(type_, attrs, inputs=None, outputs=None):
    out = _str(type_) + _slots(inputs or {}) + _slots(outputs or {}) + struct.pack("<I", len(attrs))
    for name, code, payload in attrs:
        out += _str(name) + bytes([code]) + payload
    return out


def _program(blocks):
    """blocks: [(parent, forward, [op bytes])]."""
    out = b"FLPROG1\n" + struct.pack("<I", len(blocks))
    for i, (parent, fwd, ops) in enumerate(blocks):
        out += struct.pack("<iii", i, parent, fwd) + struct.pack("<I", 0) + struct.pack("<I", len(ops))
        out += b"".join(ops)
    return out


def _recurrent(sub_block):
    return _op("recurrent", [("sub_block", 8, struct.pack("<i", sub_block))], {"inputs": ["x"]},
               {"step_scopes": ["scopes"]})


def test_crafted_deep_nesting_raises():
    levels = 5000
    blocks = [(i - 1, -1, [_recurrent(i + 1)] if i + 1 < levels else []) for i in range(levels)]
    with pytest.raises(core.EnforceNotMet, match=r"program: block 65 is nested more than 64 blocks deep"):
        fluid.Program.parse_from_string(_program(blocks))


def test_crafted_self_reference_and_bad_structure_raise():
    with pytest.raises(core.EnforceNotMet, match=r"op recurrent in block 1: attribute 'sub_block' = block\[1\] is "
                                                 r"not nested in block 1"):
        fluid.Program.parse_from_string(_program([(-1, -1, []), (0, -1, [_recurrent(1)])]))
    # a parent cycle: block 1's parent is block 2, whose parent is block 1
    with pytest.raises(core.EnforceNotMet, match=r"block 1 has index 1 and parent 2"):
        fluid.Program.parse_from_string(_program([(-1, -1, []), (2, -1, []), (1, -1, [])]))
    with pytest.raises(core.EnforceNotMet, match=r"program: block 1 has forward block 7 \(the program has 2 blocks\)"):
        fluid.Program.parse_from_string(_program([(-1, -1, []), (0, 7, [])]))
    # a long list: the message shows its start
    axis = struct.pack("<I", 100000) + struct.pack("<i", 0) * 100000
    long_list = _op("transpose2", [("axis", 3, axis)], {"X": ["x"]}, {"Out": ["y"]})
    with pytest.raises(core.EnforceNotMet, match=r"op transpose2: attribute 'axis' = \[0, 0, .* \.\.\. \(300000 "
                                                 r"characters\) is invalid: must have 0 to 9 values, not 100000") as ei:
        fluid.Program.parse_from_string(_program([(-1, -1, [long_list])]))
    assert len(str(ei.value)) < 300
    # a list attribute whose count exceeds the program's own size
    huge = _op("transpose2", [("axis", 3, struct.pack("<I", 2**31))])
    with pytest.raises(core.EnforceNotMet, match=r"corrupt program bytes: count 2147483648 at offset \d+ exceeds"):
        fluid.Program.parse_from_string(_program([(-1, -1, [huge])]))


# ---------------------------------------------------------------- INTS beyond int32


def test_ints_attributes_beyond_int32_raise():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data("x", shape=[3, 4, 4])
        with pytest.raises(ValueError, match=r"op reshape2: attribute 'shape' value 4294967298 \(in \[4294967298, "
                                             r"3\]\) does not fit a 32-bit integer \(INTS attribute\)"):
            L.reshape(x, shape=[2**32 + 2, 3])
        with pytest.raises(ValueError, match=r"op transpose2: attribute 'axis' value 4294967296 .*does not fit a "
                                             r"32-bit integer"):
            L.transpose(x, perm=[0, 2**32, 1])
        with pytest.raises(ValueError, match=r"op pool2d: attribute 'ksize' value 4294967298 .*does not fit a 32-bit"):
            L.pool2d(x, pool_size=2**32 + 2)
        L.reshape(x, shape=[-1, 3, 16])
        op = fluid.default_main_program().global_block().ops[-1]
        with pytest.raises(ValueError, match=r"op reshape2: attribute 'shape' value -2147483649"):
            op._set_attr("shape", [-2**31 - 1, 3])
        assert op.attr("shape") == [-1, 3, 16]
        with pytest.raises(ValueError, match=r"op reshape2: attribute 'shape' value %d does not fit a 64-bit" % 2**70):
            op._set_attr("shape", [2**70])


# ---------------------------------------------------------------- the declared rules


def test_rules_are_listed_in_op_proto_and_inherited_by_grad_ops():
    for op_type in ("conv2d", "conv2d_grad"):
        attrs = {a["name"]: a["constraint"] for a in core.op_proto(op_type)["attrs"]}
        assert attrs["strides"] == "each >= 1; 2 values"
        assert attrs["paddings"] == "each >= 0; 2 values"
        assert attrs["groups"] == ">= 1"
        assert attrs["data_format"] == "one of 'NCHW', 'AnyLayout'"
        assert attrs["use_cudnn"] == ""


def test_dtype_attributes_must_name_a_dtype():
    main = fluid.Program()
    block = main.global_block()
    block.create_var(name="o", shape=[2], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match=r"op fill_constant: attribute 'dtype' = 99 is invalid: must be a "
                                                 r"dtype: 0 \(bool\), .*5 \(float32\), 6 \(float64\)"):
        block.append_op(type="fill_constant", outputs={"Out": ["o"]}, attrs={"shape": [2], "dtype": 99})
    block.append_op(type="fill_constant", outputs={"Out": ["o"]}, attrs={"shape": [2], "dtype": 5, "value": 1.5})
    exe = fluid.Executor(fluid.CPUPlace())
    block.ops[0]._set_attr("dtype", -3)
    with pytest.raises(core.EnforceNotMet, match=r"op fill_constant: attribute 'dtype' = -3 is invalid"):
        exe.run(main, fetch_list=["o"], scope=fluid.Scope())
    block.ops[0]._set_attr("dtype", 6)  # FP64
    out, = exe.run(main, fetch_list=["o"], scope=fluid.Scope())
    assert out.dtype == np.float64 and out.tolist() == [1.5, 1.5]


def test_grad_op_rechecked_when_its_input_dims_change():
    """The forward check runs again at run time when the dims change: a hand-built softmax_grad passes with
    matching Out / Out@GRAD and fails on the next run when Out@GRAD's dims no longer match."""
    main = fluid.Program()
    block = main.global_block()
    for name in ("out", "dout"):
        block.create_var(name=name, shape=[-1, 3], dtype="float32", is_data=True)
    block.create_var(name="dx", dtype="float32")
    block.append_op(type="softmax_grad", inputs={"Out": ["out"], "Out@GRAD": ["dout"]}, outputs={"X@GRAD": ["dx"]})
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    out = np.full((2, 3), 1 / 3, "float32")
    for _ in range(2):
        dx, = exe.run(main, feed={"out": out, "dout": np.ones((2, 3), "float32")}, fetch_list=["dx"], scope=scope)
        np.testing.assert_allclose(dx, np.zeros((2, 3)), atol=1e-7)
    with pytest.raises(core.EnforceNotMet, match=r"softmax_grad: Out@GRAD 'dout' has dims \[4, 3\] but softmax "
                                                 r"computes Out \[2, 3\] from the inputs and attributes \(axis = -1\)"):
        exe.run(main, feed={"out": out, "dout": np.ones((4, 3), "float32")}, fetch_list=["dx"], scope=scope)
    dx, = exe.run(main, feed={"out": out, "dout": np.ones((2, 3), "float32")}, fetch_list=["dx"], scope=scope)
    assert dx.shape == (2, 3)


def test_python_built_nesting_is_limited():
    main = fluid.Program()
    for _ in range(70):
        main._create_block()
    deep = main.current_block()
    main._rollback()
    parent = main.block(deep.parent_idx)
    parent.create_var(name="x", shape=[3, 2], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match=r"op recurrent: attribute 'sub_block' = block\[70\] is nested more "
                                                 r"than 64 blocks deep"):
        parent.append_op(type="recurrent", inputs={"inputs": ["x"]}, outputs={"step_scopes": ["s"]},
                         attrs={"sub_block": deep})
