"""bench/gpu_mlp.py: the PyTorch twin of bench/gpu_mlp.lua (one training step on CUDA)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import gpu_setup, measure, report  # noqa: E402


def main():
    dev = gpu_setup("gpu_mlp")
    if dev is None:
        return
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    x = torch.randn(64, 784, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    reps = 20

    def steps():
        for _ in range(reps):
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()

    report("gpu_mlp.step_784_256_10_b64", measure(steps, min_samples=10) / reps, "s")


if __name__ == "__main__":
    main()
