"""bench/data_workers.py: the PyTorch twin of bench/data_workers.lua (a dataset whose
__getitem__ busy-waits 1 ms, read with num_workers = 0 and 2)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch
from torch.utils.data import DataLoader, Dataset

N, B, COST = 64, 8, 0.001


class Busy(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < COST:
            pass
        return torch.full((16,), float(i + 1))

    def __len__(self):
        return self.n


def epoch_of(loader):
    def epoch():
        total = 0
        for x in loader:
            total += x.shape[0]
        return total
    return epoch


def main():
    setup()
    opts = dict(min_samples=5, budget=2.0, warmup=0.3)
    ds = Busy(N)
    t0 = measure(epoch_of(DataLoader(ds, batch_size=B)), **opts)
    report("data_workers.busy1ms_w0", N / t0, "items/s")
    w2 = DataLoader(ds, batch_size=B, num_workers=2, persistent_workers=True)
    t2 = measure(epoch_of(w2), **opts)
    report("data_workers.busy1ms_w2", N / t2, "items/s")


if __name__ == "__main__":
    main()
