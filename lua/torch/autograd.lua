-- torch.autograd: gradcheck, which compares the gradients autograd computes with
-- central differences, and backward over several outputs at once; Function (custom ops
-- in Lua) and grad live in lua/torch/function.lua.
-- Set on first use: torch/init.lua may load this file while torch itself is loading.
local torch, utils
local function load()
  torch = torch or require 'torch'
  utils = utils or require 'nn.utils'
end

local autograd = {}

local function flat(t)
  return t:detach():reshape(-1):to('float64'):tolist()
end

-- {i, j, ...} (1-based) of element k of a tensor with sizes s, row-major.
local function multi_index(s, k)
  local idx, rem = {}, k - 1
  for d = #s, 1, -1 do
    idx[d] = rem % s[d] + 1
    rem = rem // s[d]
  end
  return idx
end

local function index_str(t, k)
  return '[' .. table.concat(multi_index(t:size(), k), ', ') .. ']'
end

-- Element k of t (row-major) set to x, through views that share t's storage.
local function set_element(t, k, x)
  if t:dim() == 0 then t:fill_(x); return end
  local idx = multi_index(t:size(), k)
  local v = t
  for d = 1, #idx - 1 do v = v:select(1, idx[d]) end
  v[idx[#idx]] = x
end

local function get_element(t, k)
  if t:dim() == 0 then return t:item() end
  local idx = multi_index(t:size(), k)
  local v = t
  for d = 1, #idx - 1 do v = v:select(1, idx[d]) end
  return v[idx[#idx]]
end

local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

-- The outputs of fn as a list of floating point tensors.
local function outputs_of(fn, args)
  local out = fn(table.unpack(args, 1, args.n))
  local list = torch.is_tensor(out) and { out } or out
  if type(list) ~= 'table' then
    utils.error(('gradcheck: fn must return a tensor or a table of tensors, got %s'):format(type(out)))
  end
  local outs = {}
  for j, o in ipairs(list) do
    if not torch.is_tensor(o) then
      utils.error(('gradcheck: output %d of fn is a %s, not a tensor'):format(j, type(o)))
    end
    if is_float(o) then outs[#outs + 1] = o end
  end
  return outs
end

-- The outputs' values (tables of numbers), computed without recording.
local function evaluate(fn, args)
  local list = {}
  torch.no_grad(function()
    for _, out in ipairs(outputs_of(fn, args)) do list[#list + 1] = flat(out) end
  end)
  return list
end

-- gradcheck(fn, inputs [, {eps=1e-6, atol=1e-5, rtol=1e-3}]): inputs is a tensor or a
-- table of arguments for fn; the floating point tensors among them that require grad are
-- checked (float32 ones are checked through float64 copies).  For every input element
-- and output element, the analytical derivative a (one backward per output element) and
-- the numerical one n = (f(x + eps) - f(x - eps)) / (2 eps) must satisfy
-- |a - n| <= atol + rtol * |n|.  Returns true, or raises naming the first mismatch.
function autograd.gradcheck(fn, inputs, opts)
  load()
  local o = utils.options('gradcheck', opts, { eps = 1e-6, atol = 1e-5, rtol = 1e-3 })
  if type(fn) ~= 'function' and not (getmetatable(fn) or {}).__call then
    utils.error(('gradcheck: fn must be callable, got %s'):format(type(fn)))
  end
  local args
  if torch.is_tensor(inputs) then
    args = { inputs, n = 1 }
  elseif type(inputs) == 'table' then
    args = { n = inputs.n or #inputs }
    for i = 1, args.n do args[i] = inputs[i] end
  else
    utils.error(('gradcheck: inputs must be a tensor or a table, got %s'):format(type(inputs)))
  end
  local checked = {}
  for i = 1, args.n do
    local t = args[i]
    if torch.is_tensor(t) and t.requires_grad then
      if not is_float(t) then utils.error(('gradcheck: input %d requires grad but is %s'):format(i, t.dtype)) end
      if t.dtype ~= 'float64' then
        t = t:detach():to('float64'):requires_grad_(true)
        args[i] = t
      end
      checked[#checked + 1] = i
    end
  end
  if #checked == 0 then utils.error('gradcheck: no input is a tensor that requires grad') end

  -- analytical: jac[i][k][r] = d output-element r / d element k of input i
  local saved = {}
  for _, i in ipairs(checked) do
    local g = args[i].grad
    saved[i] = g and g:clone()
  end
  local outs = outputs_of(fn, args)
  local nout = 0
  for _, out in ipairs(outs) do nout = nout + out:numel() end
  local jac = {}
  for _, i in ipairs(checked) do
    jac[i] = {}
    for k = 1, args[i]:numel() do jac[i][k] = {} end
  end
  local r = 0
  for _, out in ipairs(outs) do
    for e = 1, out:numel() do
      r = r + 1
      if out.requires_grad then
        for _, i in ipairs(checked) do
          local g = args[i].grad
          if g ~= nil then g:zero_() end
        end
        local seed = torch.zeros(out:size(), { dtype = out.dtype, device = out.device })
        set_element(seed, e, 1)
        out:backward(seed, { retain_graph = true })
      end
      for _, i in ipairs(checked) do
        local g = out.requires_grad and args[i].grad or nil
        local col = jac[i]
        if g == nil then
          for k = 1, #col do col[k][r] = 0 end
        else
          local v = flat(g)
          for k = 1, #col do col[k][r] = v[k] end
        end
      end
    end
  end
  for _, i in ipairs(checked) do
    local g = args[i].grad
    if saved[i] then g:copy_(saved[i])
    elseif g ~= nil then pcall(function() args[i].grad = nil end) end
  end

  -- numerical, and the comparison
  for _, i in ipairs(checked) do
    local x = args[i]:detach()
    for k = 1, x:numel() do
      local v = get_element(x, k)
      set_element(x, k, v + o.eps)
      local plus = evaluate(fn, args)
      set_element(x, k, v - o.eps)
      local minus = evaluate(fn, args)
      set_element(x, k, v)
      local rr = 0
      for j, p in ipairs(plus) do
        for e = 1, #p do
          rr = rr + 1
          local n = (p[e] - minus[j][e]) / (2 * o.eps)
          local a = jac[i][k][rr]
          if not (math.abs(a - n) <= o.atol + o.rtol * math.abs(n)) then
            utils.error(('gradcheck: Jacobian mismatch for input %d, element %d %s (output %d, element %d): analytical %.10g vs numerical %.10g')
              :format(i, k, index_str(x, k), j, e, a, n))
          end
        end
      end
      if rr ~= nout then
        utils.error(('gradcheck: fn returned %d output elements, then %d'):format(nout, rr))
      end
    end
  end
  return true
end

-- backward(tensors [, grad_tensors [, {retain_graph=}]]): one backward pass from several
-- outputs, as the sum of each output times its gradient.
function autograd.backward(tensors, grads, opts)
  load()
  if torch.is_tensor(tensors) then
    if grads ~= nil and not torch.is_tensor(grads) then
      utils.error(('torch.autograd.backward: argument 2 (grad_tensors) must be a tensor, got %s')
        :format(type(grads)))
    end
    tensors, grads = { tensors }, { grads }
  end
  if type(tensors) ~= 'table' then
    utils.error(('torch.autograd.backward: argument 1 (tensors) must be a tensor or a table of tensors, got %s')
      :format(type(tensors) == 'string' and ("'" .. tensors .. "'") or type(tensors) .. ' ' .. tostring(tensors)))
  end
  if grads ~= nil and type(grads) ~= 'table' then
    utils.error(('torch.autograd.backward: argument 2 (grad_tensors) must be a tensor or a table of tensors, got %s')
      :format(type(grads)))
  end
  grads = grads or {}
  for i, t in ipairs(tensors) do
    if not torch.is_tensor(t) then
      utils.error(('torch.autograd.backward: tensors[%d] must be a tensor, got %s'):format(i, type(t)))
    end
  end
  if #tensors == 0 then utils.error('torch.autograd.backward: argument 1 (tensors) is an empty table') end
  if #tensors == 1 then return tensors[1]:backward(grads[1], opts) end
  local root
  for i, t in ipairs(tensors) do
    if grads[i] == nil and t:numel() ~= 1 then
      utils.error(('backward: grad can be implicitly created only for scalar outputs (output %d has shape %s)')
        :format(i, utils.shape(t)))
    end
    local term = grads[i] and (t * grads[i]:detach()):sum() or t:sum()
    root = root and root + term or term
  end
  return root:backward(nil, opts)
end

-- set_detect_anomaly(on): backward checks every gradient each node returns and fails
-- naming the node (as 'MulBackward0') that returned a NaN; detect_anomaly(fn, ...) runs fn
-- with it on.  The mode is process-wide, and each check copies the gradient to the host.
function autograd.set_detect_anomaly(on)
  load()
  if type(on) ~= 'boolean' then
    utils.error(('torch.autograd.set_detect_anomaly: expected true or false, got %s'):format(type(on)))
  end
  torch._C._set_detect_anomaly(on)
end
function autograd.is_anomaly_enabled() load(); return torch._C.is_anomaly_enabled() end
function autograd.detect_anomaly(fn, ...)
  load()
  local was = torch._C.is_anomaly_enabled()
  torch._C._set_detect_anomaly(true)
  return require('torch.scope').run(function() torch._C._set_detect_anomaly(was) end, fn, ...)
end

-- Function, grad and functional, loaded on first use (torch may still be loading when
-- this file is)
function autograd.grad(...) return require('torch.function').grad(...) end
setmetatable(autograd, {
  __index = function(t, k)
    local v
    if k == 'Function' then v = require('torch.function').Function
    elseif k == 'functional' then v = require 'torch.autograd_functional'
    else return nil end
    rawset(t, k, v)
    return v
  end,
})

return autograd
