"""bench/gpu_common.py: the gpu_* PyTorch twins time with bench/common.py's helpers (the
functions they time synchronize the GPU themselves)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402,F401

import torch  # noqa: E402


def gpu_setup(name):
    """Threads as every benchmark, FP32 matrix products (no TF32), seed 0; returns the device,
    or None (after saying so) when there is no GPU."""
    setup()
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device")
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    return "cuda:0"
