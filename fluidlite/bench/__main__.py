"""Command line of ``python -m fluidlite.bench`` (see ``--help``)."""
import argparse
import json
import sys

from . import format_summary, gpu_unavailable_reason, machine_info, models, run_model

PROG = "python -m fluidlite.bench"
DEFAULT_MODEL = "overhead"

EPILOG = """\
examples:
  python -m fluidlite.bench                               # default model, default settings
  python -m fluidlite.bench --model overhead --iterations 500 --repeat 10
  python -m fluidlite.bench --threads 1 --json result.json

models:
"""


def _model_lines():
    lines = []
    for name in models.MODELS:
        try:
            desc = models.load(name).DESCRIPTION
        except Exception as e:  # a broken model must not break --help
            desc = "(cannot load: %s)" % e
        lines.append("  %-12s %s" % (name, desc))
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), exit code 2."""

    def error(self, message):
        self.exit(2, "%s: error: %s (see --help)\n" % (PROG, " ".join(message.split())))


def _int_at_least(lo):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected an integer >= %d, got %r" % (lo, text))
        if value < lo:
            raise argparse.ArgumentTypeError("expected an integer >= %d, got %d" % (lo, value))
        return value
    parse.__name__ = "integer"
    return parse


def build_parser():
    p = _Parser(prog=PROG, description="Time a fluidlite model's step and print a summary "
                "(steps/s, ms/step median and min-max over repetitions after warm-up, samples/s).",
                epilog=EPILOG + _model_lines(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL, choices=list(models.MODELS),
                   help="model to run (default: %(default)s)")
    p.add_argument("--batch_size", type=_int_at_least(1), help="samples per step (default: the model's)")
    p.add_argument("--iterations", type=_int_at_least(1), help="timed steps per repetition (default: the model's)")
    p.add_argument("--warmup", type=_int_at_least(0), help="untimed steps before timing (default: the model's)")
    p.add_argument("--repeat", type=_int_at_least(1), help="timed repetitions (default: the model's)")
    p.add_argument("--threads", type=_int_at_least(1), help="BLAS threads (default: leave as is)")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed (default: %(default)s)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="device (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write every figure and machine information to PATH")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.device == "gpu":
        reason = gpu_unavailable_reason()
        if reason:
            print("%s: error: --device gpu: %s" % (PROG, reason), file=sys.stderr)
            return 2
    machine = machine_info()
    try:
        result = run_model(args.model, batch_size=args.batch_size, iterations=args.iterations,
                           warmup=args.warmup, repeat=args.repeat, threads=args.threads, seed=args.seed,
                           device=args.device)
    except KeyboardInterrupt:
        print("%s: interrupted before any timed repetition finished" % PROG, file=sys.stderr)
        return 130
    except Exception as e:  # one line, not a traceback: the model or executor failed
        print("%s: error: model %s failed: %s: %s" % (PROG, args.model, type(e).__name__,
                                                      " ".join(str(e).split())), file=sys.stderr)
        return 1
    print(format_summary(result, machine))
    if args.json:
        doc = {"schema": 1, "argv": sys.argv[1:] if argv is None else list(argv), "machine": machine,
               "results": [result]}
        try:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
        except OSError as e:
            print("%s: error: --json %s: %s" % (PROG, args.json, e.strerror or e), file=sys.stderr)
            return 2
    return 130 if result["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
