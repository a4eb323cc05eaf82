"""OpTest: a declarative op test harness (Fluid's style), numpy as the oracle.

    t = OpTest("scale", inputs={"X": x}, attrs={"scale": 2.0}, outputs={"Out": 2 * x})
    t.check_output()                 # runs the single op on every available place, compares outputs
    t.check_grad(["X"], "Out")       # append_backward vs central differences (float64)

Duplicable slots take a list of (name, array) pairs: ``inputs={"X": [("x0", a), ("x1", b)]}``.
An expected output of ``None`` is created but not compared (e.g. reshape2's XShape).

LoD, as in Fluid's OpTest: an input or expected output given as ``(array, recursive_seq_lens)`` is fed as a
LoDTensor with that LoD (``inputs={"X": (x, [[2, 3]])}``), and an expected output's LoD is compared too
(``outputs={"Out": (y, [[1, 1]])}``). Gradient checks perturb the array and keep the LoD.

Tensor arrays (LOD_TENSOR_ARRAY slots): a list of entries, each an array or an ``(array, recursive_seq_lens)``
pair, or ``TensorArray([...])`` (needed for an empty array; a list of ``(name, value)`` pairs stays a duplicable
slot). An input array is built in the program by one ``write_to_array`` per entry from a fed variable per entry, so
gradient checks perturb each entry; ``None`` leaves an entry unwritten. An expected output array is compared entry
by entry (length, shapes, values, LoDs; ``None``: an entry never written), and a gradient check's loss adds the
mean of every entry it names.

Rank tables (LOD_RANK_TABLE slots): ``RankTable(recursive_seq_lens, level=0)``, built in the program by
``lod_rank_table`` from a fed variable with that LoD.

Every passing check_output records its op type as numpy-checked, every passing check_grad as gradient-checked
(CHECKED); tests/ops/test_coverage.py, which runs last, fails when a registered op was not. A test that compares
with numpy or central differences without OpTest says what it checked with ``record_checked``.
"""
import numpy as np

import fluidlite as fluid
from fluidlite import core


# What this session checked, by kind: "output" (values compared with a numpy reference), "grad" (gradients
# compared with central differences) and "statistical" (samples of a random op compared with the distribution
# it draws from). Filled at run time; read by tests/ops/test_coverage.py.
CHECKED = {"output": set(), "grad": set(), "statistical": set()}

# The test files this session runs (collected, not deselected), the ones it deselected, and the tests that
# failed so far: tests/conftest.py fills them in, tests/ops/test_coverage.py skips unless the session ran every
# file that records checks.
SESSION = {"ran": set(), "deselected": set(), "failed": []}


def record_checked(kind, *op_types):
    """Record that this test checked `op_types` (kind "output", "grad" or "statistical") without OpTest.

    Call it after the comparisons, and only for the ops whose own values (or gradients, or distribution) the
    test really compares with numpy or central differences, not for every op the program happens to run."""
    if kind not in CHECKED:
        raise ValueError("record_checked: kind must be one of %s, got %r" % (sorted(CHECKED), kind))
    unknown = [t for t in op_types if not core.has_op(t)]
    if unknown or not op_types:
        raise ValueError("record_checked: no such registered op types: %s" % (unknown or "(none given)"))
    CHECKED[kind].update(op_types)


def available_places():
    places = [fluid.CPUPlace()]
    if core.is_compiled_with_cuda() and core.get_cuda_device_count() > 0:
        places.append(fluid.CUDAPlace(0))
    return places


def split_lod(value):
    """(array or None, recursive_seq_lens or None) of a slot value: an array, or an (array, lengths) pair."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError("OpTest: a LoD value is (array, recursive_seq_lens), got a tuple of %d" % len(value))
        return np.asarray(value[0]), [list(level) for level in value[1]]
    return (None if value is None else np.asarray(value)), None


_ARRAY = core.VarDesc.VarType.LOD_TENSOR_ARRAY


class TensorArray(list):
    """The value of a LOD_TENSOR_ARRAY slot: its entries, each an array, an (array, recursive_seq_lens) pair or None
    (an entry never written). A plain list of such entries is read as one too, unless it is empty."""


def is_tensor_array(value):
    if isinstance(value, TensorArray):
        return True
    return isinstance(value, list) and bool(value) and all(
        e is None or isinstance(e, np.ndarray) or (isinstance(e, tuple) and not isinstance(e[0], str)) for e in value)


def _as_list(slot, value):
    """Normalise a slot value to [(var_name, value)] (each value an array, an (array, lod) pair, a TensorArray or
    None) and say whether the slot is duplicable."""
    if isinstance(value, list) and not is_tensor_array(value):
        return list(value), True
    name = slot.lower() + "_var" if slot != "Out" else "out_var"
    return [(name, value)], False


class RankTable:
    """The value of a LOD_RANK_TABLE slot: the rank table of LoD `recursive_seq_lens` at `level`."""

    def __init__(self, recursive_seq_lens, level=0):
        self.lod = [list(level_lens) for level_lens in recursive_seq_lens]
        self.level = level


def _array_dtype(entries, override):
    """The dtype of an array's entries (float32 for an empty one), with the float override of a gradient check."""
    for e in entries:
        if e is not None:
            arr = split_lod(e)[0]
            return override if override is not None and arr.dtype.kind == "f" else arr.dtype
    return np.dtype("float32")


def lod_feed(feed, lods):
    """`feed` with each array named in `lods` made a LoDTensor with that LoD."""
    out = dict(feed)
    for name, lens in lods.items():
        out[name] = fluid.create_lod_tensor(feed[name], lens, fluid.CPUPlace())
    return out


class OpTest:
    def __init__(self, op_type, inputs, outputs, attrs=None):
        self.op_type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs or {}

    # ------------------------------------------------------------------ program construction
    def _build(self, stop_gradient_inputs=True, input_dtype_override=None):
        main, startup = fluid.Program(), fluid.Program()
        feed, in_vars, out_vars = {}, {}, {}
        self.feed_lod = {}  # input variable name -> recursive_seq_lens
        with fluid.program_guard(main, startup):
            block = main.global_block()

            def fed_var(slot, name, value):
                arr, lod = split_lod(value)
                if input_dtype_override is not None and arr.dtype.kind == "f":
                    arr = arr.astype(input_dtype_override)
                v = block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                     stop_gradient=stop_gradient_inputs, lod_level=len(lod or []))
                feed[name] = arr
                if lod is not None:
                    self.feed_lod[name] = lod
                in_vars[(slot, name)] = v
                return v

            ins = {}
            for slot, value in self.inputs.items():
                items, dup = _as_list(slot, value)
                vs = []
                for name, item in items:
                    name = "in_%s_%s" % (slot, name)
                    if isinstance(item, RankTable):
                        source = name + "_lod"  # a tensor with that LoD, whose rank table the slot reads
                        feed[source] = np.zeros((sum(item.lod[-1]), 1), "float32")
                        self.feed_lod[source] = item.lod
                        table = block.create_var(name=name, type=core.VarDesc.VarType.LOD_RANK_TABLE)
                        block.append_op(type="lod_rank_table", outputs={"Out": [table]}, attrs={"level": item.level},
                                        inputs={"X": [block.create_var(name=source, shape=[-1, 1], dtype="float32",
                                                                       lod_level=len(item.lod))]})
                        vs.append(table)
                        continue
                    if not is_tensor_array(item):
                        vs.append(fed_var(slot, name, item))
                        continue
                    array = block.create_var(name=name, type=_ARRAY,
                                             dtype=_array_dtype(item, input_dtype_override))
                    for k, entry in enumerate(item):
                        if entry is not None:
                            index = fluid.layers.fill_constant(shape=[1], dtype="int64", value=k)
                            block.append_op(type="write_to_array", outputs={"Out": [array]},
                                            inputs={"X": [fed_var(slot, "%s_%d" % (name, k), entry)], "I": [index]})
                    vs.append(array)
                ins[slot] = vs
            outs = {}
            for slot, value in self.outputs.items():
                items, dup = _as_list(slot, value)
                vs = []
                for name, item in items:
                    if is_tensor_array(item):
                        v = block.create_var(name="out_%s_%s" % (slot, name), type=_ARRAY,
                                             dtype=_array_dtype(item, input_dtype_override))
                        vs.append(v)
                        out_vars[(slot, name)] = (v, TensorArray(item), None)
                        continue
                    arr, lod = split_lod(item)
                    dtype = arr.dtype if arr is not None else "float32"
                    if input_dtype_override is not None and arr is not None and arr.dtype.kind == "f":
                        dtype = input_dtype_override
                    v = block.create_var(name="out_%s_%s" % (slot, name), dtype=dtype)
                    vs.append(v)
                    out_vars[(slot, name)] = (v, arr, lod)
                outs[slot] = vs
            op = block.append_op(type=self.op_type, inputs=ins, outputs=outs, attrs=dict(self.attrs))
        return main, startup, feed, in_vars, out_vars, op

    # ------------------------------------------------------------------ forward
    def check_output(self, atol=1e-5, rtol=1e-5, places=None, equal_nan=False):
        main, startup, feed, _, out_vars, _ = self._build()
        checked = [(key, v, arr, lod) for key, (v, arr, lod) in out_vars.items() if arr is not None]
        for place in places or available_places():
            exe = fluid.Executor(place)
            exe.run(startup)
            results = exe.run(main, feed=lod_feed(feed, self.feed_lod), fetch_list=[v for _, v, _, _ in checked],
                              return_numpy=False)
            for (key, _v, expect, lod), value in zip(checked, results):
                what = "%s %s on %s" % (self.op_type, key[0], place)
                if not isinstance(expect, TensorArray):
                    self._compare(what, value, expect, lod, atol, rtol, equal_nan)
                    continue
                assert isinstance(value, core.LoDTensorArray), "%s: got a %s, expected a LoDTensorArray" % (
                    what, type(value).__name__)
                assert len(value) == len(expect), "%s: %d entries, expected %d" % (what, len(value), len(expect))
                for k, entry in enumerate(expect):
                    if entry is None:
                        assert not value[k]._is_initialized(), "%s: entry %d was written, expected none" % (what, k)
                        continue
                    self._compare("%s entry %d" % (what, k), value[k], *split_lod(entry), atol, rtol, equal_nan)
        if checked:  # every expected output None: nothing was compared
            record_checked("output", self.op_type)
        return main

    @staticmethod
    def _compare(what, tensor, expect, lod, atol, rtol, equal_nan):
        assert tensor._is_initialized(), "%s: never written" % what
        got = np.array(tensor)
        if lod is not None:
            assert tensor.recursive_sequence_lengths() == lod, "%s: LoD %s, expected %s" % (
                what, tensor.recursive_sequence_lengths(), lod)
        assert got.shape == expect.shape, "%s: shape %s, expected %s" % (what, got.shape, expect.shape)
        if expect.dtype.kind in "biu":
            np.testing.assert_array_equal(got, expect, err_msg=what)
        else:
            np.testing.assert_allclose(got, expect, atol=atol, rtol=rtol, equal_nan=equal_nan, err_msg=what)

    # ------------------------------------------------------------------ gradients
    def _loss_program(self, inputs_to_check, output_names):
        """float64 copy of the op with loss = sum over `output_names` of mean(output)."""
        main, startup, feed, in_vars, out_vars, _ = self._build(stop_gradient_inputs=True,
                                                                input_dtype_override="float64")
        targets = {}
        for slot in inputs_to_check:
            for (s, name), v in in_vars.items():
                if s == slot:
                    v.stop_gradient = False
                    targets[name] = v
        if not targets:
            raise ValueError("check_grad: no input slot named %s" % (inputs_to_check,))
        with fluid.program_guard(main, startup):
            means = []
            for (slot, _), (v, expect, _) in out_vars.items():
                if slot not in output_names:
                    continue
                if not isinstance(expect, TensorArray):
                    means.append(fluid.layers.mean(v))
                    continue
                for k, entry in enumerate(expect):  # the entries the expected output has
                    if entry is not None:
                        index = fluid.layers.fill_constant(shape=[1], dtype="int64", value=k)
                        means.append(fluid.layers.mean(fluid.layers.array_read(v, index)))
            loss = means[0] if len(means) == 1 else fluid.layers.sums(means)
        return main, startup, feed, targets, loss

    def check_grad(self, inputs_to_check, output_names, no_grad_set=None, max_relative_error=1e-5,
                   numeric_delta=1e-6, places=None, atol=1e-8):
        if isinstance(output_names, str):
            output_names = [output_names]
        main, startup, feed, targets, loss = self._loss_program(inputs_to_check, output_names)
        with fluid.program_guard(main, startup):
            grads = fluid.gradients([loss], list(targets.values()), no_grad_set=no_grad_set)
        for place in places or available_places():
            exe = fluid.Executor(place)
            exe.run(startup)
            analytic = [np.array(t) for t in exe.run(main, feed=lod_feed(feed, self.feed_lod), fetch_list=list(grads),
                                                     return_numpy=False)]  # X@GRAD has X's LoD
            for (name, _var), got in zip(targets.items(), analytic):
                want = self._numeric_grad(exe, main, feed, name, loss, numeric_delta, self.feed_lod)
                err = np.abs(got - want) / np.maximum(np.abs(want), 1e-3)
                bad = (err > max_relative_error) & (np.abs(got - want) > atol)
                assert not bad.any(), (
                    "%s: gradient of %s on %s differs from central differences; max relative error %g at %s\n"
                    "analytic:\n%s\nnumeric:\n%s" % (self.op_type, name, place, err.max(),
                                                     np.unravel_index(err.argmax(), err.shape), got, want))
        record_checked("grad", self.op_type)

    @staticmethod
    def _numeric_grad(exe, program, feed, name, loss, delta, lods=None):
        feed = lod_feed(feed, {n: lens for n, lens in (lods or {}).items() if n != name})
        lod = (lods or {}).get(name)

        def fed(arr):  # the perturbed input, with its LoD
            return arr if lod is None else fluid.create_lod_tensor(arr, lod, fluid.CPUPlace())

        base = np.array(feed[name]).astype(np.float64)
        grad = np.zeros_like(base)
        flat, gflat = base.reshape(-1), grad.reshape(-1)
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + delta
            plus = exe.run(program, feed=dict(feed, **{name: fed(base)}), fetch_list=[loss])[0].sum()
            flat[i] = orig - delta
            minus = exe.run(program, feed=dict(feed, **{name: fed(base)}), fetch_list=[loss])[0].sum()
            flat[i] = orig
            gflat[i] = (plus - minus) / (2 * delta)
        return grad


def declare(block, name, shape, dtype="float32"):
    """A variable of `block`, for tests that build ops by hand."""
    return block.create_var(name=name, shape=shape, dtype=dtype)


def run(main, feed, fetch, startup=None):
    """Runs `startup` (if given) then `main` once on the CPU; returns the fetched arrays."""
    exe = fluid.Executor(fluid.CPUPlace())
    if startup is not None:
        exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=fetch)
