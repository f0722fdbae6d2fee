-- optim.Optimizer: the base of every optimizer.  It holds parameter groups (each a table
-- with `params` and that group's settings: opt.param_groups[1].lr = 0.01 changes the
-- learning rate) and per-parameter state (opt.state[p]), and runs a subclass's
-- `update(p, grad, group, state)` for every parameter that has a gradient.
local torch = require 'torch'
local utils = require 'nn.utils'

local Optimizer = torch.class('optim.Optimizer')

-- A default that each group must give (SGD's lr).
Optimizer.required = utils.required

-- params: an array of tensors, an array of groups {params=..., lr=...}, or an iterator
-- (such as model:named_parameters()).
function Optimizer:__init(params, defaults, name)
  self.name = name or torch.typename(self) or 'optim.Optimizer'
  self.defaults = defaults
  self.state = {}
  self.param_groups = {}
  if type(params) == 'function' then
    local list = {}
    for a, b in params do list[#list + 1] = torch.is_tensor(a) and a or b end
    params = list
  elseif torch.is_tensor(params) then
    params = { params }
  end
  if type(params) == 'table' and torch.isinstance(params, 'nn.Module') then
    utils.error(('%s: expected the parameters, got the module itself (%s); pass model:parameters()')
      :format(self.name, torch.typename(params) or 'nn.Module'))
  end
  if type(params) ~= 'table' then
    utils.error(('%s: params must be a table of tensors or of parameter groups, got %s')
      :format(self.name, type(params)))
  end
  if #params == 0 then utils.error(('%s: got an empty parameter list'):format(self.name)) end
  if torch.is_tensor(params[1]) then params = { { params = params } } end
  for _, group in ipairs(params) do self:add_param_group(group) end
end

function Optimizer:add_param_group(group)
  local who = self.name
  if type(group) ~= 'table' or group.params == nil then
    utils.error(('%s: a parameter group must be a table with a params field'):format(who))
  end
  local ps = torch.is_tensor(group.params) and { group.params } or group.params
  local g = { params = {} }
  local seen = {}
  for _, other in ipairs(self.param_groups) do
    for _, p in ipairs(other.params) do seen[p] = true end
  end
  for i, p in ipairs(ps) do
    if not torch.is_tensor(p) then
      utils.error(('%s: parameter %d is a %s, not a tensor'):format(who, i, type(p)))
    end
    if not p.is_leaf then utils.error(('%s: can\'t optimize a non-leaf tensor (parameter %d)'):format(who, i)) end
    if seen[p] then utils.error(('%s: some parameters appear in more than one parameter group'):format(who)) end
    seen[p] = true
    g.params[i] = p
  end
  local given = {}
  for k, v in pairs(group) do
    if k ~= 'params' then given[k] = v end
  end
  for k, v in pairs(utils.options(who, given, self.defaults)) do
    g[k] = given[k] == nil and type(v) == 'table' and { table.unpack(v) } or v
  end
  if self.check then self:check(g) end
  self.param_groups[#self.param_groups + 1] = g
end

-- Runs closure (if given, it recomputes and returns the loss), then updates every
-- parameter that has a gradient.  Returns the closure's loss.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then loss = closure() end
  torch.no_grad(function()
    for _, group in ipairs(self.param_groups) do
      for _, p in ipairs(group.params) do
        local grad = p.grad
        if grad ~= nil then
          local state = self.state[p]
          if state == nil then state = {}; self.state[p] = state end
          self:update(p, grad, group, state)
        end
      end
    end
  end)
  return loss
end

-- PyTorch 1.13's default zeroes gradients in place; {set_to_none=true} drops them.
function Optimizer:zero_grad(opts)
  local params = {}
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  utils.zero_grad(self.name .. ':zero_grad', params, opts)
end

-- {state = {[i] = {...}}, param_groups = {{lr=..., params={i, ...}}, ...}}: parameters are
-- numbered 1, 2, ... across groups in order, as PyTorch numbers them from 0.
function Optimizer:state_dict()
  local state, groups, index = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g = { params = {} }
    for k, v in pairs(group) do
      if k ~= 'params' then g[k] = type(v) == 'table' and { table.unpack(v) } or v end
    end
    for _, p in ipairs(group.params) do
      index = index + 1
      g.params[#g.params + 1] = index
      if self.state[p] ~= nil then state[index] = self.state[p] end
    end
    groups[gi] = g
  end
  return { state = state, param_groups = groups }
end

-- Restores settings and state saved by state_dict(); tensors are copied onto each
-- parameter's device (and floating point ones to its dtype).
function Optimizer:load_state_dict(sd)
  local who = self.name .. ':load_state_dict'
  if type(sd) ~= 'table' or type(sd.state) ~= 'table' or type(sd.param_groups) ~= 'table' then
    utils.error(('%s: expected a table {state=, param_groups=}'):format(who))
  end
  if #sd.param_groups ~= #self.param_groups then
    utils.error(('%s: loaded state dict has %d parameter groups, the optimizer has %d')
      :format(who, #sd.param_groups, #self.param_groups))
  end
  for gi, g in ipairs(sd.param_groups) do
    local n, want = type(g.params) == 'table' and #g.params or -1, #self.param_groups[gi].params
    if n ~= want then
      utils.error(('%s: parameter group %d has %d parameters in the loaded state dict, %d in the optimizer')
        :format(who, gi, n, want))
    end
  end
  local state = {}
  for gi, g in ipairs(sd.param_groups) do
    local group = self.param_groups[gi]
    for k, v in pairs(g) do
      if k ~= 'params' then group[k] = type(v) == 'table' and { table.unpack(v) } or v end
    end
    for i, index in ipairs(g.params) do
      local p, saved = group.params[i], sd.state[index]
      if saved ~= nil then
        local s = {}
        for k, v in pairs(saved) do
          if torch.is_tensor(v) then
            local floating = torch.FLOAT_DTYPES[v.dtype] == true
            v = v:to{ device = p.device, dtype = floating and p.dtype or nil }:clone()
          end
          s[k] = v
        end
        state[p] = s
      end
    end
  end
  self.state = state
end

-- A check of one setting, shared by the optimizers: v must be a number in [lo, hi] (no
-- upper bound when hi is nil), else PyTorch's "invalid <what>" error.
function Optimizer:check_number(what, v, lo, hi)
  if type(v) ~= 'number' or v ~= v or v < lo or (hi ~= nil and v > hi) then
    utils.error(('%s: invalid %s: %s'):format(self.name, what, tostring(v)))
  end
end

function Optimizer:update()
  utils.error(('%s: update is not implemented'):format(self.name))
end

function Optimizer:__tostring()
  local lines = { self.name:match('[^.]+$') .. ' (' }
  for gi, group in ipairs(self.param_groups) do
    lines[#lines + 1] = ('Parameter Group %d'):format(gi - 1)
    local keys = {}
    for k in pairs(group) do if k ~= 'params' then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = group[k]
      if type(v) == 'table' then v = '(' .. table.concat(v, ', ') .. ')' end
      lines[#lines + 1] = ('    %s: %s'):format(k, tostring(v))
    end
  end
  return table.concat(lines, '\n') .. '\n)'
end

return Optimizer
