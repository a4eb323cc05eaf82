"""im2sequence: each image's kernel patches as one sequence (with and without the real image sizes Y), its gradient,
the layer and errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def im2sequence_ref(x, k, s=(1, 1), p=(0, 0, 0, 0), real=None, out_stride=(1, 1)):
    """Per image: the patches of out_h x out_w positions, row by row; each patch flattened as (c, ki, kj)."""
    n, c, h, w = x.shape
    rows, lens = [], []
    for i in range(n):
        img = np.pad(x[i], [(0, 0), (p[0], p[2] + h), (p[1], p[3] + w)])  # extra zeros past the real-size patches
        hh, ww = (h, w)
        if real is not None:  # the real size divided by out_stride, rounded up
            hh, ww = -(-int(real[i][0]) // out_stride[0]), -(-int(real[i][1]) // out_stride[1])
        oh, ow = (hh + p[0] + p[2] - k[0]) // s[0] + 1, (ww + p[1] + p[3] - k[1]) // s[1] + 1
        for a in range(oh):
            for b in range(ow):
                rows.append(img[:, a * s[0]:a * s[0] + k[0], b * s[1]:b * s[1] + k[1]].reshape(-1))
        lens.append(oh * ow)
    return np.array(rows, x.dtype).reshape(-1, c * k[0] * k[1]), [lens]


# (shape, kernels, strides, paddings): Fluid's doc case, padding on every side, stride > kernel, 1x1, one image,
# wide kernels with strides and padding, a full-height kw = 1 kernel (narrow kernels, kw < 3, take the kernel's
# tap-by-tap loops, wider ones its patch-by-patch loops)
CASES = [((2, 2, 3, 3), (2, 2), (1, 1), (0, 0, 0, 0)),
         ((2, 3, 5, 4), (3, 2), (2, 1), (1, 0, 2, 1)),
         ((3, 1, 7, 6), (2, 2), (3, 3), (0, 1, 0, 1)),
         ((2, 2, 3, 4), (1, 1), (1, 1), (0, 0, 0, 0)),
         ((1, 2, 4, 5), (4, 5), (1, 1), (0, 0, 0, 0)),
         ((2, 2, 6, 7), (3, 3), (2, 2), (1, 1, 1, 2)),
         ((2, 2, 5, 6), (5, 1), (1, 2), (0, 2, 1, 1)),
         ((1, 1, 3, 40), (3, 1), (1, 1), (0, 0, 0, 0))]


@pytest.mark.parametrize("shape,k,s,p", CASES)
def test_forward_and_grad(shape, k, s, p):
    x = np.random.RandomState(sum(shape)).uniform(-1, 1, shape)
    t = OpTest("im2sequence", {"X": x}, {"Out": im2sequence_ref(x, k, s, p)},
               {"kernels": list(k), "strides": list(s), "paddings": list(p)})
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_fluid_doc_example():
    x = np.array([[[[6, 2, 1], [8, 3, 5], [0, 2, 6]], [[2, 4, 4], [6, 3, 0], [6, 4, 7]]],
                  [[[6, 7, 1], [5, 7, 9], [2, 4, 8]], [[1, 2, 1], [1, 3, 5], [9, 0, 8]]]], "float32")
    want = np.array([[6, 2, 8, 3, 2, 4, 6, 3], [2, 1, 3, 5, 4, 4, 3, 0], [8, 3, 0, 2, 6, 3, 6, 4],
                     [3, 5, 2, 6, 3, 0, 4, 7], [6, 7, 5, 7, 1, 2, 1, 3], [7, 1, 7, 9, 2, 1, 3, 5],
                     [5, 7, 2, 4, 1, 3, 9, 0], [7, 9, 4, 8, 3, 5, 0, 8]], "float32")
    OpTest("im2sequence", {"X": x}, {"Out": (want, [[4, 4]])}, {"kernels": [2, 2]}).check_output()


@pytest.mark.parametrize("ydtype", ["float32", "int64"])
def test_real_image_sizes(ydtype):
    # Image 0 is 8x6 of a 8x8 batch, image 1 5x4, image 2 (9x7: ceil 5x4 after out_stride 2, one row past the
    # feature map on purpose, which reads zeros as in Fluid).
    x = np.random.RandomState(7).uniform(-1, 1, (3, 2, 4, 4))
    real = np.array([[8, 6], [5, 4], [9, 7]], ydtype)
    attrs = {"kernels": [2, 2], "strides": [1, 1], "paddings": [0, 0, 0, 0], "out_stride": [2, 2]}
    out, lod = im2sequence_ref(x, (2, 2), real=real, out_stride=(2, 2))
    assert lod == [[3 * 2, 2 * 1, 4 * 3]]
    t = OpTest("im2sequence", {"X": x, "Y": real}, {"Out": (out, lod)}, attrs)
    t.check_output()
    t.check_grad(["X"], "Out", no_grad_set={"in_Y_y_var"}, max_relative_error=1e-6)


def test_real_sizes_ignored_for_one_image():
    # Fluid's rule: with a single image Y is not read.
    x = np.random.RandomState(8).uniform(-1, 1, (1, 1, 4, 4))
    OpTest("im2sequence", {"X": x, "Y": np.array([[2, 2]], "float32")}, {"Out": im2sequence_ref(x, (2, 2))},
           {"kernels": [2, 2]}).check_output()


def test_many_rows_split_over_threads():
    x = np.random.RandomState(9).uniform(-1, 1, (2, 8, 40, 40)).astype("float32")
    attrs = {"kernels": [3, 3], "strides": [1, 1], "paddings": [1, 1, 1, 1]}
    OpTest("im2sequence", {"X": x}, {"Out": im2sequence_ref(x, (3, 3), p=(1, 1, 1, 1))}, attrs).check_output()


def test_layer_and_errors():
    xv = np.random.RandomState(1).uniform(-1, 1, (2, 3, 6, 6)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 6, 6], dtype="float32")
        y = fluid.layers.im2sequence(x, filter_size=[3, 2], stride=2, padding=[1, 0])
        assert tuple(y.shape) == (-1, 18) and y.lod_level == 1
        assert main.global_block().ops[-1].attr("paddings") == [1, 0, 1, 0]
        size = fluid.layers.data("size", shape=[2], dtype="float32")
        z = fluid.layers.im2sequence(x, filter_size=2, input_image_size=size, out_stride=2)
        assert tuple(z.shape) == (-1, 12) and main.global_block().ops[-1].attr("out_stride") == [2, 2]
        with pytest.raises(fluid.core.EnforceNotMet, match=r"im2sequence: the 7x7 kernel does not fit X 'x' "
                                                           r"\[-1, 3, 6, 6\] with its paddings"):
            fluid.layers.im2sequence(x, filter_size=7)
        with pytest.raises(ValueError, match=r"im2sequence: padding must be an int, \[h, w\] or \[up, left, down, "):
            fluid.layers.im2sequence(x, padding=[1, 1, 1])
        with pytest.raises(ValueError, match=r"im2sequence: input x2 must be 4-D \[N, C, H, W\], got shape \[-1, 6\]"):
            fluid.layers.im2sequence(fluid.layers.data("x2", shape=[6], dtype="float32"))
        bad = fluid.layers.data("bad", shape=[3], dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet, match=r"im2sequence: Y 'bad' \[-1, 3\] must be \[N, 2\]"):
            fluid.layers.im2sequence(x, input_image_size=bad)
    exe = fluid.Executor(fluid.CPUPlace())
    sizes = np.array([[6, 6], [4, 6]], "float32")
    got_y, got_z = exe.run(main, feed={"x": xv, "size": sizes}, fetch_list=[y, z], return_numpy=False)
    want, lod = im2sequence_ref(xv, (3, 2), (2, 2), (1, 0, 1, 0))
    assert got_y.recursive_sequence_lengths() == lod
    np.testing.assert_array_equal(np.array(got_y), want)
    want, lod = im2sequence_ref(xv, (2, 2), real=sizes, out_stride=(2, 2))
    assert got_z.recursive_sequence_lengths() == lod == [[4, 2]]
    np.testing.assert_array_equal(np.array(got_z), want)
    with pytest.raises(fluid.core.EnforceNotMet, match=r"im2sequence: Y 'size' \[3, 2\] must hold one \(height, "
                                                       r"width\) per image of X 'x' \[2, 3, 6, 6\]: \[2, 2\]"):
        exe.run(main, feed={"x": xv, "size": np.ones((3, 2), "float32")}, fetch_list=[z])
    with pytest.raises(fluid.core.EnforceNotMet, match=r"im2sequence: the 2x2 kernel does not fit image 1 of real "
                                                       r"size 1x3"):
        exe.run(main, feed={"x": xv, "size": np.array([[6, 6], [1, 6]], "float32")}, fetch_list=[z])
