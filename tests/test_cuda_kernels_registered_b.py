"""The CUDA kernels of kernels/cuda/{mul,matmul,conv2d,pool2d,batch_norm,layer_norm,lstm_unit,sequence,lstm,fc}.cu are
registered for float32 and float64 (forward and grad ops), read from op_proto(type)["kernels"]
("CPU:float32,float64; CUDA:float32,float64")."""
import pytest

from fluidlite import core

OPS = [
    "mul", "mul_grad",
    "matmul", "matmul_grad",
    "conv2d", "conv2d_grad", "depthwise_conv2d", "depthwise_conv2d_grad",
    "pool2d", "pool2d_grad",
    "batch_norm", "batch_norm_grad", "fused_batch_norm_act", "fused_batch_norm_act_grad",
    "lstm_unit", "lstm_unit_grad",
    "layer_norm", "layer_norm_grad",
    "sequence_pool", "sequence_pool_grad", "sequence_conv", "sequence_conv_grad",
    "lstm", "lstm_grad", "lstmp", "lstmp_grad",
    "fc", "conv2d_fusion",
    "conv2d_transpose", "conv2d_transpose_grad", "depthwise_conv2d_transpose", "depthwise_conv2d_transpose_grad",
]


def _cuda_dtypes(op_type):
    for part in core.op_proto(op_type)["kernels"].split(";"):
        place, _, dtypes = part.strip().partition(":")
        if place == "CUDA":
            return set(dtypes.split(","))
    return set()


@pytest.mark.parametrize("op_type", OPS)
def test_cuda_kernels_registered(op_type):
    if not core.is_compiled_with_cuda():
        pytest.skip("fluidlite was built without CUDA: no CUDA kernels to check")
    assert {"float32", "float64"} <= _cuda_dtypes(op_type), core.op_proto(op_type)["kernels"]
