"""The CUDA kernels of kernels/cuda/{elementwise,unary,reduce,softmax,fill,optimizers,lookup_table,tensor_ops}.cu (and
assign's, in kernels/assign.cc) are registered, read from op_proto(type)["kernels"] ("CPU:float32,float64;
CUDA:float32,float64"): a .cu file that failed to register (or an op renamed on one side only) shows here on a CPU
machine, in a CUDA build."""
import numpy as np
import pytest

from fluidlite import core

FLOATS = {"float32", "float64"}
INTS = {"int32", "int64"}

UNARY_WITH_GRAD = ["abs", "relu", "leaky_relu", "relu6", "clip", "hard_sigmoid"]
UNARY_WITH_GRAD_GRAD = ["sigmoid", "tanh", "exp", "log", "sqrt", "square", "cos", "gelu", "elu", "selu", "swish",
                        "hard_swish", "softplus", "softsign", "rsqrt", "reciprocal", "sin", "pow"]
UNARY_FORWARD_ONLY = ["floor", "ceil", "sign", "round"]

# op type -> the dtypes its CUDA kernel must cover
OPS = {
    **{op: FLOATS | INTS for op in ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                     "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_floordiv",
                                     "elementwise_mod", "elementwise_add_grad", "elementwise_sub_grad",
                                     "elementwise_mul_grad", "scale", "sum"]},
    "elementwise_pow_grad": FLOATS,
    **{op: FLOATS for op in UNARY_WITH_GRAD + UNARY_WITH_GRAD_GRAD + UNARY_FORWARD_ONLY},
    **{op + "_grad": FLOATS for op in UNARY_WITH_GRAD + UNARY_WITH_GRAD_GRAD},
    **{op + "_grad_grad": FLOATS for op in UNARY_WITH_GRAD_GRAD},
    **{op: FLOATS | INTS for op in ["reduce_sum", "reduce_max", "reduce_prod", "reduce_sum_grad", "reduce_max_grad"]},
    **{op: FLOATS for op in ["reduce_mean", "reduce_mean_grad", "reduce_prod_grad", "mean"]},
    **{op: FLOATS for op in ["softmax", "softmax_grad", "softmax_with_cross_entropy",
                             "softmax_with_cross_entropy_grad"]},
    "fill_constant": FLOATS | INTS | {"bool"},
    "fill_any_like": FLOATS | INTS | {"bool"},
    "fill_zeros_like": FLOATS | INTS | {"bool"},
    "fill_constant_batch_size_like": FLOATS | INTS | {"bool"},
    "assign": FLOATS | INTS | {"bool"},
    "cast": FLOATS | INTS | {"bool"},
    "increment": FLOATS | INTS,
    "uniform_random": FLOATS,
    "gaussian_random": FLOATS,
    **{op: FLOATS for op in ["sgd", "momentum", "adam", "adagrad"]},
    **{op: FLOATS for op in ["lookup_table", "lookup_table_v2", "lookup_table_grad", "lookup_table_v2_grad"]},
    **{op: FLOATS | INTS for op in ["concat", "concat_grad", "split", "slice", "slice_grad", "transpose2",
                                     "reverse", "sequence_mask"]},
}


def _cuda_dtypes(op_type):
    for part in core.op_proto(op_type)["kernels"].split(";"):
        place, _, dtypes = part.strip().partition(":")
        if place == "CUDA":
            return set(dtypes.split(","))
    return set()


@pytest.mark.parametrize("op_type", sorted(OPS))
def test_cuda_kernels_registered(op_type):
    if not core.is_compiled_with_cuda():
        pytest.skip("fluidlite was built without CUDA: no CUDA kernels to check")
    missing = OPS[op_type] - _cuda_dtypes(op_type)
    assert not missing, "%s has no CUDA kernel for %s: %s" % (op_type, sorted(missing),
                                                             core.op_proto(op_type)["kernels"])


def _startup_parameters(place):
    import fluidlite as fluid

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[16], dtype="float32")
        fluid.layers.fc(x, size=32, param_attr=fluid.ParamAttr(
            name="w_uniform", initializer=fluid.initializer.Uniform(-0.5, 0.5, seed=7)))
        fluid.layers.fc(x, size=8, param_attr=fluid.ParamAttr(
            name="w_normal", initializer=fluid.initializer.Normal(0.0, 2.0, seed=11)))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(place).run(startup)
        return {n: np.array(scope.find_var(n).get_tensor()) for n in ("w_uniform", "w_normal")}


def test_gpu_startup_parameters_are_the_cpu_ones():
    """uniform_random / gaussian_random generate on the host with the CPU kernel's code and copy to the device: a
    seeded GPU startup program initializes parameters bit for bit as a CPU one."""
    if not core.is_compiled_with_cuda() or core.get_cuda_device_count() == 0:
        pytest.skip("needs a CUDA build and a GPU")
    import fluidlite as fluid

    cpu, gpu = _startup_parameters(fluid.CPUPlace()), _startup_parameters(fluid.CUDAPlace(0))
    for name in cpu:
        np.testing.assert_array_equal(gpu[name], cpu[name], err_msg=name)
