-- torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp and vhp of a Lua function,
-- as PyTorch 1.13's (inputs a tensor or a table of tensors; results in the same form).
--
--   local J = torch.autograd.functional.jacobian(function(x) return x:exp() end, x)
--   -- J:size() is x:size() .. x:size() (output sizes, then input sizes)
--
-- The jacobian takes one backward pass per output element; jvp is the jacobian times v
-- (PyTorch computes it with a double backward: same values); hessian, hvp and vhp
-- differentiate the gradient, which needs create_graph backward passes.
local torch = require 'torch'

local F = {}

local function fail(fmt, ...) error(fmt:format(...), 3) end

-- inputs as a list, and whether they came as a table
local function as_list(who, what, v)
  if torch.is_tensor(v) then return { v }, false end
  if type(v) ~= 'table' or #v == 0 then
    fail('%s: %s must be a tensor or a non-empty table of tensors, got %s', who, what, type(v))
  end
  for i, t in ipairs(v) do
    if not torch.is_tensor(t) then fail('%s: %s[%d] must be a tensor, got %s', who, what, i, type(t)) end
  end
  return v, true
end

-- fresh leaves that require grad, holding the inputs' values
local function leaves(list)
  local out = {}
  for i, t in ipairs(list) do
    if t.dtype ~= 'float32' and t.dtype ~= 'float64' then
      error(('torch.autograd.functional: input %d is %s; inputs must be floating point'):format(i, t.dtype), 4)
    end
    out[i] = t:detach():clone():requires_grad_(true)
  end
  return out
end

local function call(who, func, xs)
  local out = torch.enable_grad(function() return func(table.unpack(xs)) end)
  local list, tuple = as_list(who, 'the output of func', out)
  return list, tuple
end

-- d(sum of out * v) / d each x, zeros where out does not depend on x
local function vjp_list(out, v, xs, create_graph)
  local g = torch.autograd.grad(out, xs, { grad_outputs = v, retain_graph = true, allow_unused = true,
    create_graph = create_graph })
  local r = {}
  for i, x in ipairs(xs) do r[i] = g[i] or torch.zeros_like(x) end
  return r
end

local function shape_of(t) return t:size():totable() end
local function concat(a, b)
  local r = { table.unpack(a) }
  for _, n in ipairs(b) do r[#r + 1] = n end
  return r
end

-- jacobian(func, inputs [, {create_graph=false, strict=false}]): d output / d input, each
-- of shape output sizes .. input sizes; a table of tables when both are tables
function F.jacobian(func, inputs, opts)
  local who = 'torch.autograd.functional.jacobian'
  local ins, in_tuple = as_list(who, 'inputs', inputs)
  local xs = leaves(ins)
  local outs, out_tuple = call(who, func, xs)
  local result = {}
  for j, out in ipairs(outs) do
    local rows = {}
    for i = 1, #xs do rows[i] = {} end
    local n = out:numel()
    local flat = out:reshape(-1)
    for e = 1, n do
      local grads
      if out.requires_grad then
        local seed = torch.zeros({ n }, { dtype = out.dtype, device = out.device })
        seed[e] = 1
        grads = vjp_list(flat, seed, xs)
      end
      for i, x in ipairs(xs) do rows[i][e] = grads and grads[i] or torch.zeros_like(x) end
    end
    result[j] = {}
    for i, x in ipairs(xs) do
      local J = n > 0 and torch.stack(rows[i]) or torch.zeros({ 0, x:numel() }, { dtype = x.dtype, device = x.device })
      result[j][i] = J:reshape(concat(shape_of(out), shape_of(x)))
    end
  end
  if not out_tuple then
    return in_tuple and result[1] or result[1][1]
  end
  if not in_tuple then
    for j = 1, #result do result[j] = result[j][1] end
  end
  return result
end

local function check_v(who, v, like)
  local vs = as_list(who, 'v', v)
  if #vs ~= #like then fail('%s: v has %d tensors, expected %d', who, #vs, #like) end
  for i, t in ipairs(vs) do
    if tostring(t:size()) ~= tostring(like[i]:size()) then
      fail('%s: v[%d] has shape %s, expected %s', who, i, tostring(t:size()), tostring(like[i]:size()))
    end
  end
  return vs
end

local function form(list, tuple) return tuple and list or list[1] end
local function detached(list)
  local r = {}
  for i, t in ipairs(list) do r[i] = t:detach() end
  return r
end

-- vjp(func, inputs [, v]): func's outputs and v^T J (v may be omitted for a one-element output)
function F.vjp(func, inputs, v)
  local who = 'torch.autograd.functional.vjp'
  local ins, in_tuple = as_list(who, 'inputs', inputs)
  local xs = leaves(ins)
  local outs, out_tuple = call(who, func, xs)
  local vs
  if v == nil then
    for j, o in ipairs(outs) do
      if o:numel() ~= 1 then fail('%s: v can be omitted only when the output has one element (output %d has shape %s)', who, j, tostring(o:size())) end
    end
    vs = {}
    for j, o in ipairs(outs) do vs[j] = torch.ones_like(o) end
  else
    vs = check_v(who, v, outs)
  end
  local live, lv = {}, {}
  for j, o in ipairs(outs) do
    if o.requires_grad then live[#live + 1], lv[#lv + 1] = o, vs[j] end
  end
  local g
  if #live == 0 then
    g = {}
    for i, x in ipairs(xs) do g[i] = torch.zeros_like(x) end
  else
    g = vjp_list(live, lv, xs)
  end
  return form(detached(outs), out_tuple), form(g, in_tuple)
end

-- jvp(func, inputs [, v]): func's outputs and J v (v may be omitted for a one-element input)
function F.jvp(func, inputs, v)
  local who = 'torch.autograd.functional.jvp'
  local ins, in_tuple = as_list(who, 'inputs', inputs)
  local vs
  if v == nil then
    for i, x in ipairs(ins) do
      if x:numel() ~= 1 then fail('%s: v can be omitted only when the input has one element (input %d has shape %s)', who, i, tostring(x:size())) end
    end
    vs = {}
    for i, x in ipairs(ins) do vs[i] = torch.ones_like(x) end
  else
    vs = check_v(who, v, ins)
  end
  local xs = leaves(ins)
  local outs, out_tuple = call(who, func, xs)
  local J = F.jacobian(func, in_tuple and ins or ins[1])
  if not out_tuple then J = { J } end
  local r = {}
  for j, o in ipairs(outs) do
    local row = in_tuple and J[j] or { J[j] }
    local acc = torch.zeros({ o:numel() }, { dtype = o.dtype, device = o.device })
    for i, x in ipairs(ins) do
      acc = acc + row[i]:reshape(o:numel(), x:numel()):matmul(vs[i]:reshape(-1):to(o.dtype))
    end
    r[j] = acc:reshape(shape_of(o))
  end
  return form(detached(outs), out_tuple), form(r, out_tuple)
end

-- the scalar output of func at xs, checked
local function scalar_output(who, func, xs)
  local outs, tuple = call(who, func, xs)
  if tuple and #outs ~= 1 or outs[1]:numel() ~= 1 then
    fail('%s: func must return a single-element tensor, got %s', who, tuple and (#outs .. ' tensors') or tostring(outs[1]:size()))
  end
  return outs[1]
end

-- the gradient of func at xs, itself differentiable (a create_graph backward)
local function gradient(who, func, xs)
  local y = scalar_output(who, func, xs)
  if not y.requires_grad then
    local z = {}
    for i, x in ipairs(xs) do z[i] = torch.zeros_like(x) end
    return y, z
  end
  return y, torch.enable_grad(function() return vjp_list({ y }, nil, xs, true) end)
end

-- hessian(func, inputs): d^2 func / d input_i d input_k for a func with a one-element output;
-- shape input_i sizes .. input_k sizes (a table of tables for a table of inputs)
function F.hessian(func, inputs)
  local who = 'torch.autograd.functional.hessian'
  local ins, in_tuple = as_list(who, 'inputs', inputs)
  local xs = leaves(ins)
  local _, g = gradient(who, func, xs)
  local result = {}
  for i, gi in ipairs(g) do
    result[i] = {}
    local rows = {}
    for k = 1, #xs do rows[k] = {} end
    local flat, n = gi:reshape(-1), gi:numel()
    for e = 1, n do
      local grads
      if flat.requires_grad then
        local seed = torch.zeros({ n }, { dtype = gi.dtype, device = gi.device })
        seed[e] = 1
        grads = vjp_list(flat, seed, xs)
      end
      for k, x in ipairs(xs) do rows[k][e] = grads and grads[k] or torch.zeros_like(x) end
    end
    for k, x in ipairs(xs) do
      result[i][k] = torch.stack(rows[k]):reshape(concat(shape_of(xs[i]), shape_of(x))):detach()
    end
  end
  return in_tuple and result or result[1][1]
end

-- vhp(func, inputs, v) and hvp(func, inputs, v): func's value and v^T H, H v (the same for
-- the symmetric Hessians of twice continuously differentiable functions)
local function hessian_product(who, func, inputs, v)
  local ins, in_tuple = as_list(who, 'inputs', inputs)
  local vs = check_v(who, v, ins)
  local xs = leaves(ins)
  local y, g = gradient(who, func, xs)
  local live, lv = {}, {}
  for i, gi in ipairs(g) do
    if gi.requires_grad then live[#live + 1], lv[#lv + 1] = gi, vs[i]:to(gi.dtype) end
  end
  local r
  if #live == 0 then
    r = {}
    for i, x in ipairs(xs) do r[i] = torch.zeros_like(x) end
  else
    r = detached(vjp_list(live, lv, xs))
  end
  return y:detach(), form(r, in_tuple)
end

function F.vhp(func, inputs, v) return hessian_product('torch.autograd.functional.vhp', func, inputs, v) end
function F.hvp(func, inputs, v) return hessian_product('torch.autograd.functional.hvp', func, inputs, v) end

return F
