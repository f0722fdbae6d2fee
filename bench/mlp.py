"""bench/mlp.py: the PyTorch twin of bench/mlp.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402
import time

import torch


def main():
    setup()
    torch.manual_seed(0)
    N, D, H, C, B = 60000, 784, 256, 10, 64
    X = torch.randn(N, D)
    Y = torch.randint(0, C, (N,))
    model = torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(), torch.nn.Linear(H, C))
    criterion = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def epoch(batches=None):
        perm = torch.randperm(N)
        done = 0
        for s in range(0, N, B):
            idx = perm.narrow(0, s, min(B, N - s))
            loss = criterion(model(X.index_select(0, idx)), Y.index_select(0, idx))
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if batches and done >= batches:
                break

    epoch(100)  # warm up
    times = []
    for _ in range(int(os.environ.get("BENCH_MLP_EPOCHS", "3"))):
        t0 = time.perf_counter()
        epoch()
        times.append(time.perf_counter() - t0)
    times.sort()
    n = len(times)
    med = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
    report("mlp.epoch_784_256_10_b64", N / med, "samples/s")


if __name__ == "__main__":
    main()
