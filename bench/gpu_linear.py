"""bench/gpu_linear.py: the PyTorch twin of bench/gpu_linear.lua (CUDA, FP32, no TF32)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import gpu_setup, measure, report  # noqa: E402


def main():
    dev = gpu_setup("gpu_linear")
    if dev is None:
        return
    model = torch.nn.Linear(4096, 4096).to(dev)
    x = torch.randn(8192, 4096, device=dev, requires_grad=True)
    grad = torch.randn(8192, 4096, device=dev)
    w = model.weight.detach()
    xd = x.detach()
    reps = 5

    def step():
        for _ in range(reps):
            model.zero_grad()
            y = model(x)
            y.backward(grad)
        torch.cuda.synchronize()

    def gemms():
        for _ in range(reps):
            xd.matmul(w.t())
            grad.matmul(w)
            grad.t().matmul(xd)
        torch.cuda.synchronize()

    flops = 3 * 2 * 8192 * 4096 * 4096
    t_step = measure(step, min_samples=5, budget=3.0) / reps
    t_gemm = measure(gemms, min_samples=5, budget=3.0) / reps
    report("gpu_linear.fwd_bwd_4096_b8192", t_step, "s")
    report("gpu_linear.three_gemms_4096_b8192", t_gemm, "s")
    report("gpu_linear.fwd_bwd_tflops", flops / t_step / 1e12, "TFLOP/s")


if __name__ == "__main__":
    main()
