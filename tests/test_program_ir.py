"""The IR: Program/Block/Variable/Operator over the C++ descs, the dump, sub-blocks, clone, serialization,
unique naming and declaration checks."""
import random

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name
from fluidlite.framework import Parameter, VarType


def _scale_program():
    """x[-1, 3] -> scale(2, bias 1) ; fill_constant int64 [2]."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.scale(x, scale=2.0, bias=1.0)
        c = fluid.layers.fill_constant(shape=[2], dtype="int64", value=3)
    return main, x, y, c


# ---------------------------------------------------------------- API and dump

def test_program_block_variable_operator_api():
    main, x, y, c = _scale_program()
    block = main.global_block()
    assert main.num_blocks == 1 and block.idx == 0 and block.parent_idx == -1
    assert main.current_block() is block
    assert list(block.vars) == ["x", "scale_0.tmp_0", "fill_constant_0.tmp_0"]
    assert block.var("x") is x and block.has_var("x") and not block.has_var("nope")
    with pytest.raises(ValueError, match="nope"):
        block.var("nope")
    assert x.shape == (-1, 3) and x.dtype == VarType.FP32 and x.is_data and not x.persistable
    assert x.lod_level == 0 and x.type == VarType.LOD_TENSOR
    assert y.shape == (-1, 3) and y.dtype == VarType.FP32 and not y.is_data
    assert c.shape == (2,) and c.dtype == VarType.INT64

    assert [op.type for op in block.ops] == ["scale", "fill_constant"]
    op = block.ops[0]
    assert y.op is op
    assert op.input("X") == ["x"] and op.output("Out") == ["scale_0.tmp_0"]
    assert op.input_names == ["X"] and op.output_names == ["Out"]
    assert op.input_arg_names == ["x"] and op.output_arg_names == ["scale_0.tmp_0"]
    assert op.attr("scale") == 2.0 and op.attr("bias") == 1.0 and op.attr("bias_after_scale") is True
    assert op.has_attr("op_callstack") and not op.has_attr("nope")
    # the creation site is this file, inside _scale_program
    assert op.desc.creation_site().startswith(__file__ + ":")
    fc = block.ops[1]
    assert fc.attr("shape") == [2] and fc.attr("dtype") == int(VarType.INT64) and fc.attr("str_value") == "3"
    # _set_attr goes to the desc (one source of truth) and bumps the version
    v = main.desc.version()
    op._set_attr("scale", 4.0)
    assert op.attr("scale") == 4.0 and main.desc.version() > v


def test_program_dump_exact():
    main, *_ = _scale_program()
    b = main.global_block()
    b.create_var(name="w", shape=[3, 4], dtype="float64", persistable=True)
    b.create_var(name="seq", shape=[-1, 1], dtype="int64", lod_level=1)
    assert str(main) == (
        "{ // block 0\n"
        "    var x : LOD_TENSOR.shape(-1, 3).dtype(float32)\n"
        "    var scale_0.tmp_0 : LOD_TENSOR.shape(-1, 3).dtype(float32)\n"
        "    var fill_constant_0.tmp_0 : LOD_TENSOR.shape(2).dtype(int64)\n"
        "    persist var w : LOD_TENSOR.shape(3, 4).dtype(float64)\n"
        "    var seq : LOD_TENSOR.shape(-1, 1).dtype(int64).lod_level(1)\n"
        "\n"
        "    {Out=['scale_0.tmp_0']} = scale(inputs={X=['x']}, bias = 1, bias_after_scale = True, scale = 2)\n"
        "    {Out=['fill_constant_0.tmp_0']} = fill_constant(inputs={}, dtype = 3, force_cpu = False, "
        "shape = [2], str_value = '3', value = 3)\n"
        "}\n")
    assert main.to_string() == str(main)


def test_dump_of_the_issue_example_lists_every_var_and_op():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        h = fluid.layers.fc(input=x, size=32, act="relu")
        y = fluid.layers.fc(input=h, size=1)
        fluid.layers.reduce_sum(fluid.layers.abs(y), dim=[1])
    lines = str(main).splitlines()
    assert lines[0] == "{ // block 0"
    assert "    var x : LOD_TENSOR.shape(-1, 13).dtype(float32)" in lines
    assert "    persist var fc_0.w_0 : LOD_TENSOR.shape(13, 32).dtype(float32)" in lines
    assert "    persist var fc_0.b_0 : LOD_TENSOR.shape(32).dtype(float32)" in lines
    assert "    persist var fc_1.w_0 : LOD_TENSOR.shape(32, 1).dtype(float32)" in lines
    assert "    var fc_0.tmp_0 : LOD_TENSOR.shape(-1, 32).dtype(float32)" in lines
    assert ("    {Out=['fc_0.tmp_0']} = mul(inputs={X=['x'], Y=['fc_0.w_0']}, x_num_col_dims = 1, "
            "y_num_col_dims = 1)") in lines
    assert [line.split(" = ")[1].split("(")[0] for line in lines if line.startswith("    {")] == [
        "mul", "elementwise_add", "relu", "mul", "elementwise_add", "abs", "reduce_sum"]
    # startup: one initializer per parameter
    assert [op.type for op in startup.global_block().ops].count("fill_constant") == 2


# ---------------------------------------------------------------- sub-blocks

def test_sub_blocks_parent_and_recursive_lookup():
    main = fluid.Program()
    g = main.global_block()
    outer = g.create_var(name="outer", shape=[2, 3], dtype="float32")
    sub = main._create_block()
    assert main.num_blocks == 2 and sub.idx == 1 and sub.parent_idx == 0 and main.current_block() is sub
    inner = sub.create_var(name="inner", shape=[2, 3], dtype="float32")
    assert sub._find_var_recursive("outer") is outer
    assert sub._var_recursive("inner") is inner
    assert g._find_var_recursive("inner") is None
    with pytest.raises(ValueError, match="inner"):
        g._var_recursive("inner")
    assert sub.desc.find_var_recursive("outer") is not None and sub.desc.find_var("outer") is None
    # an op in the sub-block may read a parent's variable: shape inference finds it through the parent
    op = sub.append_op(type="scale", inputs={"X": outer}, outputs={"Out": inner}, attrs={"scale": 3.0})
    assert op.block is sub and sub.ops == [op] and g.ops == []
    subsub = main._create_block()
    assert subsub.parent_idx == 1 and subsub._find_var_recursive("outer") is outer
    main._rollback()
    assert main.current_block() is sub
    main._rollback()
    assert main.current_block() is g
    # explicit parent index
    b3 = main._create_block(parent_idx=0)
    assert b3.idx == 3 and b3.parent_idx == 0
    main._rollback()
    headers = [line for line in str(main).splitlines() if line.startswith("{")]
    assert headers == ["{ // block 0", "{ // block 1, parent 0", "{ // block 2, parent 1", "{ // block 3, parent 0"]
    want = "    {Out=['inner']} = scale(inputs={X=['outer']}, bias = 0, bias_after_scale = True, scale = 3)"
    assert want in str(main)
    sub._set_forward_block_idx(0)
    assert sub.forward_block_idx == 0 and "{ // block 1, parent 0, forward block 0" in str(main)


def test_sub_block_var_not_visible_to_parent_ops():
    main = fluid.Program()
    g = main.global_block()
    sub = main._create_block()
    sub.create_var(name="inner", shape=[2], dtype="float32")
    main._rollback()
    out = g.create_var(name="out", shape=[2], dtype="float32")
    with pytest.raises(core.EnforceNotMet, match=r"scale: input X variable 'inner' is not declared in block 0"):
        g.append_op(type="scale", inputs={"X": ["inner"]}, outputs={"Out": out})
    assert g.ops == [] and g.desc.op_size() == 0


# ---------------------------------------------------------------- clone

def test_clone_is_deep_and_independent():
    main, x, y, c = _scale_program()
    before, version = str(main), main.desc.version()
    clone = main.clone()
    assert str(clone) == before
    assert clone.desc.uid() != main.desc.uid()
    cb = clone.global_block()
    assert cb.var("x") is not x and cb.var("x").shape == (-1, 3) and cb.var("x").is_data
    # edit the clone in every way: ops, attrs, vars
    cb.append_op(type="scale", inputs={"X": cb.var("scale_0.tmp_0")}, outputs={"Out": cb.var("x")})
    cb.ops[0]._set_attr("scale", 7.0)
    cb.create_var(name="only_in_clone", shape=[1], dtype="float32")
    cb.var("scale_0.tmp_0").persistable = True
    cb._remove_op(1)
    assert str(main) == before and main.desc.version() == version
    assert main.global_block().ops[0].attr("scale") == 2.0
    assert not main.global_block().has_var("only_in_clone")
    assert [op.type for op in main.global_block().ops] == ["scale", "fill_constant"]
    # and the other way round
    main.global_block().ops[0]._set_attr("bias", 5.0)
    assert cb.ops[0].attr("bias") == 1.0


def test_clone_keeps_python_state_and_sub_blocks():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        fluid.layers.create_parameter(shape=[3], dtype="float32", name="w")
        y = fluid.layers.scale(x)
    y.stop_gradient = True
    main._create_block()
    main._rollback()
    clone = main.clone()
    assert clone.num_blocks == 2 and clone.block(1).parent_idx == 0
    cw = clone.global_block().var("w")
    assert isinstance(cw, Parameter) and cw.trainable and cw.persistable and cw.shape == (3,)
    assert clone.global_block().var(y.name).stop_gradient is True
    assert clone.global_block().var("x").stop_gradient is True


def test_clone_for_test_sets_is_test_only_where_present():
    main, x, y, _ = _scale_program()
    g = main.global_block()
    out = g.create_var(name="out", dtype="float32")
    g.append_op(type="scale", inputs={"X": y}, outputs={"Out": out}, attrs={"is_test": False})
    test_prog = main.clone(for_test=True)
    ops = test_prog.global_block().ops
    assert ops[2].attr("is_test") is True
    assert not ops[0].has_attr("is_test") and not ops[1].has_attr("is_test")
    assert g.ops[2].attr("is_test") is False  # the original is untouched
    assert main.clone(for_test=False).global_block().ops[2].attr("is_test") is False


IS_TEST_OPS = [t for t in core.op_types() if any(a["name"] == "is_test" for a in core.op_proto(t)["attrs"])]


def test_ops_declaring_is_test_exist():
    assert {"batch_norm", "dropout"} <= set(IS_TEST_OPS)


@pytest.mark.parametrize("op_type", IS_TEST_OPS)
def test_declared_is_test_default_false_and_clone_sets_it(op_type):
    proto = core.op_proto(op_type)
    spec = [a for a in proto["attrs"] if a["name"] == "is_test"][0]
    assert spec["type"] == "BOOLEAN" and spec["default"] is False
    main = fluid.Program()
    op = core.OpDesc(op_type)
    op.set_attr("is_test", False)
    main.global_block().desc.insert_desc(0, op)  # Block.ops is a view: the op shows up
    assert main.clone(for_test=True).global_block().ops[0].attr("is_test") is True


# ---------------------------------------------------------------- serialization

def _rich_program():
    """Every attribute type, a sub-block, persistable/lod/data vars."""
    main, x, y, c = _scale_program()
    g = main.global_block()
    g.create_var(name="p", shape=[4, 5], dtype="float64", persistable=True)
    g.create_var(name="s", shape=[-1, 1], dtype="int64", lod_level=2)
    sub = main._create_block()
    sub.create_var(name="inner", shape=[-1, 3], dtype="float32")
    sub.append_op(type="scale", inputs={"X": x}, outputs={"Out": ["inner"]}, attrs={"scale": 0.5})
    main._rollback()
    op = g.ops[0]
    for name, value in [("a_int", 7), ("a_float", 0.25), ("a_str", "hi"), ("a_ints", [1, -2]),
                        ("a_floats", [0.5, 1.5]), ("a_strs", ["u", "v"]), ("a_bool", True),
                        ("a_bools", [True, False]), ("a_block", sub), ("a_blocks", [sub, g])]:
        op._set_attr(name, value)
    return main


def test_serialize_round_trip_same_dump_and_attrs():
    main = _rich_program()
    data = main.serialize_to_string()
    assert isinstance(data, bytes) and data.startswith(b"FLPROG2\n")
    back = fluid.Program.parse_from_string(data)
    assert str(back) == str(main)
    assert back.serialize_to_string() == data
    assert back.num_blocks == 2 and back.block(1).parent_idx == 0
    op = back.global_block().ops[0]
    assert op.attr("a_int") == 7 and op.attr("a_float") == 0.25 and op.attr("a_str") == "hi"
    assert op.attr("a_ints") == [1, -2] and op.attr("a_floats") == [0.5, 1.5] and op.attr("a_strs") == ["u", "v"]
    assert op.attr("a_bool") is True and op.attr("a_bools") == [True, False]
    assert op.attr("a_block") == 1 and op.attr("a_blocks") == [1, 0]
    assert back.global_block().ops[1].attr("shape") == [2]  # LONGS
    v = back.global_block().var("s")
    assert v.lod_level == 2 and v.dtype == VarType.INT64 and v.shape == (-1, 1)
    assert back.global_block().var("p").persistable and back.global_block().var("x").is_data
    assert op.desc.creation_site() == main.global_block().ops[0].desc.creation_site()


def test_need_check_feed_round_trips_and_version_1_programs_still_load():
    import struct
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        fluid.data(name="d", shape=[None, 3], dtype="float32")
        fluid.layers.data(name="l", shape=[3], dtype="int64")
    back = fluid.Program.parse_from_string(main.serialize_to_string())
    assert back.global_block().var("d").need_check_feed and not back.global_block().var("l").need_check_feed
    assert back.global_block().var("d").is_data and back.global_block().var("l").is_data

    def v1_var(name, dtype, shape, is_data):  # version 1: no need_check_feed byte after is_data
        return (struct.pack("<I", len(name)) + name.encode() + struct.pack("<ii", 7, dtype)
                + struct.pack("<I", len(shape)) + b"".join(struct.pack("<q", d) for d in shape)
                + struct.pack("<Bi", 0, 0) + bytes([is_data]))
    v1 = (b"FLPROG1\n" + struct.pack("<I", 1) + struct.pack("<iii", 0, -1, -1) + struct.pack("<I", 2)
          + v1_var("d", 5, [-1, 3], 1) + v1_var("l", 3, [-1, 3], 1) + struct.pack("<I", 0))
    old = fluid.Program.parse_from_string(v1)
    d, lv = old.global_block().var("d"), old.global_block().var("l")
    assert d.is_data and d.shape == (-1, 3) and d.dtype == VarType.FP32 and not d.need_check_feed
    assert lv.dtype == VarType.INT64 and not lv.need_check_feed
    assert old.serialize_to_string().startswith(b"FLPROG2\n")  # written back in the current version


def test_serialize_round_trip_runs_the_same():
    main, x, y, c = _scale_program()
    back = fluid.Program.parse_from_string(main.serialize_to_string())
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.random.RandomState(0).rand(4, 3).astype("float32")}
    a = exe.run(main, feed=feed, fetch_list=[y, c], scope=fluid.Scope())
    b = exe.run(back, feed=feed, fetch_list=[y.name, c.name], scope=fluid.Scope())
    np.testing.assert_array_equal(a[0], feed["x"] * 2 + 1)
    np.testing.assert_array_equal(a[1], np.array([3, 3], dtype="int64"))
    for u, w in zip(a, b):
        assert u.dtype == w.dtype
        np.testing.assert_array_equal(u, w)


def _parse_never_crashes(data):
    try:
        p = fluid.Program.parse_from_string(data)
    except core.EnforceNotMet as e:
        # the reader's own errors, or the op and block checks every parsed program meets (ValidateProgram)
        assert str(e).startswith(("corrupt program bytes", "not a fluidlite program", "op ", "program: ")), str(e)
        return False
    # a mutation that still parses (e.g. a changed character in a name) must give a usable desc
    p.to_string()
    p.serialize_to_string()
    return True


def test_corrupt_bytes_bad_magic_trailing_and_empty():
    data = _rich_program().serialize_to_string()
    with pytest.raises(core.EnforceNotMet, match=r"corrupt program bytes: truncated at offset 0 \(need 8 more"):
        fluid.Program.parse_from_string(b"")
    with pytest.raises(core.EnforceNotMet, match="not a fluidlite program"):
        fluid.Program.parse_from_string(b"XXPROG1\n" + data[8:])
    with pytest.raises(core.EnforceNotMet, match="trailing data after the last block"):
        fluid.Program.parse_from_string(data + b"\0")
    with pytest.raises(core.EnforceNotMet, match=r"corrupt program bytes: truncated at offset 8 \(need 4 more bytes, "
                                                  r"2 left\)"):
        fluid.Program.parse_from_string(data[:10])  # inside the block count
    # Cut in the middle: which read fails first (a fixed-size field or a length prefix) depends on the
    # bytes, and the ops' recorded file paths make those depend on where the checkout lives.
    with pytest.raises(core.EnforceNotMet, match=r"corrupt program bytes: (truncated at offset \d+|count \d+ at "
                                                  r"offset \d+ exceeds the remaining data)"):
        fluid.Program.parse_from_string(data[:len(data) // 2])
    # a block count far beyond the data is rejected before anything is allocated
    huge = data[:8] + (0xFFFFFFFF).to_bytes(4, "little") + data[12:]
    with pytest.raises(core.EnforceNotMet, match="count 4294967295 .* exceeds the remaining data"):
        fluid.Program.parse_from_string(huge)
    with pytest.raises(core.EnforceNotMet, match="at least one block"):
        fluid.Program.parse_from_string(data[:8] + b"\0\0\0\0")


def test_every_truncation_point_raises():
    data = _rich_program().serialize_to_string()
    for n in range(len(data)):
        with pytest.raises(core.EnforceNotMet):
            fluid.Program.parse_from_string(data[:n])


def test_random_byte_flips_never_crash():
    data = _rich_program().serialize_to_string()
    rng = random.Random(1234)
    parsed = failed = 0
    for _ in range(20000):
        buf = bytearray(data)
        for _ in range(rng.choice([1, 1, 2, 4])):
            i = rng.randrange(len(buf))
            buf[i] = rng.choice([buf[i] ^ (1 << rng.randrange(8)), rng.randrange(256), 0xFF, 0x00])
        if _parse_never_crashes(bytes(buf)):
            parsed += 1
        else:
            failed += 1
    assert failed > 1000  # the corruptions do hit the length checks


def test_invalid_utf8_in_a_name_is_rejected():
    main, *_ = _scale_program()
    data = main.serialize_to_string()
    i = data.index(b"scale_0.tmp_0")
    bad = data[:i] + b"\xe1" + data[i + 1:]
    with pytest.raises(core.EnforceNotMet, match=r"corrupt program bytes: string at offset \d+ is not valid UTF-8"):
        fluid.Program.parse_from_string(bad)
    # valid multi-byte names survive the round trip
    g = main.global_block()
    g.create_var(name="\u00e9t\u00e9_\u4e2d", shape=[1], dtype="float32")
    assert fluid.Program.parse_from_string(main.serialize_to_string()).global_block().has_var("\u00e9t\u00e9_\u4e2d")


def test_parse_of_unknown_op_type_fails_at_prepare_not_crash():
    main, x, y, c = _scale_program()
    data = main.serialize_to_string()
    bad = data.replace(b"fill_constant", b"fill_constanX")  # same length: parses, but unknown op type
    prog = fluid.Program.parse_from_string(bad)
    live = core.live_scopes()
    with pytest.raises(core.EnforceNotMet, match="unknown op type 'fill_constanX'"):
        fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": np.zeros((1, 3), "float32")}, scope=fluid.Scope())
    assert core.live_scopes() == live


# ---------------------------------------------------------------- naming and declarations

def test_unique_names_follow_fluid():
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        h = fluid.layers.fc(input=x, size=4, act="relu")
        y = fluid.layers.fc(input=h, size=1)
    names = list(main.global_block().vars)
    assert names == ["x", "fc_0.w_0", "fc_0.tmp_0", "fc_0.b_0", "fc_0.tmp_1", "fc_0.tmp_2",
                     "fc_1.w_0", "fc_1.tmp_0", "fc_1.b_0", "fc_1.tmp_1"]
    assert h.name == "fc_0.tmp_2" and y.name == "fc_1.tmp_1"
    assert sorted(v.name for v in startup.global_block().vars.values()) == [
        "fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]


def test_unique_name_guard_restarts_and_restores():
    with unique_name.guard():
        assert unique_name.generate("fc") == "fc_0"
        assert unique_name.generate("fc") == "fc_1"
        with unique_name.guard():
            assert unique_name.generate("fc") == "fc_0"
        assert unique_name.generate("fc") == "fc_2"
        with unique_name.guard("pre_"):
            assert unique_name.generate("fc") == "pre_fc_0"
    main = fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, fluid.Program()):
        a = fluid.layers.scale(fluid.layers.data(name="x", shape=[1], dtype="float32"))
        b = fluid.layers.scale(a)
    assert (a.name, b.name) == ("scale_0.tmp_0", "scale_1.tmp_0")


def test_variable_redeclaration_checks():
    block = fluid.Program().global_block()
    v = block.create_var(name="v", shape=[2, 3], dtype="float32")
    assert block.create_var(name="v", shape=[2, 3], dtype="float32").desc.name() == "v"  # same: fine
    with pytest.raises(ValueError, match=r"variable v has been created before; the previous shape is \(2, 3\), "
                                         r"the new shape is \(3, 2\)"):
        block.create_var(name="v", shape=[3, 2], dtype="float32")
    with pytest.raises(ValueError, match="variable v has been created before; the previous dtype is VarType.FP32, "
                                         "the new dtype is VarType.INT64"):
        block.create_var(name="v", shape=[2, 3], dtype="int64")
    with pytest.raises(ValueError, match="lod_level"):
        block.create_var(name="v", lod_level=1)
    with pytest.raises(ValueError, match="persistable"):
        block.create_var(name="v", persistable=True)
    with pytest.raises(ValueError, match="cannot redeclare it as"):
        block.create_var(name="v", type=VarType.LOD_TENSOR_ARRAY)
    assert v.shape == (2, 3) and v.dtype == VarType.FP32  # unchanged by the failed redeclarations
    with pytest.raises(TypeError, match="dtype complex64 is not supported"):
        block.create_var(name="c", shape=[1], dtype="complex64")


def test_parameter_shape_checks():
    block = fluid.Program().global_block()
    with pytest.raises(ValueError, match=r"a Parameter's shape must be known; got \[-1, 3\]"):
        block.create_parameter(name="p", shape=[-1, 3], dtype="float32")
    with pytest.raises(ValueError, match="needs both shape and dtype"):
        Parameter(block, shape=None, dtype="float32", name="q")
    assert not block.has_var("p")
    p = block.create_parameter(name="p", shape=[2, 3], dtype="float32")
    assert isinstance(p, Parameter) and p.persistable and p.trainable and block.all_parameters() == [p]


def test_version_counter_bumps_on_every_edit():
    main, x, y, c = _scale_program()
    d = main.desc
    seen = [d.version()]

    def bumped():
        seen.append(d.version())
        return seen[-1] > seen[-2]

    main.global_block().create_var(name="n", shape=[1], dtype="float32")
    assert bumped()
    main.global_block().var("n").persistable = True
    assert bumped()
    main.global_block().ops[0]._set_attr("scale", 3.0)
    assert bumped()
    main.global_block().ops[0]._rename_input("x", "n")
    assert bumped()
    main._create_block()
    assert bumped()
    main._rollback()
    main.global_block()._remove_op(1)
    assert bumped()
    str(main)
    main.serialize_to_string()
    main.clone()
    assert d.version() == seen[-1]  # reads do not bump


def test_a_desc_handle_outlives_its_removal():
    """A VarDesc/OpDesc handle shares ownership: after remove_op/remove_var it still reads its own desc
    (not whatever the heap put at the freed address) and, detached, no longer bumps the program's version."""
    main, x, y, c = _scale_program()
    b = main.global_block().desc
    op, var = b.op(0), b.find_var("scale_0.tmp_0")
    b.remove_op(0, 1)
    b.remove_var("scale_0.tmp_0")
    filler = core.OpDesc("fill_constant")
    for i in range(64):  # reuse the freed memory
        b.insert_desc(0, filler)
        b.var("filler_%d" % i)
    assert op.type() == "scale" and op.input("X") == ["x"] and op.attr("scale") == 2.0
    assert var.name() == "scale_0.tmp_0" and list(var.shape()) == [-1, 3]
    version = main.desc.version()
    op.set_attr("scale", 5.0)
    var.set_shape([4])
    assert main.desc.version() == version and op.attr("scale") == 5.0 and list(var.shape()) == [4]
    # copies made while grad ops are returned by value are fresh objects, not a removed desc's handle
    (g,) = core.make_grad_ops(op, set())
    assert g.type() == "scale" and op.type() == "scale"


def test_desc_ids_are_unique_and_block_versions_count_structure():
    main, x, y, c = _scale_program()
    b = main.global_block().desc
    ids = b.var_ids() + b.op_ids()
    assert len(set(ids)) == len(ids) and 0 not in ids
    assert b.var_ids() == [v.id() for v in b.all_vars()] and b.op_ids() == [b.op(i).id() for i in range(2)]
    assert b.var_id("x") == b.find_var("x").id() and b.var_id("nope") == 0
    assert b.op(0).copy().id() not in ids  # a copy is a new desc
    clone = core.ProgramDesc(main.desc).block(0)
    assert not set(clone.var_ids() + clone.op_ids()) & set(ids)
    ops_v, vars_v = b.ops_version(), b.vars_version()
    b.op(0).set_attr("scale", 3.0)
    b.find_var("x").set_shape([2, 3])
    assert (b.ops_version(), b.vars_version()) == (ops_v, vars_v)  # edits are not structural
    b.var("z")
    assert b.vars_version() == vars_v + 1
    b.remove_var("z")
    b.remove_var("z")  # absent: nothing removed, nothing bumped
    assert b.vars_version() == vars_v + 2 and b.ops_version() == ops_v
    b.insert_desc(0, b.op(1))
    b.remove_op(0, 1)
    assert b.ops_version() == ops_v + 2
