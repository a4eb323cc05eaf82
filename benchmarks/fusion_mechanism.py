"""How to run a fused elementwise group: fluidlite's precompiled tile interpreter (the fused_elementwise op) vs C++
generated for the group and compiled at run time (the PyTorch Inductor CPU / tinygrad CPU approach), vs the
unfused ops. The decision it informs is recorded in docs/architecture.md ("Elementwise fusion").

    python benchmarks/fusion_mechanism.py [--repeat 15] [--no-codegen]

Groups, each built as a small Fluid program whose inputs and outputs live in the scope (persistable), fused by the
fuse_elementwise_chains pass:
  lstm_fwd  [32, 128]      the LSTM cell after split: sigmoid x3, tanh, mul, mul, add, tanh, mul (7 outputs kept, as
                           the backward needs them)
  lstm_bwd  [32, 128]      its backward: mul_grad x3, add_grad, tanh_grad x2, sigmoid_grad x3, the sums
  chain     [4096, 4096]   tanh(sigmoid(x) * y + x), one output

The code generator turns the fused op's own `code` attribute into one C++ loop that calls the same functors
(kernels/helpers/unary_functors.h, elementwise_functors.h) per element, in a function whose array pointers are
restrict parameters (without them GCC left the loop scalar); it is compiled with `g++ -O3 -march=x86-64-v3 -shared`
(the flags fluidlite itself is built with) into a cache directory keyed by the source's hash and loaded with ctypes.
Times: the interpreter and the unfused ops through exe.run of a program that feeds and fetches nothing (so the
executor's per-op cost is in them, as it is in a model), the generated code through one ctypes call; compile time for
a cold cache and load time for a warm one. Each time is the median (and the min: robust on a loaded machine) over
--repeat repetitions. codegen_max_abs_diff: the generated code against the fused op (one expression lets the compiler
contract a multiply and an add of two different ops into one FMA, which the separate kernels round in between).
"""
import argparse
import ctypes
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import fluidlite as fluid
from fluidlite.bench import seconds_per_call

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPERS = os.path.join(ROOT, "kernels", "helpers")
L = fluid.layers

KINDS = {0: "unary", 1: "unary_grad", 2: "binary", 3: "binary_dx", 4: "binary_dy", 5: "scale"}
BINARY = ["AddOp", "SubOp", "MulOp", "DivOp", "MaxOp", "MinOp"]


def unary_functors():
    """fn index -> functor name, from the header's FL_FUSED_UNARY_OPS list."""
    text = open(os.path.join(HELPERS, "fused_elementwise.h")).read()
    body = text[text.index("#define FL_FUSED_UNARY_OPS"):text.index("#define FL_FUSED_NAME_")]
    return [functor for _, functor in re.findall(r"X\((\w+), (\w+)\)", body)]


def persistable(block, name, shape):
    return block.create_var(name=name, shape=list(shape), dtype="float32", persistable=True)


def group_lstm_fwd(shape):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = main.global_block()
        i, f, o, g, c_prev = (persistable(b, n, shape) for n in ("i", "f", "o", "g", "c_prev"))
        si, sf, so, tg = L.sigmoid(i), L.sigmoid(f), L.sigmoid(o), L.tanh(g)
        c = L.elementwise_add(L.elementwise_mul(sf, c_prev), L.elementwise_mul(si, tg))
        tc = L.tanh(c)
        h = L.elementwise_mul(so, tc)
        outs = [si, sf, so, tg, c, tc, h]
        for v in outs:
            v.persistable = True
    return main, ["i", "f", "o", "g", "c_prev"], outs


def group_lstm_bwd(shape):
    """The cell's backward as the grad ops backward emits (built through append_backward of the forward)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = main.global_block()
        names = ("i", "f", "o", "g", "c_prev", "dh", "dc")
        i, f, o, g, c_prev, dh, dc = (persistable(b, n, shape) for n in names)
        for v in (i, f, o, g, c_prev):
            v.stop_gradient = False
        si, sf, so, tg = L.sigmoid(i), L.sigmoid(f), L.sigmoid(o), L.tanh(g)
        c = L.elementwise_add(L.elementwise_mul(sf, c_prev), L.elementwise_mul(si, tg))
        h = L.elementwise_mul(so, L.tanh(c))
        loss = L.reduce_sum(L.elementwise_add(L.elementwise_mul(h, dh), L.elementwise_mul(c, dc)))
        grads = fluid.backward.gradients([loss], [i, f, o, g, c_prev])
        for v in grads:
            v.persistable = True
    return main, list(names), grads


def group_chain(shape):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = main.global_block()
        x, y = persistable(b, "x", shape), persistable(b, "y", shape)
        out = L.tanh(L.elementwise_add(L.elementwise_mul(L.sigmoid(x), y), x))
        out.persistable = True
    return main, ["x", "y"], [out]


def fused_ops(exe, main, scope):
    view = exe.prepared_program(main, scope=scope)
    return [op for op in view.global_block().ops if op.type == "fused_elementwise"]


def generate(op, functors):
    """C++ for one fused_elementwise op: run(in, out, n) computes every instruction per element."""
    code, outs = op.attr("code"), op.attr("outputs")
    n_in = len(op.input("X"))
    params = op.attr("params")
    params_decl = ", ".join(["const float* __restrict p%d" % i for i in range(n_in)] +
                            ["float* __restrict o%d" % j for j in range(len(outs))])
    # The loop is in a function whose pointers are restrict parameters: GCC ignores restrict on local pointers, and
    # with that many arrays it gives up on the aliasing checks and leaves the loop scalar.
    lines = ['#include "elementwise_functors.h"', '#include "unary_functors.h"', "using namespace fl;",
             "struct NoParams { template <typename T> T Attr(const std::string&) const { return T(); } };",
             "static void body(%s, long n) {" % params_decl]
    for k in range(len(code) // 6):
        kind, fn = code[6 * k], code[6 * k + 1]
        if kind in (0, 1):
            lines.append("  const unary_fn::%s f%d{NoParams{}};" % (functors[fn], k))
        if kind == 5:
            p = params[3 * k:3 * k + 3]
            lines.append("  const ScaleFn<float> f%d(%r, %r, %s);" % (k, p[0], p[1], "true" if p[2] else "false"))
    lines.append("  for (long i = 0; i < n; ++i) {")
    for s_ in range(n_in):
        lines.append("    const float s%d = p%d[i];" % (s_, s_))
    for k in range(len(code) // 6):
        kind, fn, dst, a, b, c = code[6 * k:6 * k + 6]
        sa, sb, sc = ("s%d" % v if v >= 0 else "0.f" for v in (a, b, c))
        expr = {0: "f%d.Fwd<float>(%s)" % (k, sa), 1: "f%d.Grad<float>(%s, %s)" % (k, sa, sb),
                2: "binary_fn::%s::Fwd<float>(%s, %s)" % (BINARY[fn], sa, sb),
                3: "binary_fn::%s::Dx<float>(%s, %s, %s)" % (BINARY[fn], sa, sb, sc),
                4: "binary_fn::%s::Dy<float>(%s, %s, %s)" % (BINARY[fn], sa, sb, sc),
                5: "f%d(%s)" % (k, sa)}[kind]
        lines.append("    const float s%d = %s;" % (dst, expr))
    for j, s_ in enumerate(outs):
        lines.append("    o%d[i] = s%d;" % (j, s_))
    lines += ["  }", "}",
              'extern "C" void run(const float* const* in, float* const* out, long n) {',
              "  body(%s, n);" % ", ".join(["in[%d]" % i for i in range(n_in)] +
                                            ["out[%d]" % j for j in range(len(outs))]),
              "}"]
    return "\n".join(lines) + "\n"


def compile_cached(source, cache_dir):
    """(ctypes function, seconds spent compiling or 0, seconds spent loading)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    so = os.path.join(cache_dir, "fused_%s.so" % key)
    compile_s = 0.0
    if not os.path.exists(so):
        src = os.path.join(cache_dir, "fused_%s.cc" % key)
        with open(src, "w") as f:
            f.write(source)
        t0 = time.perf_counter()
        subprocess.run(["g++", "-O3", "-march=x86-64-v3", "-std=c++17", "-shared", "-fPIC", "-fno-math-errno",
                        "-fno-trapping-math", "-I", HELPERS, "-I", os.path.join(ROOT, "csrc"), src, "-o", so],
                       check=True)
        compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lib = ctypes.CDLL(so)
    load_s = time.perf_counter() - t0
    fn = lib.run
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    fn.restype = None
    return fn, compile_s, load_s


def measure(name, builder, shape, repeat, codegen, functors, cache_dir):
    main, in_names, outs = builder(shape)
    rng = np.random.RandomState(0)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    for n in in_names:
        scope.var(n).get_tensor().set(rng.uniform(-1, 1, size=shape).astype("float32"), fluid.CPUPlace())
    fused_prog, unfused_prog = main, main.clone()
    os.environ["FLUIDLITE_DISABLE_PASSES"] = "fuse_elementwise_chains"
    exe.run(unfused_prog, scope=scope)  # prepared without the pass (the variable is read at prepare time)
    del os.environ["FLUIDLITE_DISABLE_PASSES"]
    exe.run(fused_prog, scope=scope)
    ops = fused_ops(exe, fused_prog, scope)
    n_unfused = len(unfused_prog.global_block().ops)
    iters = 200 if np.prod(shape) < 1e6 else 3
    t_unfused = seconds_per_call(lambda: exe.run(unfused_prog, scope=scope), iters, repeat, 2)
    t_fused = seconds_per_call(lambda: exe.run(fused_prog, scope=scope), iters, repeat, 2)
    row = {"group": name, "shape": "x".join(map(str, shape)), "ops": n_unfused, "fused_ops": len(ops),
           "unfused_us": t_unfused[0] * 1e6, "unfused_min_us": t_unfused[1] * 1e6,
           "interp_us": t_fused[0] * 1e6, "interp_min_us": t_fused[1] * 1e6}
    if codegen and len(ops) == 1:
        op = ops[0]
        fn, compile_s, _ = compile_cached(generate(op, functors), cache_dir)
        _, _, load_s = compile_cached(generate(op, functors), cache_dir)  # a warm cache: load only
        ins = [np.ascontiguousarray(np.array(scope.find_var(n).get_tensor())) for n in op.input("X")]
        got = [np.empty(shape, np.float32) for _ in op.output("Out")]
        in_ptrs = (ctypes.c_void_p * len(ins))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * len(got))(*[a.ctypes.data for a in got])
        n = int(np.prod(shape))
        fn(in_ptrs, out_ptrs, n)
        for name_, g in zip(op.output("Out"), got):
            want = np.array(scope.find_var(name_).get_tensor())
            row.setdefault("codegen_max_abs_diff", 0.0)
            row["codegen_max_abs_diff"] = max(row["codegen_max_abs_diff"], float(np.abs(want - g).max()))
        t_gen = seconds_per_call(lambda: fn(in_ptrs, out_ptrs, n), iters, repeat, 2)
        row["codegen_us"], row["codegen_min_us"] = t_gen[0] * 1e6, t_gen[1] * 1e6
        row["compile_s"] = compile_s
        row["cache_load_ms"] = load_s * 1e3
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-codegen", action="store_true", help="time the interpreter and the unfused ops only")
    args = ap.parse_args()
    functors = unary_functors()
    cache_dir = tempfile.mkdtemp(prefix="fluidlite_fusion_")  # cold cache every run: compile time is measured
    codegen = not args.no_codegen
    rows = [measure("lstm_fwd", group_lstm_fwd, (32, 128), args.repeat, codegen, functors, cache_dir),
            measure("lstm_bwd", group_lstm_bwd, (32, 128), args.repeat, codegen, functors, cache_dir),
            measure("chain", group_chain, (4096, 4096), args.repeat, codegen, functors, cache_dir)]
    print("fluidlite %s, %d threads" % (fluid.__version__, fluid.core.get_num_threads()), file=sys.stderr)
    cols = ["group", "shape", "ops", "fused_ops", "unfused_us", "unfused_min_us", "interp_us", "interp_min_us",
            "codegen_us", "codegen_min_us", "compile_s", "cache_load_ms", "codegen_max_abs_diff"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(("%.4g" % r[c]) if isinstance(r.get(c), float) else str(r.get(c, "-")) for c in cols))


if __name__ == "__main__":
    main()
