"""bilinear_interp / nearest_interp (image_resize, resize_bilinear, resize_nearest): forward against a numpy
reference of Fluid 1.8's formulas (align_corners, align_mode), the size inputs, gradients, layers, errors."""
import numpy as np
import pytest

import fluidlite as fluid
from op_test import OpTest


def _ratio(n_in, n_out, align_corners):
    if n_out <= 1:
        return np.float32(0)
    return np.float32((n_in - 1) / (n_out - 1)) if align_corners else np.float32(n_in / n_out)


def nearest_ref(x, oh, ow, align_corners=True):
    n, c, h, w = x.shape
    idx = []
    for n_in, n_out in ((h, oh), (w, ow)):
        r, k = _ratio(n_in, n_out, align_corners), np.arange(n_out, dtype=np.float32)
        src = (r * k + np.float32(0.5)) if align_corners else r * k
        idx.append(np.minimum(src.astype(np.int64), n_in - 1))
    return x[:, :, idx[0]][:, :, :, idx[1]]


def bilinear_ref(x, oh, ow, align_corners=True, align_mode=1):
    n, c, h, w = x.shape
    half = align_mode == 0 and not align_corners
    maps = []
    for n_in, n_out in ((h, oh), (w, ow)):
        r, k = _ratio(n_in, n_out, align_corners), np.arange(n_out, dtype=np.float32)
        lo = (r * (k + np.float32(0.5)) - np.float32(0.5)) if half else r * k
        lo = np.maximum(np.trunc(lo).astype(np.int64), 0)
        hi = np.minimum(lo + 1, n_in - 1)
        src = np.maximum(r * (k + np.float32(0.5)) - np.float32(0.5), 0)
        frac = (src - lo) if half else (r * k - lo)
        maps.append((lo, hi, frac.astype(np.float64)))
    (hl, hh, fy), (wl, wh, fx) = maps
    fy, fx = fy[:, None], fx[None, :]
    xl, xh = x[:, :, hl], x[:, :, hh]
    out = (xl[..., wl] * (1 - fy) * (1 - fx) + xh[..., wl] * fy * (1 - fx) + xl[..., wh] * (1 - fy) * fx
           + xh[..., wh] * fy * fx)
    return out.astype(x.dtype)


CASES = [((2, 3, 4, 5), (8, 7)), ((1, 2, 6, 6), (3, 4)), ((2, 1, 5, 3), (5, 3)), ((1, 2, 3, 4), (1, 9))]


@pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 1), (False, 0)])
@pytest.mark.parametrize("shape,size", CASES)
def test_bilinear(shape, size, align_corners, align_mode):
    x = np.random.RandomState(0).uniform(-1, 1, shape)
    attrs = {"out_h": size[0], "out_w": size[1], "align_corners": align_corners, "align_mode": align_mode}
    t = OpTest("bilinear_interp", {"X": x}, {"Out": bilinear_ref(x, *size, align_corners, align_mode)}, attrs)
    t.check_output(atol=1e-6, rtol=1e-6)
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("shape,size", CASES)
def test_nearest(shape, size, align_corners):
    x = np.random.RandomState(1).uniform(-1, 1, shape)
    attrs = {"out_h": size[0], "out_w": size[1], "align_corners": align_corners}
    t = OpTest("nearest_interp", {"X": x}, {"Out": nearest_ref(x, *size, align_corners)}, attrs)
    t.check_output()
    t.check_grad(["X"], "Out", max_relative_error=1e-6)


def test_size_inputs_and_scale():
    x = np.random.RandomState(2).uniform(-1, 1, (1, 2, 4, 6)).astype("float32")
    # scale attribute: int(4 * 1.5) x int(6 * 1.5)
    OpTest("bilinear_interp", {"X": x}, {"Out": bilinear_ref(x, 6, 9)}, {"scale": 1.5}).check_output(atol=1e-6)
    # OutSize overrides the attributes
    OpTest("nearest_interp", {"X": x, "OutSize": np.array([3, 5], "int32")}, {"Out": nearest_ref(x, 3, 5)},
           {"out_h": 8, "out_w": 8}).check_output()
    # Scale input
    OpTest("nearest_interp", {"X": x, "Scale": np.array([2.0], "float32")}, {"Out": nearest_ref(x, 8, 12)},
           {}).check_output()
    # SizeTensor wins over everything
    OpTest("bilinear_interp", {"X": x, "SizeTensor": [("h", np.array([5], "int32")), ("w", np.array([2], "int32"))],
                               "OutSize": np.array([3, 5], "int32")},
           {"Out": bilinear_ref(x, 5, 2)}, {}).check_output(atol=1e-6)


def test_layers():
    xv = np.random.RandomState(3).uniform(-1, 1, (2, 3, 4, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", shape=[3, 4, 4], dtype="float32")
        size = fluid.layers.data("size", shape=[2], dtype="int32", append_batch_size=False)
        a = fluid.layers.resize_bilinear(x, out_shape=[8, 6])
        b = fluid.layers.resize_nearest(x, scale=2.0, align_corners=False)
        c = fluid.layers.image_resize(x, out_shape=size, resample="NEAREST")
        d = fluid.layers.image_resize(x, out_shape=[3, 3], align_corners=False, align_mode=0)
        h = fluid.layers.fill_constant([1], "int32", 5)
        e = fluid.layers.resize_bilinear(x, out_shape=[h, 7])
    assert tuple(a.shape) == (-1, 3, 8, 6) and tuple(b.shape) == (-1, 3, 8, 8)
    assert tuple(c.shape) == (-1, 3, -1, -1)
    ops = {op.type: op for op in main.global_block().ops}
    assert ops["bilinear_interp"].attr("interp_method") == "bilinear"
    exe = fluid.Executor(fluid.CPUPlace())
    got = exe.run(main, feed={"x": xv, "size": np.array([2, 7], "int32")}, fetch_list=[a, b, c, d, e])
    np.testing.assert_allclose(got[0], bilinear_ref(xv, 8, 6), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], nearest_ref(xv, 8, 8, False))
    np.testing.assert_array_equal(got[2], nearest_ref(xv, 2, 7))
    np.testing.assert_allclose(got[3], bilinear_ref(xv, 3, 3, False, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[4], bilinear_ref(xv, 5, 7), rtol=1e-5, atol=1e-6)


def test_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", shape=[3, 4, 4], dtype="float32")
        with pytest.raises(ValueError, match="image_resize: one of out_shape and scale must not be None"):
            fluid.layers.image_resize(x)
        with pytest.raises(ValueError, match="image_resize: resample must be 'BILINEAR' or 'NEAREST'"):
            fluid.layers.image_resize(x, out_shape=[2, 2], resample="TRILINEAR")
        with pytest.raises(ValueError, match=r"image_resize: out_shape must be \[out_h, out_w\]"):
            fluid.layers.resize_bilinear(x, out_shape=[2, 2, 2])
        with pytest.raises(ValueError, match="image_resize: align_mode must be 0 or 1"):
            fluid.layers.resize_bilinear(x, out_shape=[2, 2], align_mode=2)
        flat = fluid.layers.data("flat", shape=[3], dtype="float32")
        with pytest.raises(ValueError, match=r"image_resize: input flat must be 4-D"):
            fluid.layers.resize_nearest(flat, out_shape=[2, 2])
        block = fluid.default_main_program().global_block()
        out = block.create_var(name="o", dtype="float32")
        with pytest.raises(fluid.core.EnforceNotMet,
                           match=r"bilinear_interp: the output size \[-1, -1\] of X 'x' \[-1, 3, 4, 4\] must be "
                                 r"positive"):
            block.append_op(type="bilinear_interp", inputs={"X": [x]}, outputs={"Out": [out]}, attrs={})
