-- optim: optimizers with PyTorch's update rules: optim.SGD, optim.Adam, optim.AdamW,
-- optim.Adadelta, optim.RMSprop, optim.Adagrad, optim.Adamax, optim.NAdam, optim.RAdam,
-- optim.Rprop, optim.ASGD, optim.LBFGS, and the learning rate schedulers
-- (optim.lr_scheduler).
-- Each takes model:parameters() (or a list of parameter groups) and an options table.

local optim = {}
package.loaded.optim = optim

for _, name in ipairs { 'Optimizer', 'SGD', 'Adam', 'AdamW', 'Adadelta', 'RMSprop', 'Adagrad', 'Adamax', 'NAdam', 'RAdam',
                        'Rprop', 'ASGD', 'LBFGS', 'lr_scheduler', 'Logger', 'ConfusionMatrix' } do
  rawset(optim, name, require('optim.' .. name))
end

-- Torch7's functional optimizers (optim.sgd(feval, x, config) ...), beside PyTorch's classes
for name, fn in pairs(require 'optim.legacy') do rawset(optim, name, fn) end

return optim
