-- nn.SmoothL1Loss([{reduction='mean', beta=1.0}]): nn.functional.smooth_l1_loss.
return require('nn.simple').SmoothL1Loss
