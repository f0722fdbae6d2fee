"""bench/ops.py: the PyTorch twin of bench/ops.lua (same ops, sizes and timing)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)

    a, b = torch.randn(4), torch.randn(4)
    report("ops.add_4", measure(lambda: a + b), "s")

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    report("ops.matmul_64", measure(lambda: a.matmul(b)), "s")

    n = 1 << 25
    a, b = torch.randn(n), torch.randn(n)
    report("ops.add_2p25", measure(lambda: a + b, min_samples=10), "s")
    report("ops.sum_2p25", measure(lambda: a.sum(), min_samples=10), "s")
    del a, b

    a, b = torch.randn(4096, 1024), torch.randn(1024, 1024)
    report("ops.matmul_4096x1024x1024", measure(lambda: a.matmul(b), min_samples=10), "s")


if __name__ == "__main__":
    main()
