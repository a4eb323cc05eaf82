"""Mutated programs must raise or run, never crash: the program fuzzer behind tests/test_fuzz_programs.py.

A real training program (an MLP with softmax cross-entropy and SGD, a StaticRNN and a convnet step) is
serialized; each mutation edits its bytes (flip, set, insert, delete, truncate, repeat a range); the result
is parsed and, if that works, run with feeds for its data variables. Any Python exception is an accepted
outcome; a crash (a signal) or a hang is not. Run in a child process so a crash is seen as an exit status.

    python tools/fuzz_programs.py --seed 1 --count 2000          # a longer run than the test suite's
    python tools/fuzz_programs.py --edits edits.json             # replay edits (what a test found)

Writes `mutant N: [index, edits]` to stderr before trying each one (after a crash the last such
line names the culprit, replayable with --edits) and prints one JSON line:
{"parsed": n, "ran": n, "raised": n, "by_error": {...}}.
"""
import argparse
import json
import random
import sys

import numpy as np


def base_programs():
    """(name, serialized main program, serialized startup program, feed dict) for a few real programs."""
    import fluidlite as fluid

    L = fluid.layers
    out = []

    def add(name, build, feed):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            build()
        out.append((name, main.serialize_to_string(), startup.serialize_to_string(), feed))

    def mlp():
        x = L.data("x", shape=[8], dtype="float32")
        y = L.data("y", shape=[1], dtype="int64")
        h = L.fc(x, 16, act="relu")
        loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 4), y))
        fluid.optimizer.SGD(0.1).minimize(loss)

    add("mlp", mlp, {"x": np.ones((3, 8), "float32"), "y": np.zeros((3, 1), "int64")})

    def rnn():
        x = L.data("x", shape=[4, 2, 3], dtype="float32", append_batch_size=False)
        h0 = L.data("h0", shape=[2, 5], dtype="float32", append_batch_size=False)
        rnn = L.StaticRNN()
        with rnn.step():
            xt = rnn.step_input(x)
            h = rnn.memory(init=h0)
            nh = L.fc([xt, h], 5, act="tanh")
            rnn.update_memory(h, nh)
            rnn.step_output(nh)
        loss = L.mean(rnn())
        fluid.optimizer.SGD(0.1).minimize(loss)

    add("rnn", rnn, {"x": np.ones((4, 2, 3), "float32"), "h0": np.zeros((2, 5), "float32")})

    def conv():
        img = L.data("img", shape=[1, 6, 6], dtype="float32")
        c = L.conv2d(img, num_filters=2, filter_size=3, act="relu")
        p = L.pool2d(c, pool_size=2, pool_stride=2)
        loss = L.mean(L.fc(p, 2))
        fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)

    add("conv", conv, {"img": np.ones((2, 1, 6, 6), "float32")})
    return out


def mutate(data, edits):
    """Applies edits [(kind, where in [0, 1), value)] to bytes."""
    b = bytearray(data)
    for kind, where, value in edits:
        if not b:
            break
        i = min(int(where * len(b)), len(b) - 1)
        if kind == "flip":
            b[i] ^= 1 << (value % 8)
        elif kind == "set":
            b[i] = value % 256
        elif kind == "insert":
            b[i:i] = bytes([value % 256]) * (1 + value % 5)
        elif kind == "delete":
            del b[i:i + 1 + value % 8]
        elif kind == "truncate":
            del b[i:]
        elif kind == "repeat":
            b[i:i] = b[i:i + 1 + value % 64]
    return bytes(b)


def check(mutants, timeout_s=10.0, memory_gib=4):
    """Parses and runs each (program index, edits); returns outcome counts. Must not crash.

    An edit can legitimately ask for a huge tensor (a flipped byte in fill_constant's shape gave
    [4294967297]: 16 GiB, filled in 10 s). The address space is capped at `memory_gib` so that such a
    program fails fast with fluidlite's out-of-memory error instead of swapping into the timeout (not under
    AddressSanitizer, which needs terabytes of virtual space and caps allocations itself)."""
    import os
    import resource
    import signal

    import fluidlite as fluid

    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        cap = memory_gib << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))

    programs = base_programs()
    stats = {"parsed": 0, "ran": 0, "raised": 0, "by_error": {}}

    def on_alarm(signum, frame):
        raise TimeoutError("a mutated program ran for more than %.0f s" % timeout_s)

    signal.signal(signal.SIGALRM, on_alarm)
    for n, (index, edits) in enumerate(mutants):
        # The mutant being tried, so that a crash (which prints nothing of ours) names it: the last such line.
        print("mutant %d: %s" % (n, json.dumps([index, edits])), file=sys.stderr, flush=True)
        name, main_bytes, startup_bytes, feed = programs[index % len(programs)]
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            main = fluid.Program.parse_from_string(mutate(main_bytes, edits))
            stats["parsed"] += 1
            scope = fluid.Scope()
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(fluid.Program.parse_from_string(startup_bytes), scope=scope)
            exe.run(main, feed=feed, scope=scope)
            stats["ran"] += 1
        except TimeoutError:
            raise  # a hang is a failure, not an accepted outcome
        except Exception as e:  # noqa: BLE001 - any Python exception is an accepted outcome
            stats["raised"] += 1
            key = type(e).__name__
            stats["by_error"][key] = stats["by_error"].get(key, 0) + 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return stats


KINDS = ["flip", "set", "insert", "delete", "truncate", "repeat"]


def random_mutants(seed, count):
    rng = random.Random(seed)
    return [(rng.randrange(3), [(rng.choice(KINDS), rng.random(), rng.randrange(256))
                                for _ in range(rng.choice([1, 1, 1, 2, 3]))]) for _ in range(count)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--edits", help="a JSON file of [[program index, [[kind, where, value], ...]], ...] to replay")
    args = ap.parse_args(argv)
    if args.edits:
        with open(args.edits) as f:
            mutants = json.load(f)
    else:
        mutants = random_mutants(args.seed, args.count)
    print(json.dumps(check(mutants)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
