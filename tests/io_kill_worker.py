"""kill -9 during saves: the worker that saves a model over and over until it is killed, and the loop that
kills workers and checks every load afterwards (test_io.py's test, and tools/io_kill_stress.py's longer run).

    python tests/io_kill_worker.py MODE DIRNAME GENERATION

MODE is files (save_persistables, a file per variable), combined (save_persistables with filename=) or
infer (save_inference_model). Save number g (GENERATION+1, +2, ...) fills every parameter with g and, in
infer mode, ends the program with scale(scale=g), so a load shows which save it got and a mix shows as
unequal values. The worker prints "R <fluidlite's __init__.py>" when ready, "S g" before save g and "D g"
after it, flushed, so that the killer knows which saves may have reached the disk.
"""
import collections
import os
import signal
import subprocess
import sys
import time
import traceback

import numpy as np

import fluidlite as fluid

LAYERS = 8  # 16 parameters
MODES = ("files", "combined", "infer")


def build(gen):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        h = fluid.layers.data(name="x", shape=[8], dtype="float32")
        for _ in range(LAYERS):
            h = fluid.layers.fc(input=h, size=8)
        out = fluid.layers.scale(h, scale=float(gen))
    return main, out


def save(mode, dirname, gen, exe, out=None):
    """Save generation `gen` into `dirname` from the global scope (out: a file to write the S and D lines to)."""
    program, target = build(gen)
    scope = fluid.global_scope()
    for v in program.list_vars():
        if fluid.io.is_persistable(v):
            scope.var(v.name).get_tensor().set(np.full(v.shape, gen, "float32"), exe.place)
    if out:
        out.write("S %d\n" % gen)
        out.flush()
    if mode == "files":
        fluid.io.save_persistables(exe, dirname, program)
    elif mode == "combined":
        fluid.io.save_persistables(exe, dirname, program, filename="params")
    else:
        fluid.io.save_inference_model(dirname, ["x"], [target], exe, program)
    if out:
        out.write("D %d\n" % gen)
        out.flush()


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
    assert len(values) == 1 and all(s == min(values) for s in scales), ("a mix of saves", values, scales)
    return int(values.pop())


def run(mode, dirname, gen, out):
    """Save generations gen+1, gen+2, ... into `dirname` until killed."""
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        out.write("R %s\n" % fluid.__file__)
        out.flush()
        while True:
            gen += 1
            save(mode, dirname, gen, exe, out)


class ForkWorker:
    """A worker forked from this process: starts in a millisecond (fluidlite is imported already)."""

    def __init__(self, mode, dirname, gen):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child never returns into the caller
            try:
                os.close(r)
                out = os.fdopen(w, "w")
                try:
                    run(mode, dirname, gen, out)
                except BaseException:
                    out.write("E %r\n" % traceback.format_exc())
                    out.flush()
            finally:
                os._exit(3)
        os.close(w)
        self.out = os.fdopen(r)

    def ready(self):
        return self.out.readline()

    def kill(self):
        """SIGKILL; returns (what it printed after the ready line, how it ended)."""
        os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        text = self.out.read()
        self.out.close()
        return text, ("SIGKILL" if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
                      else "status %d" % status)


class ProcessWorker:
    """A worker in a fresh interpreter (python tests/io_kill_worker.py): slower to start (the import)."""

    def __init__(self, mode, dirname, gen):
        root = os.path.dirname(os.path.dirname(os.path.abspath(fluid.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), mode, dirname, str(gen)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)

    def ready(self):
        return self.p.stdout.readline()

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=60)
        text = self.p.stdout.read()  # (not communicate(timeout=): it would skip what readline buffered)
        self.p.stdout.close()
        return text, "SIGKILL" if self.p.returncode == -signal.SIGKILL else "status %d" % self.p.returncode


def temp_files(dirname):
    return [os.path.join(r, n) for r, _, names in os.walk(dirname) for n in names if ".fltmp-" in n]


def kill_loop(root, kills, rng, worker=ForkWorker, log=None):
    """`kills` workers, the modes taking turns, each saving into its mode's directory under `root` until it
    gets SIGKILL after a random delay (up to twice the time of one save of its mode, so that the kills
    spread over the whole of a save: before and after its commit point); after each kill a load must get
    the last completed save or the one in flight, complete: never a mix, never a corrupt model. A final
    save into each directory must leave no temporary file. User files next to the saves are never touched.
    Returns a Counter of outcomes: (mode, "old" / "new" / "between saves" / "saves")."""
    exe = fluid.Executor(fluid.CPUPlace())
    gens, on_disk, max_delay = {}, {}, {}  # the last generation a worker started / the one on disk
    for mode in MODES:
        d = os.path.join(root, mode)
        os.makedirs(d)
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("mine")
        with open(os.path.join(d, ".notes.txt.1234abcd.tmp"), "w") as f:  # like a stale temp file, not ours
            f.write("mine too")
        with fluid.scope_guard(fluid.Scope()):
            save(mode, d, 1, exe)
            start = time.perf_counter()
            save(mode, d, 2, exe)
            max_delay[mode] = min(2 * (time.perf_counter() - start), 0.5)
        gens[mode] = on_disk[mode] = 2
    outcomes = collections.Counter()
    for i in range(kills):
        mode = MODES[i % len(MODES)]
        d = os.path.join(root, mode)
        w = worker(mode, d, gens[mode])
        line = w.ready()
        if line != "R %s\n" % fluid.__file__:  # ready, and running this fluidlite
            text, how = w.kill()
            raise AssertionError("the %s worker did not start: %r %s" % (mode, line, text))
        time.sleep(rng.uniform(0, max_delay[mode]))
        text, how = w.kill()
        assert how == "SIGKILL", (mode, how, text)
        lines = text.splitlines()
        started = [int(x.split()[1]) for x in lines if x.startswith("S ")]
        done = [int(x.split()[1]) for x in lines if x.startswith("D ")]
        last_done = done[-1] if done else on_disk[mode]
        in_flight = started[-1] if started and started[-1] != last_done else None
        got = load(mode, d, exe)
        assert got == last_done or got == in_flight, (mode, got, last_done, in_flight)
        outcomes[(mode, "between saves" if in_flight is None else "new" if got == in_flight else "old")] += 1
        outcomes[(mode, "saves")] += len(done)
        # temporary files of at most the one interrupted save (the next save deletes them)
        assert len(temp_files(d)) <= 2 * LAYERS + 3, temp_files(d)
        on_disk[mode] = got
        gens[mode] = max(started + [gens[mode]])  # the next worker's saves get new numbers
        if log and (i + 1) % 100 == 0:
            log("%d kills: %s" % (i + 1, sorted(outcomes.items())))
    for mode in MODES:
        d = os.path.join(root, mode)
        with fluid.scope_guard(fluid.Scope()):
            save(mode, d, gens[mode] + 1, exe)
        assert load(mode, d, exe) == gens[mode] + 1
        assert temp_files(d) == [], temp_files(d)
        for name, text in (("notes.txt", "mine"), (".notes.txt.1234abcd.tmp", "mine too")):
            with open(os.path.join(d, name)) as f:
                assert f.read() == text, name
    return outcomes


def main():
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.stdout)


if __name__ == "__main__":
    main()
