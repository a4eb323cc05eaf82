"""text_lstm against PyTorch fed two ways, in one run each: nn.LSTM on the PackedSequence (pack_padded_sequence,
the bench's reference) and nn.LSTM on the padded [max length, 64] batch with each sequence's last step gathered
(the same loss). torch's packed CPU LSTM slices the packed rows per time step under autograd; the backward of
each slice fills a zero gradient of the whole input, which is most of its step (torch.profiler: aten::fill_).

    PYTHONPATH=. python benchmarks/text_lstm_torch.py [--threads 1] [--iterations 10] [--repeat 5]
"""
import argparse

from fluidlite.bench import format_compare, run_model
from fluidlite.bench.models import text_lstm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for mode in ("packed", "padded"):
        text_lstm.TORCH_INPUT = mode
        res = run_model("text_lstm", iterations=args.iterations, repeat=args.repeat, threads=args.threads,
                        compare=["torch"], footprint=False)
        print("torch input: %s" % mode)
        print(format_compare(res))


if __name__ == "__main__":
    main()
