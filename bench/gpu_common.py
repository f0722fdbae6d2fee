"""bench/gpu_common.py: the gpu_* PyTorch twins time with bench/common.py's helpers (the
functions they time synchronize the GPU themselves)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402,F401
