-- optim.Rprop(params, {lr=1e-2, etas={0.5, 1.2}, step_sizes={1e-6, 50}, maximize=false}):
-- PyTorch 1.13's resilient backpropagation.  Per element, with s = sign(g * g_prev):
--   step = clamp(step * (etaplus if s > 0, etaminus if s < 0, 1 if s == 0), min, max)
--   g = 0 where s < 0 (and that 0 becomes g_prev);  p = p - sign(g) * step
local torch = require 'torch'
local utils = require 'nn.utils'

local Rprop, parent = torch.class('optim.Rprop', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.Rprop(params, 0.1)), or by name in a last table
function Rprop:__init(params, ...)
  local opts = utils.positional('optim.Rprop', { 'lr', 'etas', 'step_sizes' }, ...)
  local defaults = utils.options('optim.Rprop', opts, {
    lr = 1e-2, etas = { 0.5, 1.2 }, step_sizes = { 1e-6, 50 }, maximize = false,
  })
  parent.__init(self, params, defaults, 'optim.Rprop')
end

function Rprop:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  if type(g.etas) ~= 'table' or type(g.etas[1]) ~= 'number' or type(g.etas[2]) ~= 'number'
      or not (0 < g.etas[1] and g.etas[1] < 1 and 1 < g.etas[2]) then
    utils.error(('%s: invalid eta values: %s, %s (expected 0 < etaminus < 1 < etaplus)')
      :format(self.name, tostring(type(g.etas) == 'table' and g.etas[1]), tostring(type(g.etas) == 'table' and g.etas[2])))
  end
  if type(g.step_sizes) ~= 'table' or type(g.step_sizes[1]) ~= 'number' or type(g.step_sizes[2]) ~= 'number' then
    utils.error(('%s: invalid step_sizes (expected {min, max})'):format(self.name))
  end
end

function Rprop:update(p, grad, group, state)
  if state.step == nil then
    state.step = 0
    state.prev = torch.zeros_like(p)
    state.step_size = torch.full_like(grad, group.lr)
  end
  state.step = state.step + 1
  if group.maximize then grad = -grad end
  local etaminus, etaplus = group.etas[1], group.etas[2]
  local s = (grad * state.prev):sign()
  local function full(v) return torch.full({}, v, { dtype = p.dtype, device = p.device }) end
  local factor = torch.where(s:gt(0), full(etaplus), torch.where(s:lt(0), full(etaminus), full(1)))
  state.step_size:copy_((state.step_size * factor):clamp(group.step_sizes[1], group.step_sizes[2]))
  grad = torch.where(s:lt(0), torch.zeros_like(grad), grad)
  p:add_(grad:sign() * state.step_size, -1)
  state.prev:copy_(grad)
end

return Rprop
