-- nn.CrossEntropyLoss([{weight=, ignore_index=-100, label_smoothing=0, reduction='mean'}]):
-- loss(input, target) is nn.functional.cross_entropy: input [N, C] raw scores, target int64
-- [N] class indices, 1-based, or class probabilities of the input's shape.
return require('nn.simple').CrossEntropyLoss
