"""bench/lstm_lm.py: the PyTorch twin of bench/lstm_lm.lua."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure, report, setup  # noqa: E402

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    setup()
    torch.manual_seed(0)
    ntoken, ninp, nhid, bptt, bsz = 10000, 200, 200, 35, 20
    encoder = nn.Embedding(ntoken, ninp)
    rnn = nn.LSTM(ninp, nhid, 2, dropout=0.2)
    decoder = nn.Linear(nhid, ntoken)
    drop = nn.Dropout(0.2)
    model = nn.ModuleList([encoder, rnn, decoder])
    opt = torch.optim.SGD(model.parameters(), lr=20)
    data = torch.randint(0, ntoken, (bptt, bsz))
    targets = torch.randint(0, ntoken, (bptt * bsz,))
    state = [(torch.zeros(2, bsz, nhid), torch.zeros(2, bsz, nhid))]

    def step():
        hidden = tuple(h.detach() for h in state[0])
        opt.zero_grad()
        out, hidden = rnn(drop(encoder(data)), hidden)
        state[0] = hidden
        loss = F.cross_entropy(decoder(drop(out)).view(-1, ntoken), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()

    report("lstm_lm.step_bptt35_b20", measure(step, budget=4.0), "s")


if __name__ == "__main__":
    main()
