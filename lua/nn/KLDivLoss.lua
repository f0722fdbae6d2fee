-- nn.KLDivLoss([{reduction='mean', log_target=false}]): nn.functional.kl_div
-- (reduction may also be 'batchmean').
return require('nn.simple').KLDivLoss
