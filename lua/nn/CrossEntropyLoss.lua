-- nn.CrossEntropyLoss([{reduction='mean'}]): loss(input, target) is nn.functional.cross_entropy:
-- input [N, C] raw scores, target int64 [N] class indices, 1-based.
return require('nn.simple').CrossEntropyLoss
