"""The branch layers (fluidlite/layers/branches.py, Fluid 1.8's control_flow.py): cond (nested structures, merged
with select_input), case, switch_case, Switch, IfElse against Python equivalents over several runs of one program
with changing conditions; float64 gradients through the branch taken against central differences (zeros for the
branch not taken); nesting; training through a branch; Fluid's error messages."""
import collections

import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers


def _exe():
    return fluid.Executor(fluid.CPUPlace())


def _flag(name="p"):
    return L.data(name=name, shape=[1], dtype="bool", append_batch_size=False)


def _numeric_grad(f, arr, eps=1e-6):
    g = np.zeros_like(arr)
    for idx in np.ndindex(*arr.shape):
        orig = arr[idx]
        arr[idx] = orig + eps
        plus = f()
        arr[idx] = orig - eps
        minus = f()
        arr[idx] = orig
        g[idx] = (plus - minus) / (2 * eps)
    return g


# ------------------------------------------------------------------ cond

def _cond_program():
    """out = cond(p, tanh(x) * 3, x * x + 1), loss = sum(out * v), and d loss / d x."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        v = L.data(name="v", shape=[2, 3], dtype="float64", append_batch_size=False)
        out = L.cond(_flag(), lambda: L.scale(L.tanh(x), 3.0), lambda: L.elementwise_mul(x, x) + 1.0)
        loss = L.reduce_sum(L.elementwise_mul(out, v))
        gx, = fluid.gradients([loss], [x])
    return main, out, loss, gx


def test_cond_equals_python_if_over_runs_of_one_program():
    rng = np.random.RandomState(0)
    main, out, loss, gx = _cond_program()
    exe = _exe()
    for p in [True, False, False, True, True, False]:
        xv, vv = rng.randn(2, 3), rng.randn(2, 3)
        o, g = exe.run(main, feed={"x": xv, "v": vv, "p": np.array([p])}, fetch_list=[out, gx])
        want = 3 * np.tanh(xv) if p else xv * xv + 1
        want_g = 3 * (1 - np.tanh(xv) ** 2) * vv if p else 2 * xv * vv
        np.testing.assert_allclose(o, want, rtol=1e-13)
        np.testing.assert_allclose(g, want_g, rtol=1e-13)


@pytest.mark.parametrize("p", [True, False])
def test_cond_gradient_matches_central_differences(p):
    rng = np.random.RandomState(1)
    main, out, loss, gx = _cond_program()
    exe = _exe()
    xv, vv = rng.randn(2, 3), rng.randn(2, 3)
    feed = {"x": xv, "v": vv, "p": np.array([p])}
    g, = exe.run(main, feed=feed, fetch_list=[gx])
    num = _numeric_grad(lambda: exe.run(main, feed=feed, fetch_list=[loss])[0][0], xv)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-9)


def test_cond_parameters_of_the_branch_not_taken_get_zero_gradients():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[4, 3], dtype="float64", append_batch_size=False)
        p = _flag()
        out = L.cond(p, lambda: L.fc(x, 2, param_attr=fluid.ParamAttr(name="wa"), bias_attr=False),
                     lambda: L.fc(x, 2, param_attr=fluid.ParamAttr(name="wb"), bias_attr=False))
        loss = L.reduce_sum(L.square(out))
        blk = main.global_block()
        ga, gb = fluid.gradients([loss], [blk.var("wa"), blk.var("wb")])
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.RandomState(2).randn(4, 3)
    for p_ in [True, False, True]:
        a, b = exe.run(main, feed={"x": xv, "p": np.array([p_])}, fetch_list=[ga, gb], scope=scope)
        w = np.array(scope.find_var("wa" if p_ else "wb").get_tensor())
        want = xv.T @ (2 * (xv @ w))
        np.testing.assert_allclose(a if p_ else b, want, rtol=1e-12)
        assert not (b if p_ else a).any()


def test_cond_nested_structures_and_mixed_shapes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3], dtype="float32", append_batch_size=False)
        p = _flag()
        Pair = collections.namedtuple("Pair", "a b")

        def true_fn():
            return {"k": [L.scale(x, 2.0), L.fill_constant([1, 2], "int32", 1)], "j": Pair(x, L.cast(x, "int64"))}

        def false_fn():  # other shapes and dtypes are allowed: only the branch that ran is selected
            return {"j": Pair(L.scale(x, -1.0), L.fill_constant([2], "int64", 7)),
                    "k": (L.fill_constant([2, 2], "float32", 0.5), L.fill_constant([3, 4], "int32", 2))}
        res = L.cond(p, true_fn, false_fn)
    assert isinstance(res, dict) and isinstance(res["j"], Pair) and isinstance(res["k"], tuple)  # false_fn's types
    flat = [res["j"].a, res["j"].b, res["k"][0], res["k"][1]]
    exe = _exe()
    xv = np.array([1.0, 2.0, 3.0], "float32")
    t = exe.run(main, feed={"x": xv, "p": np.array([True])}, fetch_list=flat)
    np.testing.assert_array_equal(t[0], xv)
    np.testing.assert_array_equal(t[1], xv.astype("int64"))
    np.testing.assert_array_equal(t[2], 2 * xv)
    np.testing.assert_array_equal(t[3], np.ones((1, 2), "int32"))
    f = exe.run(main, feed={"x": xv, "p": np.array([False])}, fetch_list=flat)
    np.testing.assert_array_equal(f[0], -xv)
    np.testing.assert_array_equal(f[1], [7, 7])
    np.testing.assert_array_equal(f[2], np.full((2, 2), 0.5, "float32"))
    assert f[3].shape == (3, 4) and f[3].dtype == np.int32


def test_nested_cond():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        p, q = _flag("p"), _flag("q")
        out = L.cond(p, lambda: L.cond(q, lambda: L.scale(x, 2.0), lambda: L.elementwise_mul(x, x)),
                     lambda: L.scale(x, -1.0, bias=1.0))
        gx, = fluid.gradients([L.reduce_sum(out)], [x])
    exe = _exe()
    xv = np.array([0.5, -1.5, 2.0])
    for p, q in [(True, True), (True, False), (False, True), (True, True), (False, False), (True, False)]:
        o, g = exe.run(main, feed={"x": xv, "p": np.array([p]), "q": np.array([q])}, fetch_list=[out, gx])
        want, want_g = ((2 * xv, np.full(3, 2.0)) if q else (xv * xv, 2 * xv)) if p else (1 - xv, np.full(3, -1.0))
        np.testing.assert_allclose(o, want)
        np.testing.assert_allclose(g, want_g)


def test_cond_without_outputs_and_with_one_branch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = _flag()
        counter = L.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True, name="counter")
        assert L.cond(p, lambda: L.increment(counter, 1.0) and None) is None
        assert L.cond(p, None, None) is None
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    for p in [True, False, True, True]:
        exe.run(main, feed={"p": np.array([p])}, scope=scope)
    assert float(np.array(scope.find_var("counter").get_tensor())[0]) == 3.0


def test_cond_errors_are_fluids():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data(name="x", shape=[3], dtype="float32", append_batch_size=False)
        p = _flag()
        with pytest.raises(ValueError, match="^Incompatible return values of true_fn and false_fn in cond: true_fn "
                                             "returns None while false_fn returns non-None$"):
            L.cond(p, lambda: None, lambda: x)
        with pytest.raises(ValueError, match="^Incompatible return values of true_fn and false_fn in cond: true_fn "
                                             "returns non-None while false_fn returns None$"):
            L.cond(p, lambda: x)
        with pytest.raises(ValueError, match="^Incompatible return values of true_fn and false_fn in cond: The two "
                                             "structures don't have the same number of elements"):
            L.cond(p, lambda: [x, x], lambda: [x])
        with pytest.raises(ValueError, match="^Incompatible return values of true_fn and false_fn in cond: The two "
                                             "structures don't have the same nested structure"):
            L.cond(p, lambda: [[x], x], lambda: [x, [x]])
        with pytest.raises(TypeError, match="^The true_fn in cond must be callable, but received int$"):
            L.cond(p, 1, lambda: x)
        with pytest.raises(TypeError, match="^The false_fn in cond must be callable, but received str$"):
            L.cond(p, lambda: x, "no")
        with pytest.raises(TypeError, match=r"cond: 'pred' \(x\) must be bool, got float32"):
            L.cond(x, lambda: x, lambda: x)
        with pytest.raises(TypeError, match="cond: 'pred' must be a Variable, got bool"):
            L.cond(True, lambda: x, lambda: x)
        wide = L.data(name="wide", shape=[2], dtype="bool", append_batch_size=False)
        with pytest.raises(ValueError, match=r"cond: 'pred' \(wide\) must hold one element \(shape \[1\]\), got "
                                             r"shape \[2\]"):
            L.cond(wide, lambda: x, lambda: x)
        with pytest.raises(TypeError, match="cond: a branch function must return Variables"):
            L.cond(p, lambda: 1.0, lambda: 2.0)


# ------------------------------------------------------------------ case, switch_case

def _consts(*values):
    return [lambda v=v: L.fill_constant([1], "float32", v) for v in values]


def test_case_takes_the_first_true_pair_and_its_default():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a, b = _flag("a"), _flag("b")
        f1, f2, f3 = _consts(1.0, 2.0, 3.0)
        with_default = L.case([(a, f1), (b, f2)], default=f3)
        last_is_default = L.case([(a, f1), (b, f2)])  # default None: the last pair's fn, its pred unused
        with_tuple = L.case(((b, f2),), default=f3)
    exe = _exe()
    for av, bv in [(True, True), (True, False), (False, True), (False, False)]:
        r = exe.run(main, feed={"a": np.array([av]), "b": np.array([bv])},
                    fetch_list=[with_default, last_is_default, with_tuple])
        first = 1.0 if av else 2.0 if bv else 3.0
        assert [float(v[0]) for v in r] == [first, 1.0 if av else 2.0, 2.0 if bv else 3.0]


def test_case_errors_are_fluids():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = _flag("a")
        f, = _consts(1.0)
        with pytest.raises(TypeError, match=r"The type of 'pred_fn_pairs' in case must be \(<class 'list'>, "
                                            r"<class 'tuple'>\), but received <class 'dict'>"):
            L.case({a: f})
        with pytest.raises(TypeError, match=r"The elements' type of 'pred_fn_pairs' in case must be <class "
                                            r"'tuple'>, but received: <class 'list'>\."):
            L.case([[a, f]])
        with pytest.raises(TypeError, match=r"The tuple's size of 'pred_fn_pairs' in case must be 2, but received: "
                                            r"3-tuple\."):
            L.case([(a, f, f)])
        with pytest.raises(TypeError, match=r"The pred's type of 'pred_fn_pairs' in case must be boolean Variable, "
                                            r"but received: <class 'bool'>\."):
            L.case([(True, f)])
        with pytest.raises(TypeError, match=r"The fn for a of pred_fn_pairs in Op\(case\) must be callable\."):
            L.case([(a, 1)])
        with pytest.raises(TypeError, match=r"The default in Op\(case\) must be callable\."):
            L.case([(a, f)], default=2)


def test_switch_case_dict_pairs_and_list_of_fns():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i32 = L.data(name="i32", shape=[1], dtype="int32", append_batch_size=False)
        i64 = L.data(name="i64", shape=[1], dtype="int64", append_batch_size=False)
        f1, f2, f3, f9 = _consts(1.0, 2.0, 3.0, 9.0)
        by_dict = L.switch_case(i32, {1: f1, 2: f2}, default=f3)
        by_pairs = L.switch_case(i64, [(1, f1), (2, f2)], default=f3)
        by_list = L.switch_case(i64, [f1, f2, f3])        # keys 0, 1, 2; default None: the largest key's fn
        largest_default = L.switch_case(i32, [(0, f1), (4, f2), (7, f9)])
    exe = _exe()
    for k in [0, 1, 2, 3, 4, 7, -1]:
        r = exe.run(main, feed={"i32": np.array([k], "int32"), "i64": np.array([k], "int64")},
                    fetch_list=[by_dict, by_pairs, by_list, largest_default])
        want = [{1: 1.0, 2: 2.0}.get(k, 3.0)] * 2 + [{0: 1.0, 1: 2.0}.get(k, 3.0), {0: 1.0, 4: 2.0}.get(k, 9.0)]
        assert [float(v[0]) for v in r] == want, k


def test_switch_case_errors_are_fluids():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        i = L.data(name="i", shape=[1], dtype="int64", append_batch_size=False)
        f, g = _consts(1.0, 2.0)
        fl = L.data(name="fl", shape=[1], dtype="float32", append_batch_size=False)
        with pytest.raises(TypeError, match=r"switch_case: 'branch_index' \(fl\) must be uint8 or int32 or int64, "
                                            r"got float32"):
            L.switch_case(fl, [f])
        with pytest.raises(ValueError, match=r"The key in 'branch_fns' must be unique, but '1' appears more than "
                                             r"once\."):
            L.switch_case(i, [(1, f), (1, g)])
        with pytest.raises(TypeError, match=r"The key's type of 'branch_fns' in switch_case must be <class 'int'>, "
                                            r"but received: <class 'str'>\."):
            L.switch_case(i, [("1", f)])
        with pytest.raises(TypeError, match=r"The type of function for key 2 of 'branch_fns' in switch_case must be "
                                            r"callable, but received: <class 'int'>\."):
            L.switch_case(i, {2: 5})
        with pytest.raises(TypeError, match=r"The type of 'branch_fns' in switch_case must be"):
            L.switch_case(i, f)


# ------------------------------------------------------------------ Switch

def test_switch_runs_only_the_first_true_case():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        s = L.data(name="s", shape=[1], dtype="float32", append_batch_size=False)
        hits = [L.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True, name="hit%d" % i)
                for i in range(4)]
        out = L.create_global_var(shape=[1], value=-1.0, dtype="float32", persistable=True, name="out")
        with L.Switch() as switch:
            for i, bound in enumerate([2.0, 5.0, 8.0]):  # s < 2, s < 5 and s < 8 overlap: the first one wins
                with switch.case(L.less_than(s, L.fill_constant([1], "float32", bound))):
                    L.increment(hits[i], 1.0)
                    L.assign(L.fill_constant([1], "float32", float(i)), out)
            with switch.default():
                L.increment(hits[3], 1.0)
                L.assign(L.fill_constant([1], "float32", 3.0), out)
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    counts = np.zeros(4)
    for sv in [0, 1, 3, 9, 7, 4, 2, 12, 5]:
        got, = exe.run(main, feed={"s": np.array([sv], "float32")}, fetch_list=[out], scope=scope)
        k = 0 if sv < 2 else 1 if sv < 5 else 2 if sv < 8 else 3
        counts[k] += 1
        assert got[0] == k
        np.testing.assert_array_equal([np.array(scope.find_var("hit%d" % i).get_tensor())[0] for i in range(4)],
                                      counts)


def test_switch_misuse():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        c = _flag("c")
        switch = L.Switch()
        with pytest.raises(ValueError, match="case should be called inside with"):
            switch.case(c)
        with L.Switch() as sw:
            with pytest.raises(ValueError, match="there should be at least one condition"):
                sw.default()
            f = L.data(name="f", shape=[1], dtype="float32", append_batch_size=False)
            with pytest.raises(TypeError, match=r"the member function case of fluid.layers.Switch: 'condition' "
                                                r"\(f\) must be bool, got float32"):
                sw.case(f)


# ------------------------------------------------------------------ IfElse

def _ifelse_program(lod_level=0):
    """Rows where c is true: x @ w (w a parameter used only there); the others: x * x. loss = sum(out * v)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data(name="x", shape=[-1, 3], dtype="float64", append_batch_size=False, lod_level=lod_level)
        x.stop_gradient = False
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        v = L.data(name="v", shape=[-1, 3], dtype="float64", append_batch_size=False)
        w = L.create_parameter(shape=[3, 3], dtype="float64", name="w")
        ie = L.IfElse(c)
        with ie.true_block():
            ie.output(L.matmul(ie.input(x), w))
        with ie.false_block():
            xf = ie.input(x)
            ie.output(L.elementwise_mul(xf, xf))
        out, = ie()
        loss = L.reduce_sum(L.elementwise_mul(out, v))
        gx, gw = fluid.gradients([loss], [x, w])
    return main, startup, out, loss, gx, gw


def test_ifelse_row_by_row_against_numpy_over_runs():
    main, startup, out, loss, gx, gw = _ifelse_program()
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    wv = np.array(scope.find_var("w").get_tensor())
    rng = np.random.RandomState(3)
    # all-true and all-false runs between mixed ones: a branch with no rows does not run, and its old output is
    # never merged into a later run's
    for mask in [[1, 0, 1, 1], [0, 0, 0], [1, 1], [0, 1, 0, 0, 1], [1], [0]]:
        m = np.array(mask, bool).reshape(-1, 1)
        xv, vv = rng.randn(len(mask), 3), rng.randn(len(mask), 3)
        o, g, gwv = exe.run(main, feed={"x": xv, "c": m, "v": vv}, fetch_list=[out, gx, gw], scope=scope)
        want, want_g, want_gw = np.zeros_like(xv), np.zeros_like(xv), np.zeros((3, 3))
        for i, mi in enumerate(mask):  # row by row
            if mi:
                want[i] = xv[i] @ wv
                want_g[i] = vv[i] @ wv.T
                want_gw += np.outer(xv[i], vv[i])
            else:
                want[i] = xv[i] * xv[i]
                want_g[i] = 2 * xv[i] * vv[i]
        np.testing.assert_allclose(o, want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gwv, want_gw, rtol=1e-12, atol=1e-14)


def test_ifelse_gradient_matches_central_differences():
    main, startup, out, loss, gx, gw = _ifelse_program()
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(4)
    xv, vv = rng.randn(5, 3), rng.randn(5, 3)
    feed = {"x": xv, "c": np.array([1, 0, 0, 1, 0], bool).reshape(-1, 1), "v": vv}
    g, = exe.run(main, feed=feed, fetch_list=[gx], scope=scope)
    num = _numeric_grad(lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0], xv)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-9)


def test_ifelse_on_sequences():
    # with a LoD input, cond has one entry per level-0 sequence; the merged output keeps the input's LoD
    main, startup, out, loss, gx, gw = _ifelse_program(lod_level=1)
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    wv = np.array(scope.find_var("w").get_tensor())
    lens = [2, 0, 1, 3]
    xv = np.random.RandomState(5).randn(6, 3)
    m = np.array([0, 1, 1, 0], bool).reshape(-1, 1)
    feed = {"x": fluid.create_lod_tensor(xv, [lens], fluid.CPUPlace()), "c": m, "v": np.ones((6, 3))}
    o, g = exe.run(main, feed=feed, fetch_list=[out, gx], return_numpy=False, scope=scope)
    assert o.recursive_sequence_lengths() == [lens] and g.recursive_sequence_lengths() == [lens]
    starts = np.cumsum([0] + lens)
    want = np.zeros_like(xv)
    for s, mi in enumerate(m.reshape(-1)):  # sequence by sequence
        rows = xv[starts[s]:starts[s + 1]]
        want[starts[s]:starts[s + 1]] = rows @ wv if mi else rows * rows
    np.testing.assert_allclose(np.array(o), want, rtol=1e-12)


def test_ifelse_with_one_block_returns_its_outputs_unmerged():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 2], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        ie = L.IfElse(c)
        with ie.true_block():
            ie.output(L.scale(ie.input(x), 2.0))
        outs = ie()
    assert len(outs) == 1
    xv = np.arange(8, dtype="float32").reshape(4, 2)
    got, = _exe().run(main, feed={"x": xv, "c": np.array([1, 0, 0, 1], bool).reshape(-1, 1)}, fetch_list=outs)
    np.testing.assert_array_equal(got, 2 * xv[[0, 3]])


def test_ifelse_misuse_is_fluids():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = L.data(name="x", shape=[-1, 2], dtype="float32", append_batch_size=False)
        c = L.data(name="c", shape=[-1, 1], dtype="bool", append_batch_size=False)
        ie = L.IfElse(c)
        with pytest.raises(ValueError, match="input must in true/false blocks"):
            ie.input(x)
        with pytest.raises(ValueError, match="output can only be invoked in the sub-block"):
            ie.output(x)
        with pytest.raises(ValueError, match="Must invoke true_block/false_block before __call__"):
            ie()
        with pytest.raises(ValueError, match="Must set output inside block"):
            with ie.true_block():
                ie.input(x)
        with pytest.raises(ValueError, match="You cannot invoke IfElse.block\\(\\) inside a block"):
            with ie.true_block():
                ie.false_block()
        with ie.true_block():
            ie.output(ie.input(x), ie.input(x))
        with ie.false_block():
            ie.output(ie.input(x))
        with pytest.raises(ValueError, match="The output side must be same"):
            ie()
        with pytest.raises(TypeError, match="fluid.layers.IfElse: 'cond' must be a Variable, got list"):
            L.IfElse([1])
        assert fluid.default_main_program().current_block().idx == 0


# ------------------------------------------------------------------ training through a branch

def test_training_through_ifelse_learns_a_piecewise_linear_map():
    # y = 3x - 1 where x > 0, y = -2x + 0.5 elsewhere: one fc per branch, trained together through IfElse
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[-1, 1], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[-1, 1], dtype="float32", append_batch_size=False)
        c = L.greater_than(x, L.fill_constant([1], "float32", 0.0))
        ie = L.IfElse(c)
        with ie.true_block():
            ie.output(L.fc(ie.input(x), 1, param_attr=fluid.ParamAttr(name="wp"), bias_attr=fluid.ParamAttr(name="bp")))
        with ie.false_block():
            ie.output(L.fc(ie.input(x), 1, param_attr=fluid.ParamAttr(name="wn"), bias_attr=fluid.ParamAttr(name="bn")))
        pred, = ie()
        loss = L.mean(L.square(pred - y))
        fluid.optimizer.SGD(learning_rate=0.3).minimize(loss)
    exe = _exe()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.RandomState(8)
    for _ in range(1000):
        xv = rng.uniform(-1, 1, (32, 1)).astype("float32")
        yv = np.where(xv > 0, 3 * xv - 1, -2 * xv + 0.5).astype("float32")
        last, = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[loss], scope=scope)
    params = {n: float(np.array(scope.find_var(n).get_tensor()).reshape(-1)[0]) for n in ("wp", "bp", "wn", "bn")}
    assert last[0] < 1e-3
    np.testing.assert_allclose([params["wp"], params["bp"], params["wn"], params["bn"]], [3, -1, -2, 0.5], atol=0.05)


def test_an_inference_model_with_a_cond_saves_loads_and_runs_both_branches(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data(name="x", shape=[4], dtype="float32")
        p = L.less_than(L.reduce_sum(x), L.fill_constant([1], "float32", 0.0))
        out = L.cond(p, lambda: L.fc(x, 3, act="relu"), lambda: L.fc(x, 3, act="tanh"))
        test_program = main.clone(for_test=True)
        fluid.optimizer.SGD(0.1).minimize(L.mean(out))
    exe = _exe()
    exe.run(startup)
    xv = np.random.RandomState(0).randn(1, 4).astype("float32")
    want = [exe.run(test_program, feed={"x": v}, fetch_list=[out])[0] for v in (xv, -xv)]
    fluid.io.save_inference_model(str(tmp_path), ["x"], [out], exe, main)
    program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert [op.type for op in program.global_block().ops].count("conditional_block") == 2
    for v, w in zip((xv, -xv), want):
        np.testing.assert_array_equal(exe.run(program, feed={feeds[0]: v}, fetch_list=fetches)[0], w)
    assert not np.array_equal(want[0], want[1])  # one input takes each branch


def test_cond_inside_a_static_rnn_step():
    # each step's cond keeps its own scope inside that step's scope; gradients flow back through the steps
    T, B, D = 4, 2, 3
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = L.data(name="xs", shape=[T, B, D], dtype="float64", append_batch_size=False)
        xs.stop_gradient = False
        flags = L.data(name="flags", shape=[T, 1], dtype="bool", append_batch_size=False)
        rnn = L.StaticRNN()
        with rnn.step():
            x_t, f_t = rnn.step_input(xs), rnn.step_input(flags)
            h = rnn.memory(shape=[-1, D], batch_ref=x_t, init_value=1.0)
            nh = L.cond(f_t, lambda: L.elementwise_add(h, x_t), lambda: L.elementwise_mul(h, x_t))
            rnn.update_memory(h, nh)
            rnn.step_output(nh)
        out = rnn()
        loss = L.reduce_sum(out)
        gx, = fluid.gradients([loss], [xs])
    exe = _exe()
    exe.run(startup)
    xv = np.random.RandomState(9).randn(T, B, D)
    for fv in ([1, 0, 1, 1], [0, 0, 1, 0], [1, 0, 1, 1]):
        fl = np.array(fv, bool).reshape(T, 1)
        feed = {"xs": xv, "flags": fl}
        o, g = exe.run(main, feed=feed, fetch_list=[out, gx])
        h, want = np.ones((B, D)), []
        for t in range(T):  # step by step
            h = h + xv[t] if fv[t] else h * xv[t]
            want.append(h)
        np.testing.assert_allclose(o, np.stack(want), rtol=1e-13)
        num = _numeric_grad(lambda feed=feed: exe.run(main, feed=feed, fetch_list=[loss])[0][0], xv)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)
