-- nn.BCELoss([{weight=, reduction='mean'}]): nn.functional.binary_cross_entropy.
return require('nn.simple').BCELoss
