-- bench/args.lua: what reading an op's arguments costs, on 4 elements where the call's
-- overhead is all there is: arguments by position (the generated fast path of
-- lua/torch/signature.lua), as PyTorch's keywords (the options table), and the reductions
-- over a table of dims.  Twin: bench/args.py.
local here = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
local bench = dofile(here .. 'common.lua')
bench.setup()
torch.manual_seed(0)

local x = torch.randn(4)
local y = torch.randn(2, 2)
bench.report('args.sum_4', bench.measure(function() local r = x:sum() end), 's')
bench.report('args.sum_dim_keepdim_4', bench.measure(function() local r = x:sum(1, true) end), 's')
bench.report('args.sum_keepdim_option_4', bench.measure(function() local r = x:sum(1, { keepdim = true }) end), 's')
bench.report('args.sum_dims_2x2', bench.measure(function() local r = y:sum({ 1, 2 }) end), 's')
bench.report('args.softmax_dtype_option_4', bench.measure(function() local r = x:softmax(1, { dtype = 'float64' }) end), 's')
