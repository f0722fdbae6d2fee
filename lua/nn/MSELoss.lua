-- nn.MSELoss([{reduction='mean'}]): loss(input, target) is nn.functional.mse_loss.
return require('nn.simple').MSELoss
