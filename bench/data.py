"""bench/data.py: the PyTorch twin of bench/data.lua (torch.utils.data.DataLoader)."""
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


def setup():
    n = int(os.environ.get("BENCH_THREADS", "0") or 0)
    if n > 0:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def measure(fn, warmup=0.3, sample=0.01, budget=2.0, min_samples=5):
    """Seconds per call of fn, the median over samples; as measure in bench/common.lua."""
    clock = time.perf_counter
    start, calls = clock(), 0
    while True:
        fn()
        calls += 1
        if calls >= 3 and clock() - start >= warmup:
            break
    per_call = (clock() - start) / calls
    inner = max(1, int(sample / per_call))
    samples, start, total = [], clock(), 0.0
    while len(samples) < min_samples or total < budget:
        t0 = clock()
        for _ in range(inner):
            fn()
        t1 = clock()
        samples.append((t1 - t0) / inner)
        total = t1 - start
    samples.sort()
    n = len(samples)
    return samples[n // 2] if n % 2 else (samples[n // 2 - 1] + samples[n // 2]) / 2


def report(name, value, unit):
    print("BENCH %s %.6g %s" % (name, value, unit), flush=True)


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
