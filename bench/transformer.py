"""bench/transformer.py: the PyTorch twin of bench/transformer.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch


def main():
    setup()
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    x = torch.randn(16, 128, 256)
    mask = torch.triu(torch.full((128, 128), float("-inf")), 1)

    def step():
        opt.zero_grad()
        loss = layer(x, src_mask=mask).pow(2).mean()
        loss.backward()
        opt.step()

    report("transformer.encoder_layer_step_16x128x256", measure(step, budget=4.0), "s")


if __name__ == "__main__":
    main()
