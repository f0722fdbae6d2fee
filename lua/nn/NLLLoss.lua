-- nn.NLLLoss([{weight=, ignore_index=-100, reduction='mean'}]): loss(input, target) is
-- nn.functional.nll_loss: input [N, C] log-probabilities, target int64 [N] class indices, 1-based.
return require('nn.simple').NLLLoss
