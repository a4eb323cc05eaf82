"""The unary elementwise layers (``layers.relu(x)``, ``layers.clip(x, min, max)``, ...): one per row of the op
table in kernels/unary.cc, generated from its registration (arguments, defaults and docstring). The rows whose
Fluid layer lives in nn.py (elu, selu, swish, hard_swish, hard_sigmoid, pow) are generated there."""
from .layer_function_generator import generate_layer_fn

_UNARY = ["abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "floor", "sign", "leaky_relu", "relu6",
          "clip", "gelu", "softplus", "softsign", "rsqrt", "reciprocal", "sin", "round"]
_UNARY += ["ceil", "cos"]  # learning_rate_scheduler: polynomial_decay(cycle=True), cosine_decay

__all__ = list(_UNARY)

for _op in _UNARY:
    globals()[_op] = generate_layer_fn(_op, inputs=("x",))
