"""bench/train_step.py: the PyTorch twin of bench/train_step.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 2)
    criterion = torch.nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(30, 5), torch.randn(30, 2)

    def step():
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    report("train_step.linear_5x2_b30", measure(step), "s")


if __name__ == "__main__":
    main()
