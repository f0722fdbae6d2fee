"""bench/cnn.py: the PyTorch twin of bench/cnn.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    setup()
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()

    report("cnn.mnist_step_b64", measure(step, budget=4.0), "s")


if __name__ == "__main__":
    main()
