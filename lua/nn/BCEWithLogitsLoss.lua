-- nn.BCEWithLogitsLoss([{weight=, pos_weight=, reduction='mean'}]):
-- nn.functional.binary_cross_entropy_with_logits.
return require('nn.simple').BCEWithLogitsLoss
