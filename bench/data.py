"""bench/data.py: the PyTorch twin of bench/data.lua (torch.utils.data.DataLoader)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Rows(Dataset):
    def __init__(self, x):
        self.x = x

    def __getitem__(self, i):
        return self.x[i]

    def __len__(self):
        return self.x.shape[0]


def epoch_of(loader):
    def epoch():
        total = 0.0
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            total += x.sum().item()
        return total
    return epoch


def main():
    setup()
    torch.manual_seed(0)
    N, D, B = 60000, 784, 64
    X = torch.randn(N, D)
    Y = torch.randint(0, 10, (N,))
    nbatches = (N + B - 1) // B
    ds = TensorDataset(X, Y)
    t = measure(epoch_of(DataLoader(ds, batch_size=B, shuffle=True)))
    report("data.tensor_b64", nbatches / t, "batches/s")
    w2 = DataLoader(ds, batch_size=B, shuffle=True, num_workers=2, persistent_workers=True)
    t = measure(epoch_of(w2))
    report("data.tensor_b64_w2", nbatches / t, "batches/s")
    t = measure(epoch_of(DataLoader(Rows(X), batch_size=B, shuffle=True)))
    report("data.lua_b64", nbatches / t, "batches/s")


if __name__ == "__main__":
    main()
