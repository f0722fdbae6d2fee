"""bench/common.py: timing shared by the PyTorch twins (as bench/common.lua on the Lua side)."""
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
