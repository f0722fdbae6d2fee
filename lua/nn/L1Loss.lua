-- nn.L1Loss([{reduction='mean'}]): loss(input, target) is nn.functional.l1_loss.
return require('nn.simple').L1Loss
