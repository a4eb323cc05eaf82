"""fluid.nets: each network's forward values against numpy with the same parameters (read back from the scope),
the layers each one appends, and its argument errors."""
import numpy as np
import pytest

import fluidlite as fluid


def _conv2d(x, w, b=None, stride=1, pad=0, dilation=1, groups=1):
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, f, oh, ow), dtype=np.float64)
    fg = f // groups
    for g in range(groups):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                           j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
                out[:, g * fg:(g + 1) * fg, i, j] = np.einsum("nchw,fchw->nf", patch, w[g * fg:(g + 1) * fg])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _pool2d(x, k, s, pad=0, kind="max"):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


def _batch_norm_train(x, eps=1e-5):  # scale 1, bias 0 (their initial values), the batch's statistics
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _relu(x):
    return np.maximum(x, 0)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class _Net:
    """A fresh program pair, names and scope; `run` returns the fetched arrays, `param` a parameter's value."""

    def __init__(self):
        self.main, self.startup = fluid.Program(), fluid.Program()
        self.main.random_seed = self.startup.random_seed = 5
        self._guards = [fluid.program_guard(self.main, self.startup), fluid.unique_name.guard()]
        self.scope = fluid.Scope()
        self.exe = fluid.Executor(fluid.CPUPlace())

    def __enter__(self):
        for g in self._guards:
            g.__enter__()
        return self

    def __exit__(self, *exc):
        for g in reversed(self._guards):
            g.__exit__(*exc)
        return False

    def run(self, feed, fetch, program=None):
        self.exe.run(self.startup, scope=self.scope)
        return self.exe.run(program or self.main, feed=feed, fetch_list=fetch, scope=self.scope)

    def param(self, name):
        return np.array(self.scope.find_var(name).get_tensor()).astype(np.float64)

    def op_types(self, program=None):
        return [op.type for op in (program or self.main).global_block().ops]


RNG = np.random.RandomState(0)


@pytest.mark.parametrize("kw", [
    dict(num_filters=4, filter_size=3, pool_size=2, pool_stride=2, conv_padding=1, act="relu"),
    dict(num_filters=4, filter_size=3, pool_size=3, pool_stride=1, pool_padding=1, conv_stride=2,
         conv_dilation=2, conv_groups=2, act="sigmoid"),
    dict(num_filters=6, filter_size=[2, 2], pool_size=2, pool_stride=2, pool_type="avg", bias_attr=False),
    dict(num_filters=2, filter_size=1, pool_size=2, pool_stride=1, global_pooling=True, pool_type="avg"),
])
def test_simple_img_conv_pool_matches_numpy(kw):
    x = RNG.randn(2, 4, 9, 9).astype("float32")
    with _Net() as net:
        img = fluid.layers.data(name="img", shape=[4, 9, 9], dtype="float32")
        out = fluid.nets.simple_img_conv_pool(input=img, **kw)
    got, = net.run({"img": x}, [out])
    with_bias = kw.get("bias_attr") is not False
    assert net.op_types()[:2] == ["conv2d", "elementwise_add" if with_bias else kw.get("act") or "pool2d"]
    assert net.op_types()[-1] == "pool2d"
    w = net.param("conv2d_0.w_0")
    b = net.param("conv2d_0.b_0") if with_bias else None
    assert w.shape[:2] == (kw["num_filters"], 4 // kw.get("conv_groups", 1))
    ref = _conv2d(x.astype(np.float64), w, b, stride=kw.get("conv_stride", 1), pad=kw.get("conv_padding", 0),
                  dilation=kw.get("conv_dilation", 1), groups=kw.get("conv_groups", 1))
    ref = {"relu": _relu, "sigmoid": _sigmoid, None: lambda v: v}[kw.get("act")](ref)
    if kw.get("global_pooling"):
        ref = ref.mean(axis=(2, 3), keepdims=True)
    else:
        ref = _pool2d(ref, kw["pool_size"], kw["pool_stride"], kw.get("pool_padding", 0), kw.get("pool_type", "max"))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_img_conv_group_matches_numpy():
    # conv -> batch_norm(relu) -> conv(relu) -> max pool; the first conv has no act of its own
    x = RNG.randn(3, 3, 8, 8).astype("float32")
    with _Net() as net:
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        out = fluid.nets.img_conv_group(input=img, conv_num_filter=[4, 5], pool_size=2, pool_stride=2,
                                        conv_act="relu", conv_with_batchnorm=[True, False],
                                        conv_batchnorm_drop_rate=[0.0, 0.0], conv_filter_size=[3, 1],
                                        conv_padding=[1, 0])
    types = net.op_types()
    assert types == ["conv2d", "elementwise_add", "batch_norm", "relu", "conv2d", "elementwise_add", "relu",
                     "pool2d"], types
    got, = net.run({"img": x}, [out])
    h = _conv2d(x.astype(np.float64), net.param("conv2d_0.w_0"), net.param("conv2d_0.b_0"), pad=1)
    h = _relu(_batch_norm_train(h))
    h = _relu(_conv2d(h, net.param("conv2d_1.w_0"), net.param("conv2d_1.b_0")))
    ref = _pool2d(h, 2, 2)
    assert got.shape == (3, 5, 4, 4)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_img_conv_group_dropout_only_above_threshold_and_off_in_test_clone():
    with _Net() as net:
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        out = fluid.nets.img_conv_group(input=img, conv_num_filter=(4, 4, 4), pool_size=2, conv_act="relu",
                                        conv_with_batchnorm=True, conv_batchnorm_drop_rate=[0.3, 1e-6, 0.0])
        test_prog = net.main.clone(for_test=True)
    drops = [op for op in net.main.global_block().ops if op.type == "dropout"]
    assert len(drops) == 1
    assert drops[0].attr("dropout_prob") == pytest.approx(0.3)
    assert drops[0].attr("is_test") is False
    test_drop = [op for op in test_prog.global_block().ops if op.type == "dropout"]
    assert test_drop[0].attr("is_test") is True
    assert out.shape == (-1, 4, 7, 7)  # pool_stride defaults to 1
    # conv_with_batchnorm=False keeps the act on the conv and adds no batch_norm
    with _Net() as net2:
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        fluid.nets.img_conv_group(input=img, conv_num_filter=[4], pool_size=2, conv_act="tanh",
                                  conv_batchnorm_drop_rate=0.5)
    assert net2.op_types() == ["conv2d", "elementwise_add", "tanh", "pool2d"]


def _sequence_conv_pool_ref(x, lens, w, b, filter_size, act, pool_type):
    """Per sequence: rows t - filter_size // 2 .. of the sequence (zeros outside it) @ w + b, act, then the pool."""
    d, start = x.shape[1], -(filter_size // 2)
    acts = {"sigmoid": _sigmoid, "tanh": np.tanh, None: lambda v: v}
    pooled, begin = [], 0
    for n in lens:
        seq = x[begin:begin + n]
        begin += n
        rows = []
        for t in range(n):
            window = [seq[t + start + j] if 0 <= t + start + j < n else np.zeros(d) for j in range(filter_size)]
            rows.append(np.concatenate(window) @ w + b)
        h = acts[act](np.array(rows))
        pooled.append({"max": h.max(0), "sqrt": h.sum(0) / np.sqrt(n), "average": h.mean(0)}[pool_type])
    return np.array(pooled)


@pytest.mark.parametrize("filter_size,act,pool_type", [(3, "sigmoid", "max"), (4, "tanh", "sqrt"),
                                                       (2, None, "average")])
def test_sequence_conv_pool_matches_numpy(filter_size, act, pool_type):
    lens = [3, 1, 5]
    x = RNG.randn(sum(lens), 4).astype("float32")
    with _Net() as net:
        v = fluid.layers.data(name="x", shape=[4], dtype="float32", lod_level=1)
        kw = {} if act == "sigmoid" and pool_type == "max" else {"act": act, "pool_type": pool_type}  # the defaults
        out = fluid.nets.sequence_conv_pool(input=v, num_filters=6, filter_size=filter_size, **kw)
    got, = net.run({"x": (x, [lens])}, [out])
    want = _sequence_conv_pool_ref(x.astype(np.float64), lens, net.param("sequence_conv_0.w_0"),
                                   net.param("sequence_conv_0.b_0"), filter_size, act, pool_type)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert net.op_types() == ["sequence_conv", "elementwise_add"] + ([act] if act else []) + ["sequence_pool"]
    assert net.param("sequence_conv_0.w_0").shape == (4 * filter_size, 6)


def test_sequence_conv_pool_errors():
    with _Net():
        with pytest.raises(TypeError, match=r"sequence_conv_pool: 'input' \(ids\) must be float32 or float64, "
                                            r"got int64"):
            fluid.nets.sequence_conv_pool(_var("ids", [5, 1], "int64"), num_filters=2, filter_size=3)
        with pytest.raises(ValueError, match=r"sequence_pool: pool_type must be one of"):
            fluid.nets.sequence_conv_pool(_var("x", [5, 3]), num_filters=2, filter_size=3, pool_type="median")


@pytest.mark.parametrize("shape,dim", [([3, 6, 4], 1), ([2, 5, 8], -1), ([4, 2], 1), ([6, 3], 0)])
def test_glu_matches_numpy(shape, dim):
    x = RNG.randn(*shape).astype("float32")
    with _Net() as net:
        v = fluid.layers.data(name="x", shape=shape, dtype="float32", append_batch_size=False)
        out = fluid.nets.glu(input=v, dim=dim)
    got, = net.run({"x": x}, [out])
    a, b = np.split(x.astype(np.float64), 2, axis=dim)
    np.testing.assert_allclose(got, a * _sigmoid(b), rtol=1e-5, atol=1e-6)
    assert net.op_types() == ["split", "sigmoid", "elementwise_mul"]


def _attention_ref(q, k, v, heads, proj=None):
    if proj is not None:
        q, k, v = (x @ w + b for x, (w, b) in zip((q, k, v), proj))

    def split(x):
        n, length, d = x.shape
        return x.reshape(n, length, heads, d // heads).transpose(0, 2, 1, 3)

    qh, kh, vh = split(q), split(k), split(v)
    w = _softmax(qh @ kh.transpose(0, 1, 3, 2) * (k.shape[-1] // heads) ** -0.5)
    out = w @ vh
    n, _, lq, dv = out.shape
    return out.transpose(0, 2, 1, 3).reshape(n, lq, heads * dv)


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_scaled_dot_product_attention_matches_numpy(heads):
    q = RNG.randn(2, 5, 6).astype("float32")
    k = RNG.randn(2, 4, 6).astype("float32")
    v = RNG.randn(2, 4, 12).astype("float32")
    with _Net() as net:
        qv = fluid.layers.data(name="q", shape=[5, 6], dtype="float32")
        kv = fluid.layers.data(name="k", shape=[4, 6], dtype="float32")
        vv = fluid.layers.data(name="v", shape=[4, 12], dtype="float32")
        out = fluid.nets.scaled_dot_product_attention(qv, kv, vv, num_heads=heads)
    assert out.shape == (-1, 5, 12)
    got, = net.run({"q": q, "k": k, "v": v}, [out])
    proj = None
    if heads > 1:  # one fc (with bias) per input, each of its input's width
        proj = [(net.param("fc_%d.w_0" % i), net.param("fc_%d.b_0" % i)) for i in range(3)]
        assert [w.shape for w, _ in proj] == [(6, 6), (6, 6), (12, 12)]
    else:
        assert "mul" not in net.op_types()
    ref = _attention_ref(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), heads, proj)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_scaled_dot_product_attention_dropout_trains_and_scales_at_test():
    # dropout on the attention weights: random in training; the test clone scales by 1 - p
    # (downgrade_in_infer, Fluid's default)
    q = RNG.randn(2, 3, 4).astype("float32")
    with _Net() as net:
        qv = fluid.layers.data(name="q", shape=[3, 4], dtype="float32")
        out = fluid.nets.scaled_dot_product_attention(qv, qv, qv, dropout_rate=0.5)
        test_prog = net.main.clone(for_test=True)
    got_test, = net.run({"q": q}, [out], program=test_prog)
    ref = _attention_ref(q.astype(np.float64), q.astype(np.float64), q.astype(np.float64), 1)
    np.testing.assert_allclose(got_test, 0.5 * ref, rtol=1e-4, atol=1e-5)
    got_train, = net.run({"q": q}, [out])
    assert not np.allclose(got_train, 0.5 * ref, atol=1e-3)


def test_nets_train_through_backward():
    # every net's gradients reach its parameters: one SGD step changes them all
    x = RNG.randn(4, 2, 8, 8).astype("float32")
    with _Net() as net:
        img = fluid.layers.data(name="img", shape=[2, 8, 8], dtype="float32")
        h = fluid.nets.simple_img_conv_pool(img, num_filters=4, filter_size=3, pool_size=2, pool_stride=2,
                                            act="relu")
        h = fluid.nets.img_conv_group(h, conv_num_filter=[4], pool_size=1, conv_with_batchnorm=True,
                                      conv_act="relu")
        h = fluid.layers.reshape(h, [-1, 4, 12])
        h = fluid.nets.glu(h, dim=-1)
        h = fluid.nets.scaled_dot_product_attention(h, h, h, num_heads=2)
        loss = fluid.layers.mean(fluid.layers.square(h))
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    net.exe.run(net.startup, scope=net.scope)
    params = [p.name for p in net.main.global_block().all_parameters()]
    before = {n: net.param(n) for n in params}
    net.exe.run(net.main, feed={"img": x}, fetch_list=[loss], scope=net.scope)
    unchanged = [n for n in params if np.array_equal(before[n], net.param(n))]
    assert len(params) == 14 and not unchanged, unchanged  # 2 convs, batch_norm (4, with its moving stats), 3 fc


def _var(name, shape, dtype="float32"):
    return fluid.layers.data(name=name, shape=shape, dtype=dtype, append_batch_size=False)


def test_glu_errors():
    with _Net():
        with pytest.raises(TypeError, match=r"glu: 'input' must be a Variable, got ndarray"):
            fluid.nets.glu(np.zeros((2, 4), "float32"))
        with pytest.raises(TypeError, match=r"glu: 'input' \(i\) must be float16 or float32 or float64, "
                                            r"got int64"):
            fluid.nets.glu(_var("i", [2, 4], "int64"))
        with pytest.raises(ValueError, match=r"glu: input 'x' of shape \[2, 5\] must have an even size along "
                                             r"dim -1 to split in halves, got 5"):
            fluid.nets.glu(_var("x", [2, 5]))
        with pytest.raises(ValueError, match=r"glu: 'dim' must be in \[-2, 2\) for the rank-2 input 'y', got 2"):
            fluid.nets.glu(_var("y", [2, 4]), dim=2)


def test_scaled_dot_product_attention_errors():
    f = fluid.nets.scaled_dot_product_attention
    with _Net():
        q, k, v = _var("q", [2, 5, 6]), _var("k", [2, 4, 6]), _var("v", [2, 4, 8])
        with pytest.raises(TypeError, match=r"scaled_dot_product_attention: 'keys' must be a Variable, got list"):
            f(q, [1.0], v)
        with pytest.raises(TypeError, match=r"scaled_dot_product_attention: 'values' \(vi\) must be float32 or "
                                            r"float64, got int32"):
            f(q, k, _var("vi", [2, 4, 8], "int32"))
        with pytest.raises(TypeError, match=r"queries, keys and values must have the same dtype, got float32, "
                                            r"float64 and float32"):
            f(q, _var("k64", [2, 4, 6], "float64"), v)
        with pytest.raises(ValueError, match=r"must be 3-D \[batch, length, hidden\], got shapes \[2, 5, 6\], "
                                             r"\[8, 6\] and \[2, 4, 8\]"):
            f(q, _var("k2", [8, 6]), v)
        with pytest.raises(ValueError, match=r"queries and keys must have the same hidden size, got 6 and 7"):
            f(q, _var("k7", [2, 4, 7]), v)
        with pytest.raises(ValueError, match=r"keys and values must have the same length, got 4 and 3"):
            f(q, k, _var("v3", [2, 3, 8]))
        with pytest.raises(ValueError, match=r"the hidden size of keys \(6\) must be divisible by num_heads \(4\)"):
            f(q, k, v, num_heads=4)
        with pytest.raises(ValueError, match=r"the hidden size of values \(8\) must be divisible by num_heads "
                                             r"\(3\)"):
            f(q, k, v, num_heads=3)
        with pytest.raises(ValueError, match=r"num_heads must be a positive int, got 0"):
            f(q, k, v, num_heads=0)


def test_img_conv_group_and_simple_img_conv_pool_errors():
    with _Net():
        img = fluid.layers.data(name="img", shape=[3, 8, 8], dtype="float32")
        with pytest.raises(TypeError, match=r"img_conv_group: 'conv_num_filter' must be a list or tuple, got int"):
            fluid.nets.img_conv_group(img, conv_num_filter=4, pool_size=2)
        with pytest.raises(ValueError, match=r"img_conv_group: 'conv_batchnorm_drop_rate' must have one entry per "
                                             r"conv \(len\(conv_num_filter\) = 2\), got 3 entries"):
            fluid.nets.img_conv_group(img, conv_num_filter=[4, 4], pool_size=2, conv_with_batchnorm=True,
                                      conv_batchnorm_drop_rate=[0.1, 0.2, 0.3])
        with pytest.raises(ValueError, match=r"img_conv_group: 'conv_padding' must have one entry per conv"):
            fluid.nets.img_conv_group(img, conv_num_filter=[4, 4], pool_size=2, conv_padding=[1])
        # the layers' own checks name them
        with pytest.raises(ValueError, match=r"pool2d: pool_type must be 'max' or 'avg', got 'sum'"):
            fluid.nets.simple_img_conv_pool(img, num_filters=2, filter_size=3, pool_size=2, pool_stride=2,
                                            pool_type="sum")
        with pytest.raises(TypeError, match=r"conv2d: 'input' must be a Variable"):
            fluid.nets.simple_img_conv_pool(np.zeros((1, 3, 8, 8)), num_filters=2, filter_size=3, pool_size=2,
                                            pool_stride=2)


def test_nets_names():
    assert sorted(fluid.nets.__all__) == ["glu", "img_conv_group", "scaled_dot_product_attention",
                                          "sequence_conv_pool", "simple_img_conv_pool"]
