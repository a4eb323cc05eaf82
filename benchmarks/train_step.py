"""Training-step time of fit_a_line and the MLP: fluidlite vs numpy vs PyTorch, same run, with the goals.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/train_step.py [--model fit_a_line|mlp|both]

A thin wrapper over ``python -m fluidlite.bench --model M --compare torch,numpy`` (the references, the
weight copying and the first-step loss agreement check live in ``fluidlite.bench``): it runs the two
models and prints the issue-3 goals. (The two variables force OpenBLAS's Haswell kernels on this
machine; numpy and fluidlite both use OpenBLAS, so unset them for the benchmark. PyTorch uses its own
BLAS.) Goals: fit_a_line <= 1.5x the numpy step time; MLP >= 1.1x PyTorch's steps/s.
"""
import argparse

from fluidlite.bench import format_summary, machine_info, run_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["fit_a_line", "mlp", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--batch_size", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    machine = machine_info()
    for i, kind in enumerate(["fit_a_line", "mlp"] if args.model == "both" else [args.model]):
        res = run_model(kind, batch_size=args.batch_size, repeat=args.repeat, threads=args.threads, seed=1,
                        iterations=2000 if kind == "fit_a_line" else 40, compare=["torch", "numpy"],
                        footprint=False)
        print(("\n" if i else "") + format_summary(res, None if i else machine))
        fws = {e["framework"]: e for e in res["compare"]["frameworks"]}
        if kind == "fit_a_line":
            r = 1 / fws["numpy"]["fluidlite_speedup"]
            print("goal        fit_a_line <= 1.5x numpy step time: %.2fx  %s" % (r, "PASS" if r <= 1.5 else "MISS"))
        elif fws["torch"]["status"] == "ok":
            r = fws["torch"]["fluidlite_speedup"]
            print("goal        MLP >= 1.1x PyTorch steps/s: %.2fx  %s" % (r, "PASS" if r >= 1.1 else "MISS"))


if __name__ == "__main__":
    main()
