"""Saves a model over and over until it is killed: the subprocess of test_io.py's kill -9 test.

    python tests/io_kill_worker.py MODE DIRNAME GENERATION

MODE is files (save_persistables, a file per variable), combined (save_persistables with filename=) or
infer (save_inference_model). Save number g (GENERATION+1, +2, ...) fills every parameter with g and, in
infer mode, ends the program with scale(scale=g), so a load shows which save it got and a mix shows as
unequal values. Prints "R <fluidlite's __init__.py>" when ready, "S g" before save g and "D g" after it,
flushed, so that the test knows which saves may have reached the disk when it kills the process.
"""
import sys

import numpy as np

import fluidlite as fluid

LAYERS = 8  # 16 parameters


def build(gen):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h = fluid.layers.data(name="x", shape=[8], dtype="float32")
        for _ in range(LAYERS):
            h = fluid.layers.fc(input=h, size=8)
        out = fluid.layers.scale(h, scale=float(gen))
    return main, out


def save(mode, dirname, gen, exe, announce=False):
    """Save generation `gen` into `dirname` from the global scope (announce: print the S and D lines)."""
    program, out = build(gen)
    scope = fluid.global_scope()
    for v in program.list_vars():
        if fluid.io.is_persistable(v):
            scope.var(v.name).get_tensor().set(np.full(v.shape, gen, "float32"), exe.place)
    if announce:
        print("S", gen, flush=True)
    if mode == "files":
        fluid.io.save_persistables(exe, dirname, program)
    elif mode == "combined":
        fluid.io.save_persistables(exe, dirname, program, filename="params")
    else:
        fluid.io.save_inference_model(dirname, ["x"], [out], exe, program)
    if announce:
        print("D", gen, flush=True)


def load(mode, dirname, exe):
    """The generation a load of `dirname` gets; AssertionError on a mix (unequal values, or a program
    whose scale differs from its parameters)."""
    with fluid.scope_guard(fluid.Scope()):
        if mode == "infer":
            program, _, _ = fluid.io.load_inference_model(dirname, exe)
            scales = [op.attr("scale") for op in program.global_block().ops if op.type == "scale"]
        else:
            program, _ = build(0)
            fluid.io.load_persistables(exe, dirname, program, filename="params" if mode == "combined" else None)
            scales = []
        scope = fluid.global_scope()
        values = set()
        for v in program.list_vars():
            if fluid.io.is_persistable(v):
                values.update(np.unique(np.array(scope.find_var(v.name).get_tensor())).tolist())
    assert len(values) == 1 and all(s == min(values) for s in scales), (values, scales)
    return int(values.pop())


def main():
    mode, dirname, gen = sys.argv[1], sys.argv[2], int(sys.argv[3])
    exe = fluid.Executor(fluid.CPUPlace())
    print("R", fluid.__file__, flush=True)
    while True:
        gen += 1
        save(mode, dirname, gen, exe, announce=True)


if __name__ == "__main__":
    main()
