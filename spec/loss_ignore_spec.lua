-- loss_ignore: cross_entropy and nll_loss where targets are ignored, against PyTorch 1.13's
-- losses and input gradients (spec/fixtures/make_loss_ignore.py): a mean over targets that
-- are all ignored is NaN with a gradient of exactly 0 (not NaN), with or without weight and
-- label_smoothing; a total weight of 0 over kept targets gives NaN as 0 / 0; -inf
-- log-probabilities of other classes or in ignored rows leave the loss finite.
local torch = require 'torch'
local nn = require 'nn'
local F = nn.functional
local cases = dofile('spec/fixtures/loss_ignore.lua')

local function flat(v, out)
  out = out or {}
  if type(v) == 'table' then for _, x in ipairs(v) do flat(x, out) end else out[#out + 1] = v end
  return out
end

local function close(got, want, what)
  got, want = flat(got), flat(want)
  assert(#got == #want, ('%s: %d values, expected %d'):format(what, #got, #want))
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok = (g ~= g and w ~= w) or g == w or math.abs(g - w) <= 1e-12 * (1 + math.abs(w))
    assert(ok, ('%s, element %d: %.17g, expected %.17g'):format(what, i, g, w))
  end
end

describe('cross_entropy and nll_loss with ignored targets, as PyTorch 1.13', function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local x = torch.tensor(c.input, { dtype = 'float64', requires_grad = true })
      local opts = {}
      for k, v in pairs(c.opts) do opts[k] = v end
      if opts.weight then opts.weight = torch.tensor(opts.weight, { dtype = 'float64' }) end
      local loss = F[c.fn](x, torch.tensor(c.target, { dtype = 'int64' }), opts)
      loss:sum():backward()
      close(loss:tolist(), c.loss, c.name .. ': loss')
      close(x.grad:tolist(), c.grad, c.name .. ': gradient')
    end)
  end

  it('the module forms give a gradient of 0 too', function()
    local x = torch.randn(4, 5, { requires_grad = true })
    local t = torch.tensor({ -100, -100, -100, -100 })
    for _, m in ipairs { nn.CrossEntropyLoss(), nn.CrossEntropyLoss { label_smoothing = 0.2 },
                         nn.CrossEntropyLoss { weight = torch.rand(5) } } do
      x.grad = nil
      local l = m(x, t)
      assert(l:item() ~= l:item(), 'the mean over no targets is NaN')
      l:backward()
      assert.are.equal(0, x.grad:abs():max():item())
    end
    x.grad = nil
    local l = nn.NLLLoss()(x:log_softmax(2), t)
    l:backward()
    assert.are.equal(0, x.grad:abs():max():item())
  end)
end)
