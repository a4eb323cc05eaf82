"""Command line of ``python -m fluidlite.bench`` (see ``--help``)."""
import argparse
import json
import os
import sys

from ._load import background_load
from . import (AgreementError, format_summary, gpu_unavailable_reason, machine_info, machine_line, models,
               reference, run_model)

PROG = "python -m fluidlite.bench"
DEFAULT_MODEL = "mlp"
DEFAULT_INFER_MODEL = "lenet"
INFER_UNSUPPORTED = ("compare", "profile", "advise", "timeline", "save_profile", "baseline", "cprofile", "nproc")
NPROC_UNSUPPORTED = ("advise", "save_profile", "baseline", "cprofile", "sorted_key")
SORTED_KEYS = ("calls", "total", "max", "min", "ave")
SCHEMA = 2

EPILOG = """\
examples:
  python -m fluidlite.bench                                  # the MLP training step, default settings
  python -m fluidlite.bench --model overhead --iterations 500 --repeat 10
  python -m fluidlite.bench --model all --threads 1 --json result.json
  python -m fluidlite.bench --model mlp --compare torch,numpy,paddle
  python -m fluidlite.bench --model mlp --profile --sorted_key total --timeline /tmp/mlp.json
  python -m fluidlite.bench --model lstm --advise                 # ranked tuning findings after the timing
  python -m fluidlite.bench --model fit_a_line --cprofile /tmp/fit.pstats
  python -m fluidlite.bench --model mlp --threads 2 --background-load 1   # on a machine with one core taken
  python -m fluidlite.bench --model mlp --save-profile A.json        # profile the timed steps, save them
  python -m fluidlite.bench --model mlp --baseline A.json            # after a fix: per-op diff against A
  python -m fluidlite.bench --model overhead --iterations 1 --repeat 1 --warmup 0 --glog_v 3
  python -m fluidlite.bench --mode infer --model mobilenet_v2       # inference latency, batch 1 and 32, vs ONNX Runtime
  python -m fluidlite.bench --model resnet_small --nproc 2 --compare torch   # data-parallel on 2 ranks, vs DDP

  --compare checks that each reference's first step gives fluidlite's result (exit code 1 if not), then
  times them interleaved in this process; a framework that is not installed is reported as skipped.
  --mode infer times the inference program (save_inference_model + load_inference_model, so the inference passes
  apply) of the image models at batch 1 and 32 (or --batch_size) against ONNX Runtime running the torch network
  exported to ONNX, after checking their logits agree (pip install ".[compare]"; skipped if not installed).
  --nproc N trains the model data-parallel on N ranks (mpiexec, pip install 'fluidlite[mpi]'), each at the
  model's batch (the global batch is N x that) with --threads threads (default cores / N): step time,
  communication per step, exposed communication and overlap, bytes allreduced; then one process at the global
  batch with N x the threads (scaling = its ms / the ranks' ms) and, with --compare torch, PyTorch DDP (gloo)
  on the same ranks. --profile prints rank 0's profile of one more repetition (with its Communication section).
  With --model all, --timeline and --cprofile write one file per model (PATH with .MODEL before its
  extension), and so do --save-profile and --baseline. --baseline warns (stderr) when A ran another model,
  batch size, thread count or device; the step-time change comes with its noise band from both runs' per-step
  times. Exit codes: 0 done, 1 a model failed or disagreed with a reference, 2 bad arguments,
  130 interrupted (Ctrl-C; what was measured is printed).

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
    lines.append("  %-12s every model above, one after the other" % "all")
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
            raise argparse.ArgumentTypeError("expected an integer >= %d, got %r" % (lo, text)) from None
        if value < lo:
            raise argparse.ArgumentTypeError("expected an integer >= %d, got %d" % (lo, value))
        return value
    parse.__name__ = "integer"
    return parse


def _framework_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in reference.FRAMEWORKS]
    if not names or bad:
        raise argparse.ArgumentTypeError("expected a comma-separated list of %s, got %r"
                                         % (",".join(reference.FRAMEWORKS), text))
    return list(dict.fromkeys(names))
_framework_list.__name__ = "framework list"


def build_parser():
    p = _Parser(prog=PROG, description="Time a fluidlite model's step and print a summary "
                "(steps/s, ms/step median and min-max over repetitions after warm-up, samples/s, "
                "construction time and object counts, memory).",
                epilog=EPILOG + _model_lines(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["train", "infer"], default="train",
                   help="train: time a training step; infer: inference latency against ONNX Runtime "
                        "(default: %(default)s)")
    p.add_argument("--model", choices=list(models.MODELS) + ["all"],
                   help="model to run, or all (default: %s; with --mode infer: %s)" % (DEFAULT_MODEL,
                                                                                         DEFAULT_INFER_MODEL))
    p.add_argument("--batch_size", type=_int_at_least(1), help="samples per step (default: the model's)")
    p.add_argument("--iterations", type=_int_at_least(1), help="timed steps per repetition (default: the model's)")
    p.add_argument("--warmup", type=_int_at_least(0), help="untimed steps before timing (default: the model's)")
    p.add_argument("--repeat", type=_int_at_least(1), help="timed repetitions (default: the model's)")
    p.add_argument("--threads", type=_int_at_least(1),
                   help="threads for fluidlite's pool, also for torch and numpy's BLAS (default: leave as is)")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed (default: %(default)s)")
    p.add_argument("--background-load", "--background_load", type=_int_at_least(0), default=0, metavar="N",
                   dest="background_load",
                   help="run N busy background processes during the run (a loaded machine, the same way every "
                        "time; default: %(default)s)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="device (default: %(default)s)")
    p.add_argument("--compare", type=_framework_list, metavar="FW[,FW...]",
                   help="also time the same model in these reference frameworks (%s)" % ",".join(reference.FRAMEWORKS))
    p.add_argument("--profile", action="store_true", help="print fluidlite's Profiling Report for the timed steps")
    p.add_argument("--advise", action="store_true",
                   help="profile the timed steps and print the advisor's ranked findings after the timing")
    p.add_argument("--sorted_key", choices=SORTED_KEYS, help="sort the report by this column (with --profile)")
    p.add_argument("--timeline", metavar="PATH", help="write the timed steps' Chrome trace (Perfetto) to PATH")
    p.add_argument("--save-profile", "--save_profile", metavar="PATH", dest="save_profile",
                   help="profile the timed steps and save the profile (events, per-step times, settings) to PATH")
    p.add_argument("--baseline", metavar="PATH",
                   help="profile the timed steps and print their diff against the profile saved in PATH")
    p.add_argument("--glog_v", type=_int_at_least(0), metavar="N", help="GLOG verbose level while running (stderr)")
    p.add_argument("--cprofile", metavar="PATH",
                   help="write a cProfile (pstats) file of the Python side to PATH and print its top entries")
    p.add_argument("--nproc", type=_int_at_least(1), metavar="N",
                   help="train data-parallel on N ranks through mpiexec (see below)")
    p.add_argument("--fuse-grad-size-mb", "--fuse_grad_size_mb", type=float, metavar="MB", dest="fuse_grad_size_mb",
                   help="with --nproc: the gradient bucket size (default: "
                        "fluidlite.distributed.collective.DEFAULT_FUSE_GRAD_SIZE_MB)")
    p.add_argument("--rounds", type=_int_at_least(1), default=1, metavar="R",
                   help="with --nproc: run the ranks, the baseline and DDP R times in turn; ratios are the median "
                        "of the rounds' (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write every figure and machine information to PATH")
    p.add_argument("--no_progress", action="store_true", help="no progress bar (it is off anyway when stderr is "
                   "not a terminal)")
    return p


def _per_model(path, name, many):
    if not path or not many:
        return path
    stem, ext = os.path.splitext(path)
    return "%s.%s%s" % (stem, name, ext)


def _check_writable(parser, flag, path):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        parser.error("%s %s: directory %s does not exist" % (flag, path, directory))
    if not os.access(directory, os.W_OK):
        parser.error("%s %s: directory %s is not writable" % (flag, path, directory))


def _fail(message, code):
    print("%s: error: %s" % (PROG, " ".join(str(message).split())), file=sys.stderr)
    return code


PROFILE_SETTINGS = ("model", "device", "batch_size", "threads", "iterations", "warmup", "repeat", "seed")
MATCHED_SETTINGS = (("model", "model"), ("batch_size", "batch"), ("threads", "threads"), ("device", "device"))


def _save_and_diff(result, machine, baseline, save_path):
    """--save-profile: write this run's profile; --baseline: print its diff against the baseline, after a
    warning line if the baseline ran other settings. Returns an error message if the profile could not be
    written, else None."""
    from fluidlite import profiler as fl_profiler
    from fluidlite.profiler.diff import current_profile
    prof = current_profile(step_ms=result["profile"]["step_ms"] or None,
                           settings={key: result[key] for key in PROFILE_SETTINGS}, machine=machine,
                           name="this run")
    if save_path:
        try:
            prof.save(save_path)
        except OSError as e:
            return "--save-profile %s: %s" % (save_path, e.strerror or e)
        print("profile     %s (%d events, %d step times)" % (save_path, len(prof.events), len(prof.step_ms or ())))
    if baseline is not None:
        differs = ["%s %s (this run: %s)" % (label, baseline.settings[key], result[key])
                   for key, label in MATCHED_SETTINGS
                   if key in baseline.settings and baseline.settings[key] != result[key]]
        if differs:
            sys.stdout.flush()  # the warning comes right before the diff it qualifies
            print("%s: warning: --baseline %s was recorded with other settings: %s" % (
                PROG, baseline.path, ", ".join(differs)), file=sys.stderr)
        print()
        sys.stdout.write(fl_profiler.diff(baseline, prof).text())
    return None


def _run_models(args, names, many, machine, baselines):
    """Runs and prints each model in turn; returns (exit code, results)."""
    results, code, shown_header = [], 0, False
    for name in names:
        try:
            result = run_model(name, batch_size=args.batch_size, iterations=args.iterations, warmup=args.warmup,
                               repeat=args.repeat, threads=args.threads, seed=args.seed, device=args.device,
                               compare=args.compare, profile=args.profile, sorted_key=args.sorted_key,
                               timeline=_per_model(args.timeline, name, many),
                               cprofile=_per_model(args.cprofile, name, many), progress=not args.no_progress,
                               record=bool(args.save_profile or args.baseline), advise=args.advise)
        except KeyboardInterrupt:
            print("%s: interrupted before a timed repetition of %s finished" % (PROG, name), file=sys.stderr)
            code = 130
            break
        except AgreementError as e:
            print("%s: error: AGREEMENT CHECK FAILED for model %s: %s" % (PROG, name, e), file=sys.stderr)
            code = 1
            break
        except Exception as e:  # one line, not a traceback: the model or executor failed
            code = _fail("model %s failed: %s: %s" % (name, type(e).__name__, e), 1)
            break
        results.append(result)
        if result.get("profile") and result["profile"]["report"]:
            sys.stdout.write(result["profile"]["report"])
        if result.get("cprofile"):
            sys.stdout.write(result["cprofile"]["text"])
        if shown_header:
            print()
        print(format_summary(result, machine if not shown_header else None))
        if result.get("advice_text"):
            sys.stdout.write(result["advice_text"])
        if args.save_profile or args.baseline:
            error = _save_and_diff(result, machine, baselines.get(name), _per_model(args.save_profile, name, many))
            if error:
                return _fail(error, 2), results
        sys.stdout.flush()
        shown_header = True
        if result["interrupted"]:
            code = 130
            break
    return code, results


def _run_infer(args, names, machine):
    """--mode infer: each model's inference latency table; returns (exit code, results)."""
    from .infer import format_infer, run_infer
    results, code = [], 0
    for k, name in enumerate(names):
        try:
            result = run_infer(name, batch_sizes=(args.batch_size,) if args.batch_size else (1, 32),
                               iterations=args.iterations, warmup=args.warmup, repeat=args.repeat,
                               threads=args.threads, seed=args.seed, device=args.device)
        except KeyboardInterrupt:
            print("%s: interrupted during the inference run of %s" % (PROG, name), file=sys.stderr)
            return 130, results
        except AgreementError as e:
            print("%s: error: AGREEMENT CHECK FAILED for model %s: %s" % (PROG, name, e), file=sys.stderr)
            return 1, results
        except Exception as e:
            return _fail("model %s failed: %s: %s" % (name, type(e).__name__, e), 1), results
        results.append(result)
        if k:
            print()
        print(format_infer(result, machine if not k else None))
        sys.stdout.flush()
    return code, results


def _run_nproc(args, names, machine):
    """--nproc: each model data-parallel (fluidlite.bench.distributed); returns (exit code, results)."""
    from .distributed import format_distributed, run_distributed
    results = []
    for k, name in enumerate(names):
        try:
            result = run_distributed(name, args.nproc, threads=args.threads, batch_size=args.batch_size,
                                     iterations=args.iterations, warmup=args.warmup, repeat=args.repeat,
                                     seed=args.seed, compare=args.compare, profile=args.profile,
                                     timeline=_per_model(args.timeline, name, len(names) > 1),
                                     fuse_grad_size_mb=args.fuse_grad_size_mb, rounds=args.rounds)
        except KeyboardInterrupt:
            print("%s: interrupted during the --nproc run of %s" % (PROG, name), file=sys.stderr)
            return 130, results
        except Exception as e:
            return _fail("model %s on %d ranks: %s" % (name, args.nproc, e), 1), results
        results.append(result)
        prof = result["ranks"].get("profile")
        if prof:
            sys.stdout.write(prof["report"])
            sys.stdout.write(prof["advice"])
        if k:
            print()
        print(format_distributed(result, machine_line(machine) if not k else None))
        sys.stdout.flush()
    return 0, results


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nproc is not None:
        bad = [f for f in NPROC_UNSUPPORTED if getattr(args, f)]
        if bad:
            parser.error("--%s is not supported with --nproc" % bad[0].replace("_", "-"))
        if args.device != "cpu":
            parser.error("--nproc runs on the CPU")
    elif args.fuse_grad_size_mb is not None:
        parser.error("--fuse-grad-size-mb needs --nproc")
    elif args.rounds != 1:
        parser.error("--rounds needs --nproc")
    if args.fuse_grad_size_mb is not None and not args.fuse_grad_size_mb > 0:
        parser.error("--fuse-grad-size-mb must be > 0, got %g" % args.fuse_grad_size_mb)
    if args.mode == "infer":
        from .infer import infer_models, supported
        bad = [f for f in INFER_UNSUPPORTED if getattr(args, f)]
        if bad:
            parser.error("--%s is not supported with --mode infer" % bad[0].replace("_", "-"))
        if args.model is not None and args.model != "all" and not supported(args.model):
            parser.error("--mode infer: model %s has no inference mode (choose from %s)" % (
                args.model, ", ".join(infer_models())))
    if args.model is None:
        args.model = DEFAULT_INFER_MODEL if args.mode == "infer" else DEFAULT_MODEL
    if args.sorted_key and not args.profile:
        parser.error("--sorted_key needs --profile")
    for flag in ("timeline", "cprofile", "json", "save_profile"):
        if getattr(args, flag):
            _check_writable(parser, "--" + flag.replace("_", "-"), getattr(args, flag))
    if args.device == "gpu":
        reason = gpu_unavailable_reason()
        if reason:
            return _fail("--device gpu: %s" % reason, 2)
        if args.compare and set(args.compare) - {"torch"}:
            return _fail("--device gpu compares with torch on CUDA only (--compare torch); %s run on the CPU"
                         % ", ".join(sorted(set(args.compare) - {"torch"})), 2)
    if args.glog_v is not None:
        import fluidlite
        fluidlite.set_vlog_level(args.glog_v)

    if args.mode == "infer":
        from .infer import infer_models
        names = infer_models() if args.model == "all" else [args.model]
    else:
        names = list(models.MODELS) if args.model == "all" else [args.model]
    many = len(names) > 1
    baselines = {}
    if args.baseline:  # read before running, so a bad file costs no run
        from fluidlite import profiler as fl_profiler
        for name in names:
            path = _per_model(args.baseline, name, many)
            try:
                baselines[name] = fl_profiler.load_profile(path)
            except (OSError, ValueError) as e:
                return _fail("--baseline %s: %s" % (path, e), 2)
    machine = machine_info()
    machine["background_load"] = args.background_load
    with background_load(args.background_load):
        if args.mode == "infer":
            code, results = _run_infer(args, names, machine)
        elif args.nproc is not None:
            code, results = _run_nproc(args, names, machine)
        else:
            code, results = _run_models(args, names, many, machine, baselines)
    if args.json and results:
        doc = {"schema": SCHEMA, "mode": args.mode, "argv": sys.argv[1:] if argv is None else list(argv),
               "machine": machine, "exit_code": code, "results": results}
        try:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
        except OSError as e:
            return _fail("--json %s: %s" % (args.json, e.strerror or e), 2)
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
