-- nn.HuberLoss([{reduction='mean', delta=1.0}]): nn.functional.huber_loss.
return require('nn.simple').HuberLoss
