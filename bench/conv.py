"""bench/conv.py: the PyTorch twin of bench/conv.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)
    conv1 = torch.nn.Conv2d(1, 32, 3, 1)
    conv2 = torch.nn.Conv2d(32, 64, 3, 1)
    x1 = torch.randn(64, 1, 28, 28)
    x2 = torch.randn(64, 32, 26, 26, requires_grad=True)
    g1 = torch.randn(64, 32, 26, 26)
    g2 = torch.randn(64, 64, 24, 24)

    def step1():   # the first layer: its input is the data, which needs no gradient
        conv1.zero_grad()
        conv1(x1).backward(g1)

    def step2():
        conv2.zero_grad()
        x2.grad = None
        conv2(x2).backward(g2)

    report("conv.mnist_conv1_fwd_bwd_b64", measure(step1, min_samples=10), "s")
    report("conv.mnist_conv2_fwd_bwd_b64", measure(step2, min_samples=10), "s")
    with torch.no_grad():
        report("conv.mnist_conv1_fwd_b64", measure(lambda: conv1(x1), min_samples=10), "s")
        report("conv.mnist_conv2_fwd_b64", measure(lambda: conv2(x2), min_samples=10), "s")


if __name__ == "__main__":
    main()
