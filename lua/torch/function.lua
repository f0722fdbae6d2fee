-- torch.autograd.Function (custom differentiable operations written in Lua) and
-- torch.autograd.grad.
--
--   local Exp = torch.autograd.Function:extend('Exp')
--   function Exp.forward(ctx, x)
--     local y = x:exp()
--     ctx:save_for_backward(y)
--     return y
--   end
--   function Exp.backward(ctx, grad)
--     local y = table.unpack(ctx.saved_tensors)
--     return grad * y
--   end
--   local y = Exp.apply(x)          -- y.grad_fn is ExpBackward
--
-- forward runs without recording history; its tensor outputs then become outputs of a
-- graph node whose backward calls backward(ctx, grad_1, ..., grad_m), which returns one
-- gradient per argument of forward (nil for arguments that are not tensors or need none).
-- With several outputs, each output has a node of its own, and backward is called once per
-- output that receives a gradient (with zeros for the others): the sums are PyTorch's,
-- since a backward is linear in its gradients, but a backward with side effects sees more
-- calls than in PyTorch.  Save tensors with ctx:save_for_backward, not as fields of ctx:
-- they are kept without their history, so an output saved for backward does not keep its
-- own graph alive (a tensor output stored in a ctx field would).
local torch = require 'torch'
local C = require 'torch._C'
local options = require 'torch.options'

local M = {}
local fail = function(fmt, ...) options.error(fmt:format(...)) end

-- ---------------------------------------------------------------- ctx

local Ctx = {}
Ctx.__index = Ctx

function Ctx:save_for_backward(...)
  local saved, versions = {}, {}
  local args = table.pack(...)
  for i = 1, args.n do
    local t = args[i]
    if t ~= nil and not torch.is_tensor(t) then
      fail('save_for_backward: argument %d is a %s; only tensors (or nil) can be saved', i, type(t))
    end
    if t ~= nil then
      saved[i] = t:detach()
      versions[i] = t:_version()
    end
  end
  saved.n = args.n
  self.saved_tensors, self._versions = saved, versions
end

function Ctx:mark_non_differentiable(...)
  self._non_differentiable = self._non_differentiable or {}
  for _, t in ipairs { ... } do self._non_differentiable[t] = true end
end

-- a saved tensor changed in place since it was saved is an error, as in PyTorch
local function check_saved(name, ctx)
  local saved = ctx.saved_tensors
  for i = 1, saved.n or #saved do
    local t = saved[i]
    if t ~= nil and t:_version() ~= ctx._versions[i] then
      fail('%s: one of the variables needed for gradient computation has been modified by an inplace operation: saved tensor %d is at version %d; expected version %d instead',
        name, i, t:_version(), ctx._versions[i])
    end
  end
end

-- ---------------------------------------------------------------- Function

local Function = {}
Function.__index = Function
Function.__name = 'Function'
M.Function = Function

-- Function:extend([name]): a new custom function (its own table): define its forward and
-- backward, then call its apply.
function Function:extend(name)
  if name ~= nil and type(name) ~= 'string' then fail('Function:extend: name must be a string, got %s', type(name)) end
  local cls = setmetatable({ __name = name or 'CustomFunction' }, { __index = self })
  cls.__index = cls
  cls.apply = function(...) return M.apply(cls, ...) end
  return cls
end

function Function.forward()
  fail('torch.autograd.Function: forward is not implemented (define F.forward(ctx, ...))')
end

function Function.backward()
  fail('torch.autograd.Function: backward is not implemented (define F.backward(ctx, grad, ...))')
end

local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

function M.apply(cls, ...)
  local name = cls.__name or 'CustomFunction'
  local args = table.pack(...)
  local ctx = setmetatable({ needs_input_grad = {}, saved_tensors = { n = 0 }, _versions = {} }, Ctx)
  local recording = torch.is_grad_enabled()
  local inputs, any = {}, false
  for i = 1, args.n do
    local a = args[i]
    local t = torch.is_tensor(a)
    ctx.needs_input_grad[i] = t and recording and a.requires_grad or false
    any = any or ctx.needs_input_grad[i]
    inputs[i] = t and a or false
  end
  local outs = table.pack(torch.no_grad(function() return cls.forward(ctx, table.unpack(args, 1, args.n)) end))
  if not any then return table.unpack(outs, 1, outs.n) end

  -- the tensor outputs' shapes, for the zeros of the outputs that get no gradient
  local shapes = {}
  for j = 1, outs.n do
    local o = outs[j]
    if torch.is_tensor(o) then shapes[j] = { size = o:size(), dtype = o.dtype, device = o.device } end
  end
  local nd = ctx._non_differentiable or {}
  local results = {}
  for j = 1, outs.n do
    local o = outs[j]
    results[j] = o
    if torch.is_tensor(o) and is_float(o) and not nd[o] then
      local out = o:detach()   -- a new tensor on o's storage: never the caller's input itself
      local function backward(g)
        check_saved(name, ctx)
        local grads = {}
        for k = 1, outs.n do
          local s = shapes[k]
          if k == j then grads[k] = g
          elseif s then grads[k] = torch.zeros(s.size, { dtype = s.dtype, device = s.device }) end
        end
        local r = table.pack(cls.backward(ctx, table.unpack(grads, 1, outs.n)))
        local extra = r.n
        while extra > args.n and r[extra] == nil do extra = extra - 1 end
        if extra > args.n then
          fail('%s: function backward returned an incorrect number of gradients (expected %d, got %d)', name, args.n, r.n)
        end
        local list = {}
        for i = 1, args.n do
          local gi = r[i]
          if gi ~= nil and not torch.is_tensor(gi) then
            fail('%s: backward returned a %s as the gradient of argument %d (expected a tensor or nil)', name, type(gi), i)
          end
          if gi ~= nil and not inputs[i] then
            fail('%s: backward returned a gradient for argument %d, which is a %s, not a tensor', name, i, type(args[i]))
          end
          list[i] = gi
        end
        return list
      end
      C.custom_attach(out, name .. 'Backward', inputs, args.n, backward)
      results[j] = out
    end
  end
  return table.unpack(results, 1, outs.n)
end

-- ---------------------------------------------------------------- grad

local function tensor_list(who, what, v)
  if torch.is_tensor(v) then return { v } end
  if type(v) ~= 'table' then fail('%s: %s must be a tensor or a table of tensors, got %s', who, what, type(v)) end
  for i, t in ipairs(v) do
    if not torch.is_tensor(t) then fail('%s: %s[%d] must be a tensor, got %s', who, what, i, type(t)) end
  end
  if #v == 0 then fail('%s: %s is an empty table', who, what) end
  return v
end

-- grad(outputs, inputs [, {grad_outputs=, retain_graph=false, create_graph=false,
-- allow_unused=false}]): the gradients of the outputs (each times its grad_output) with
-- respect to each input, as a list, without touching any .grad.  An input the outputs
-- do not depend on is an error, or nil with allow_unused.  With create_graph the gradients
-- are recorded, so they can be differentiated again (higher derivatives).
function M.grad(outputs, inputs, opts)
  local who = 'torch.autograd.grad'
  local o = options.check(who, opts, {
    grad_outputs = options.none, retain_graph = options.none, create_graph = false, allow_unused = false,
  })
  local outs = tensor_list(who, 'outputs', outputs)
  local ins = tensor_list(who, 'inputs', inputs)
  local gos = o.grad_outputs
  if gos ~= nil then gos = torch.is_tensor(gos) and { gos } or gos end
  if gos ~= nil and type(gos) ~= 'table' then fail('%s: grad_outputs must be a tensor or a table of tensors', who) end
  gos = gos or {}
  for i, t in ipairs(outs) do
    if not t.requires_grad then
      fail('%s: element %d of the outputs does not require grad and does not have a grad_fn', who, i)
    end
    if gos[i] == nil and t:numel() ~= 1 then
      fail('%s: grad can be implicitly created only for scalar outputs (output %d has shape %s); give grad_outputs',
        who, i, tostring(t:size()))
    end
  end
  for i, t in ipairs(ins) do
    if not t.requires_grad then fail('%s: inputs[%d] does not require grad', who, i) end
  end
  local root, g
  if #outs == 1 then
    root, g = outs[1], gos[1]
  else
    torch.enable_grad(function()
      for i, t in ipairs(outs) do
        local term = gos[i] ~= nil and (t * gos[i]:detach()):sum() or t:sum()
        root = root and root + term or term
      end
    end)
  end
  local got = C.autograd_grad(root, g, ins, o.retain_graph and true or false, o.create_graph and true or false)
  local result = { n = #ins }
  for i = 1, #ins do
    if got[i] == false then
      if not o.allow_unused then
        fail('%s: One of the differentiated Tensors (inputs[%d]) appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.',
          who, i)
      end
    else
      result[i] = got[i]
    end
  end
  return result
end

return M
