"""bench/dp.py: the PyTorch twin of bench/dp.lua: one training step of a 784-256-10 MLP at
batch 256 on one device (a GPU when there is one, else the CPU), and under
torch.nn.DataParallel when two GPUs exist (PyTorch has no CPU devices to split over, and
cannot split one GPU in two as DPLUA_CUDA_VIRTUAL=2 does)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import measure, report, setup  # noqa: E402


def main():
    setup()
    cuda = torch.cuda.is_available()
    home = torch.device("cuda:0" if cuda else "cpu")
    D, H, C, B = 784, 256, 10, 256
    torch.manual_seed(0)
    x = torch.randn(B, D, device=home)
    y = torch.randint(0, C, (B,), device=home)
    criterion = torch.nn.CrossEntropyLoss()

    def mlp():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(),
                                   torch.nn.Linear(H, C)).to(home)

    def trainer(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if cuda:
                torch.cuda.synchronize()
        return step

    single = measure(trainer(mlp()))
    report("dp.step_mlp_b256_1dev", single, "s")
    if torch.cuda.device_count() >= 2:
        parallel = measure(trainer(torch.nn.DataParallel(mlp(), device_ids=[0, 1])))
        report("dp.step_mlp_b256_2dev_cuda", parallel, "s")
        report("dp.overhead_2dev_cuda", (parallel / single - 1) * 100, "%")


if __name__ == "__main__":
    main()
