"""bench/ops.py: the PyTorch twin of bench/ops.lua (same ops, sizes and timing)."""
import os
import time

import torch


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
