"""bench/args.py: the PyTorch twin of bench/args.lua (the same calls, keywords for the options)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)
    x = torch.randn(4)
    y = torch.randn(2, 2)
    report("args.sum_4", measure(lambda: x.sum()), "s")
    report("args.sum_dim_keepdim_4", measure(lambda: x.sum(0, True)), "s")
    report("args.sum_keepdim_option_4", measure(lambda: x.sum(0, keepdim=True)), "s")
    report("args.sum_dims_2x2", measure(lambda: y.sum((0, 1))), "s")
    report("args.softmax_dtype_option_4", measure(lambda: x.softmax(0, dtype=torch.float64)), "s")


if __name__ == "__main__":
    main()
