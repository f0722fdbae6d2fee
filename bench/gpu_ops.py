"""bench/gpu_ops.py: the PyTorch twin of bench/gpu_ops.lua (per-op cost of small CUDA ops)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import gpu_setup, measure, report  # noqa: E402


def main():
    dev = gpu_setup("gpu_ops")
    if dev is None:
        return
    a, b = torch.randn(16, device=dev), torch.randn(16, device=dev)
    m = torch.randn(64, 64, device=dev)
    reps = 200

    def timed(name, op):
        def run():
            for _ in range(reps):
                op()
            torch.cuda.synchronize()
        report("gpu_ops." + name, measure(run, min_samples=10) / reps, "s")

    timed("add_16", lambda: a + b)
    timed("exp_16", lambda: a.exp())
    timed("sum_16", lambda: a.sum())
    timed("add_inplace_16", lambda: a.add_(b))
    timed("matmul_64", lambda: m.matmul(m))


if __name__ == "__main__":
    main()
