"""bench/linear.py: the PyTorch twin of bench/linear.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)
    model = torch.nn.Linear(1024, 1024)
    x = torch.randn(4096, 1024)
    grad = torch.randn(4096, 1024)

    def step():
        model.zero_grad()
        y = model(x)
        y.backward(grad)

    report("linear.fwd_bwd_1024_b4096", measure(step, min_samples=10), "s")


if __name__ == "__main__":
    main()
