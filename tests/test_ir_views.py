"""Block.vars / Block.ops are views of the C++ block desc, and the Python-only variable facts live in one
table owned by the Program (carried by clone and _prune)."""
import pytest

import fluidlite as fluid
from fluidlite import core, unique_name
from fluidlite.framework import Operator, Parameter, Variable


def _program():
    """x[-1, 3] -> scale -> relu ; a parameter w; y = x + w."""
    main, startup = fluid.Program(), fluid.Program()
    with unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        s = fluid.layers.scale(x, scale=2.0)
        r = fluid.layers.relu(s)
        w = fluid.layers.create_parameter(shape=[3], dtype="float32", name="w")
        y = fluid.layers.elementwise_add(r, w)
    return main, x, s, r, w, y


def _scale_desc(src, dst, scale=3.0):
    d = core.OpDesc("scale")
    d.set_input("X", [src])
    d.set_output("Out", [dst])
    d.set_attr("scale", scale)
    return d


# ---------------------------------------------------------------- ops view

def test_ops_view_sees_an_op_inserted_through_the_desc():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    before = list(block.ops)
    assert [op.type for op in before] == ["scale", "relu", "elementwise_add"]
    new = block.desc.insert_desc(1, _scale_desc(s.name, r.name))
    ops = block.ops
    assert [op.type for op in ops] == ["scale", "scale", "relu", "elementwise_add"]
    assert ops[1].desc.id() == new.id() and ops[1].attr("scale") == 3.0 and ops[1].block is block
    # the unchanged ops keep their wrappers
    assert ops[0] is before[0] and ops[2] is before[1] and ops[3] is before[2]
    assert block.ops[1] is block.ops[1]


def test_ops_view_drops_an_op_removed_through_the_desc_and_never_returns_its_wrapper():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    relu = block.ops[1]
    block.desc.remove_op(1, 2)
    assert [op.type for op in block.ops] == ["scale", "elementwise_add"]
    assert relu not in block.ops and len(block.ops) == 2
    # a new op in the same place (a freed desc's address may well be reused) gets a new wrapper
    block.desc.insert_desc(1, _scale_desc(s.name, r.name, 5.0))
    assert block.ops[1] is not relu and block.ops[1].type == "scale" and block.ops[1].attr("scale") == 5.0
    assert relu not in block.ops


def test_ops_view_sequence_behaviour():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    ops = block.ops
    snapshot = list(ops)
    assert len(ops) == 3 and all(isinstance(op, Operator) for op in ops)
    assert ops[-1] is snapshot[2] and ops[0:2] == snapshot[:2] and ops[::-1] == snapshot[::-1]
    assert list(reversed(ops)) == snapshot[::-1]
    assert ops == snapshot and ops == tuple(snapshot) and ops != snapshot[:2]
    assert ops.index(snapshot[1]) == 1 and snapshot[2] in ops
    with pytest.raises(IndexError):
        ops[3]
    # read-only
    with pytest.raises(AttributeError):
        ops.append(snapshot[0])
    with pytest.raises(TypeError):
        ops[0] = snapshot[1]
    with pytest.raises(AttributeError):
        block.ops = []
    # a view taken earlier follows later edits
    block.append_op(type="scale", inputs={"X": y}, outputs={"Out": y})
    assert len(ops) == 4 and ops[3].type == "scale"
    # iteration runs over the ops present when it starts
    seen = [op.type for op in block.ops if block.append_op(type="relu", inputs={"X": y}, outputs={"Out": y})]
    assert seen == ["scale", "relu", "elementwise_add", "scale"] and len(block.ops) == 8


def test_ops_view_follows_remove_and_insert_helpers():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    first, relu, add = block.ops
    block._remove_op(1)
    assert block.ops == [first, add] and block.desc.op_size() == 2
    op = block._insert_op(1, type="relu", inputs={"X": s}, outputs={"Out": r})
    assert block.ops == [first, op, add]
    pre = block._prepend_op(type="scale", inputs={"X": x}, outputs={"Out": s})
    assert block.ops == [pre, first, op, add]


# ---------------------------------------------------------------- vars view

def test_vars_view_sees_a_var_created_through_the_desc():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    names = list(block.vars)
    vd = block.desc.var("made_in_cpp")
    vd.set_shape([2, 2])
    assert "made_in_cpp" in block.vars and block.has_var("made_in_cpp")
    assert list(block.vars) == names + ["made_in_cpp"] and len(block.vars) == len(names) + 1
    v = block.vars["made_in_cpp"]
    assert isinstance(v, Variable) and not isinstance(v, Parameter) and v.shape == (2, 2)
    assert v is block.var("made_in_cpp") is block.vars.get("made_in_cpp") is block._find_var_recursive("made_in_cpp")
    assert v.desc.id() == vd.id() and v.block is block and v.stop_gradient is False
    assert block.vars.keys() == names + ["made_in_cpp"]
    assert [n for n, _ in block.vars.items()] == names + ["made_in_cpp"] and block.vars.values()[-1] is v


def test_vars_view_drops_a_var_removed_through_the_desc():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    n = len(block.vars)
    block.desc.remove_var(s.name)
    assert s.name not in block.vars and not block.has_var(s.name) and len(block.vars) == n - 1
    assert block.vars.get(s.name) is None and s.name not in list(block.vars)
    with pytest.raises(KeyError):
        block.vars[s.name]
    with pytest.raises(ValueError, match="not in this block"):
        block.var(s.name)
    # re-created under the same name: a new desc, so a new wrapper, not the stale one
    # (s.desc now dangles: it may even alias the new desc if that got the freed address, so compare ids)
    old_id = s._id
    block.desc.var(s.name)
    assert block.var(s.name) is not s and block.var(s.name).desc.id() != old_id


def test_vars_view_is_a_read_only_mapping_in_creation_order():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    assert list(block.vars) == ["x", s.name, r.name, "w", y.name]
    assert block.vars["x"] is x and block.vars["w"] is w and block.vars.get("nope", 7) == 7
    assert "x" in block.vars and "nope" not in block.vars and 3 not in block.vars
    with pytest.raises(KeyError):
        block.vars[3]
    assert block.vars.get(3) is None and block.vars.get(None, "d") == "d"
    assert dict(block.vars.items()) == {"x": x, s.name: s, r.name: r, "w": w, y.name: y}
    assert [v.name for v in block.vars.values()] == list(block.vars)
    with pytest.raises(TypeError):
        block.vars["z"] = x
    with pytest.raises(AttributeError):
        block.vars.pop("x")
    with pytest.raises(AttributeError):
        block.vars = {}
    view = block.vars
    block.create_var(name="late", shape=[1], dtype="float32")
    assert list(view)[-1] == "late"


def test_program_blocks_see_a_block_appended_through_the_desc():
    main, *_ = _program()
    main.desc.append_block(main.global_block().desc)
    assert main.num_blocks == 2 and len(main.blocks) == 2
    sub = main.block(1)
    assert sub.idx == 1 and sub.parent_idx == 0 and sub.program is main and main.blocks[1] is sub


# ---------------------------------------------------------------- Variable.op

def test_variable_op_is_the_last_writer_in_the_block():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    assert s.op is block.ops[0] and r.op is block.ops[1] and x.op is None
    block.desc.remove_op(1, 2)  # drop relu through the desc
    assert r.op is None
    block.desc.insert_desc(2, _scale_desc(s.name, r.name))
    assert r.op is block.ops[2] and r.op.type == "scale"
    later = block.append_op(type="relu", inputs={"X": y}, outputs={"Out": r})
    assert r.op is later


def test_variable_op_of_a_sub_block_writer():
    main = fluid.Program()
    g = main.global_block()
    outer = g.create_var(name="outer", shape=[2], dtype="float32")
    src = g.create_var(name="src", shape=[2], dtype="float32")
    sub = main._create_block()
    op = sub.append_op(type="scale", inputs={"X": src}, outputs={"Out": outer})
    main._rollback()
    assert outer.op is op
    sub._remove_op(0)
    assert outer.op is None


# ---------------------------------------------------------------- the side table

def test_facts_are_shared_by_every_wrapper_of_a_variable():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    assert x.stop_gradient is True and block.var("x").stop_gradient is True
    lazy = main.clone().global_block().var("w")
    assert isinstance(lazy, Parameter) and lazy.trainable
    block.desc.var("fresh")
    fresh = block.var("fresh")
    fresh.stop_gradient = True
    assert main._var_facts[0]["fresh"].stop_gradient is True
    # a redeclaration makes a second wrapper of the same desc: both read and write the same row
    handle = block.create_var(name=s.name)
    assert handle is not s and handle.desc.id() == s.desc.id() and block.var(s.name) is handle
    handle.stop_gradient = True
    assert s.stop_gradient is True
    s.stop_gradient = False
    assert handle.stop_gradient is False
    w.trainable = False
    w.optimize_attr = {"learning_rate": 0.5}
    assert main._var_facts[0]["w"].trainable is False and block.var("w").optimize_attr == {"learning_rate": 0.5}


def test_facts_survive_clone_and_prune_and_are_copied_not_shared():
    main, x, s, r, w, y = _program()
    reg = fluid.regularizer.L2Decay(0.5)
    w.regularizer = reg
    w.trainable = False
    s.stop_gradient = True
    s.error_clip = "clip-marker"
    for p in (main.clone(), main.clone(for_test=True), main._prune([y])):
        b = p.global_block()
        cw = b.var("w")
        assert isinstance(cw, Parameter) and cw in p.all_parameters() and cw.regularizer is reg
        assert cw.trainable is False and cw.optimize_attr == {"learning_rate": 1.0}
        assert b.var(s.name).stop_gradient is True and b.var(s.name).error_clip == "clip-marker"
        assert b.var("x").stop_gradient is True and not isinstance(b.var("x"), Parameter)
    clone = main.clone()
    clone.global_block().var("w").trainable = True
    clone.global_block().var(s.name).stop_gradient = False
    assert w.trainable is False and s.stop_gradient is True


def test_parse_from_string_keeps_desc_facts_only():
    main, x, s, r, w, y = _program()
    back = fluid.Program.parse_from_string(main.serialize_to_string())
    b = back.global_block()
    assert list(b.vars) == list(main.global_block().vars)
    assert b.var("x").is_data and b.var("w").persistable  # in the desc
    # the Python-only facts are not serialized (as before): no Parameters, stop_gradient False
    assert back.all_parameters() == [] and b.var("x").stop_gradient is False


def test_removed_var_loses_its_facts():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    block._remove_var("w")
    assert "w" not in main._var_facts[0] and main.all_parameters() == []
    v = block.create_var(name="w", shape=[3], dtype="float32")
    assert not isinstance(block.var("w"), Parameter) and v.stop_gradient is False and block.var("w") is v


def test_redeclaring_a_parameter_as_a_plain_variable_keeps_it_a_parameter():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    handle = block.create_var(name="w", shape=[3], dtype="float32", persistable=True)
    assert block.var("w") is w and isinstance(block.var("w"), Parameter) and main.all_parameters() == [w]
    assert not isinstance(handle, Parameter) and handle.desc.id() == w.desc.id() and w.trainable


def test_all_parameters_follow_the_desc():
    main, x, s, r, w, y = _program()
    assert main.all_parameters() == [w]
    main.global_block().desc.remove_var("w")
    assert main.all_parameters() == []


# ---------------------------------------------------------------- handles to removed descs

def test_a_handle_to_a_removed_desc_stays_valid_and_detached():
    """A Python handle shares ownership of its desc: after removal it still reads its own desc (not
    whatever the C++ heap put at the freed address) and its edits no longer touch the program."""
    main, x, s, r, w, y = _program()
    block = main.global_block()
    relu, relu_desc = block.ops[1], block.ops[1].desc
    block._remove_op(1)
    sd = block.desc.find_var(s.name)
    block.desc.remove_var(s.name)
    for i in range(64):  # reuse the freed memory with other ops and vars
        block.desc.insert_desc(0, _scale_desc("x", "x", float(i)))
        block.desc.var("filler_%d" % i)
    assert relu.type == "relu" and relu_desc.type() == "relu" and relu.input("X") == [s.name]
    assert sd.name() == s.name
    version = main.desc.version()
    relu_desc.set_attr("op_role", 1)
    sd.set_shape([7])
    assert main.desc.version() == version and sd.shape() == [7]
    assert relu not in block.ops and s.name not in block.vars


def test_block_versions_count_structural_changes_only():
    main, x, s, r, w, y = _program()
    block = main.global_block()
    ops_v, vars_v = block.desc.ops_version(), block.desc.vars_version()
    before = list(block.ops)
    block.ops[0]._set_attr("scale", 9.0)
    s.desc.set_shape([-1, 3])
    x.persistable = False
    assert (block.desc.ops_version(), block.desc.vars_version()) == (ops_v, vars_v)
    assert list(block.ops) == before and block.ops[0].attr("scale") == 9.0
    block.desc.insert_desc(0, _scale_desc("x", "x"))
    assert block.desc.ops_version() > ops_v and block.desc.vars_version() == vars_v
    block.desc.var("another")
    assert block.desc.vars_version() > vars_v
    assert len(block.ops) == 4 and block.ops[1:] == before and "another" in list(block.vars)


def test_facts_row_copy_copies_every_field():
    from fluidlite.framework import _VarFacts
    row = _VarFacts()
    for _i, k in enumerate(_VarFacts.__slots__):
        setattr(row, k, object())
    c = row.copy()
    assert c is not row and all(getattr(c, k) is getattr(row, k) for k in _VarFacts.__slots__)


def test_names_only_iteration_does_not_wrap_and_parameters_keep_creation_order():
    main = fluid.Program()
    block = main.global_block()
    for i in range(5):
        block.desc.var("plain_%d" % i)
    p1 = block.create_parameter(name="p1", shape=[2], dtype="float32")
    block.desc.var("between")
    p0 = block.create_parameter(name="p0", shape=[2], dtype="float32")
    assert list(block.vars) == ["plain_%d" % i for i in range(5)] + ["p1", "between", "p0"]
    assert len(block._var_wrappers) == 2  # names and len did not wrap the desc-made vars
    assert block.all_parameters() == [p1, p0] and len(block._var_wrappers) == 2
    assert [type(v).__name__ for v in block.vars.values()] == ["Variable"] * 5 + ["Parameter", "Variable", "Parameter"]
    block._remove_var("plain_0")
    assert "plain_0" not in block.vars and len(block._var_wrappers) == 7 and len(block.vars) == 7
