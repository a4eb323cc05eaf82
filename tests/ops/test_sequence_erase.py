"""sequence_erase: the listed ids removed from each sequence and the last LoD level shrunk (op only, as in Fluid 1.8:
no layer)."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def erase_per_sequence(x, lens, tokens):
    kept, new_lens, start = [], [], 0
    for n in lens:
        seq = [v for v in x[start:start + n, 0] if v not in tokens]
        kept += seq
        new_lens.append(len(seq))
        start += n
    return np.array(kept, x.dtype).reshape(-1, 1), new_lens


# ragged, a sequence erased whole, one-element sequences, empty input sequences, nothing erased, no tokens
CASES = [([3, 3, 4], [2, 3, 5]),
         ([2, 4], [1]),
         ([1, 1, 1], [4]),
         ([0, 5, 0], [6, 7]),
         ([4], [99]),
         ([3, 2], [])]


@pytest.mark.parametrize("lens,tokens", CASES)
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_forward(lens, tokens, dtype):
    x = np.random.RandomState(len(lens)).randint(0, 8, (sum(lens), 1)).astype(dtype)
    out, out_lens = erase_per_sequence(x, lens, tokens)
    OpTest("sequence_erase", {"X": (x, [lens])}, {"Out": (out, [out_lens])}, {"tokens": tokens}).check_output()


def test_fluid_doc_example():
    x = np.array([2, 2, 6, 1, 3, 9, 6, 1, 0, 1], "int64").reshape(-1, 1)
    want = np.array([6, 1, 9, 6, 1, 0, 1], "int64").reshape(-1, 1)
    t = OpTest("sequence_erase", {"X": (x, [[3, 3, 4]])}, {"Out": (want, [[1, 2, 4]])}, {"tokens": [2, 3, 5]})
    t.check_output()


def test_two_levels_keep_the_upper_one():
    x = np.array([1, 0, 2, 0, 0, 3, 4], "int64").reshape(-1, 1)
    upper, lens = [2, 1], [3, 2, 2]
    out, out_lens = erase_per_sequence(x, lens, [0])
    assert out_lens == [2, 0, 2]
    OpTest("sequence_erase", {"X": (x, [upper, lens])}, {"Out": (out, [upper, out_lens])},
           {"tokens": [0]}).check_output()


def test_no_layer_and_errors():
    assert not hasattr(fluid.layers, "sequence_erase")  # Fluid 1.8 has the op but no layer
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[1], dtype="int64", lod_level=1)
        out = main.global_block().create_var(name="out", dtype="int64")
        main.global_block().append_op(type="sequence_erase", inputs={"X": [x]}, outputs={"Out": [out]},
                                      attrs={"tokens": [0]})
        assert tuple(out.shape) == (-1, 1) and out.lod_level == 1
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_erase: attribute 'tokens' is required"):
            main.global_block().append_op(type="sequence_erase", inputs={"X": [x]}, outputs={"Out": [out]})
        two = fluid.layers.data("two", shape=[2], dtype="int64", lod_level=1)
        with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_erase: X 'two' \[-1, 2\] must be \[N, 1\]"):
            main.global_block().append_op(type="sequence_erase", inputs={"X": [two]}, outputs={"Out": [out]},
                                          attrs={"tokens": [0]})
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.array([[0], [1], [0], [2]], "int64")
    got, = exe.run(main, feed={"x": (xv, [[2, 2]])}, fetch_list=[out], return_numpy=False)
    assert got.recursive_sequence_lengths() == [[1, 1]]
    np.testing.assert_array_equal(np.array(got), [[1], [2]])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"sequence_erase: X 'x' \[4, 1\] must be a LoDTensor"):
        exe.run(main, feed={"x": xv}, fetch_list=[out])
