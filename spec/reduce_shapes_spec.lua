-- Reductions and softmax at the shapes that pick each way a backend lays out the work
-- (kernels/reduce.cu, kernels/softmax_loss.cu on CUDA): one output of a million elements,
-- a few outputs of long columns, many outputs of short columns, rows of 1 to 5000
-- elements, transposed, narrowed and expanded inputs, float64, float16, bfloat16, int64.
-- The reference is computed here in Lua (double precision) from the input's own values.
-- The inputs are multiples of 1/8 below 13 in magnitude, so every sum is exact in double
-- whatever the order of the additions: sums, means, maxima and indices must match
-- exactly (after rounding to the output dtype), and ties must give the first index.
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local flat = check.flat

-- n values k/8, k in [-100, 100], from a fixed linear congruential sequence
local function values(n, seed)
  local s, out = seed or 1, {}
  for i = 1, n do
    s = (s * 1103515245 + 12345) % 2147483648
    out[i] = ((s >> 8) % 201 - 100) / 8
  end
  return out
end

local function tensor(n, sizes, opts)
  return torch.tensor(values(n, opts and opts.seed), { dtype = opts and opts.dtype or 'float32' }):reshape(sizes)
end

-- The reference reduction of x (any layout) along dim (1-based): the outputs in row-major
-- order as {value, index} pairs; max and min: NaN wins (the first one), then the first of
-- equal extremes.
local function reference(x, dim, op)
  local sizes = x:size():totable()
  local v = flat(x:tolist())
  local inner = 1
  for d = dim + 1, #sizes do inner = inner * sizes[d] end
  local len, outer = sizes[dim], #v // (sizes[dim] * inner)
  local out = {}
  for o = 0, outer - 1 do
    for i = 0, inner - 1 do
      local acc, best = 0, nil
      for r = 0, len - 1 do
        local e = v[o * len * inner + r * inner + i + 1]
        if op == 'sum' or op == 'mean' then acc = acc + e
        elseif best == nil then acc, best = e, r
        elseif acc == acc and (e ~= e or (op == 'max' and e > acc) or (op == 'min' and e < acc)) then acc, best = e, r end
      end
      if op == 'mean' then acc = acc / len end
      out[#out + 1] = { acc, best }
    end
  end
  return out
end

-- a Lua number rounded to dtype (through a one-element tensor on the CPU)
local function rounded(v, dtype)
  if dtype == 'float64' or dtype == 'int64' then return v end
  return torch.tensor({ v }, { dtype = dtype, device = 'cpu' }):item()
end

local function same(a, b) return a == b or (a ~= a and b ~= b) end

-- x:OP(dim) (and max/min's indices, argmax/argmin) against the reference, exactly
local function check_reduce(label, x, dim, op)
  local want = reference(x, dim, op)
  local got, idx
  if op == 'max' or op == 'min' then got, idx = x[op](x, dim)
  else got = x[op](x, dim) end
  local g = flat(got:tolist())
  assert.are.equal(#want, #g, label .. ': output count')
  local dt = got.dtype
  for i = 1, #want do
    local w = rounded(want[i][1], dt)
    assert(same(g[i], w), ('%s %s(%d): output %d is %s, expected %s'):format(label, op, dim, i, tostring(g[i]), tostring(w)))
  end
  if idx then
    local gi = flat(idx:tolist())
    for i = 1, #want do
      assert(gi[i] == want[i][2] + 1, ('%s %s(%d): index %d is %s, expected %d'):format(label, op, dim, i, tostring(gi[i]), want[i][2] + 1))
    end
    local arg = flat(x['arg' .. op](x, dim):tolist())
    for i = 1, #want do
      assert(arg[i] == want[i][2] + 1, ('%s arg%s(%d): index %d is %s, expected %d'):format(label, op, dim, i, tostring(arg[i]), want[i][2] + 1))
    end
  end
end

local function check_all(label, x, dim, ops)
  for _, op in ipairs(ops or { 'sum', 'mean', 'max', 'min' }) do check_reduce(label, x, dim, op) end
end

describe('reductions at every launch shape', function()
  it('one output of a million elements (split over blocks)', function()
    local x = tensor(1000000, { 1000000 })
    check_all('[1e6]', x, 1)
    local want = reference(x, 1, 'sum')[1][1]
    assert.are.equal(rounded(want, 'float32'), x:sum():item())
    assert.are.equal(rounded(want / 1000000, 'float32'), x:mean():item())
  end)

  it('16 outputs of 100000 (columns split over blocks)', function()
    check_all('[100000, 16]', tensor(1600000, { 100000, 16 }), 1)
  end)

  it('100000 outputs of 3 (columns and short rows)', function()
    check_all('[3, 100000]', tensor(300000, { 3, 100000 }), 1)
    check_all('[100000, 3]', tensor(300000, { 100000, 3 }), 2)
  end)

  it('rows of 1, 10, 31, 32, 33, 130, 1000 and 5000 elements', function()
    for _, len in ipairs { 1, 10, 31, 32, 33, 130, 1000, 5000 } do
      local rows = len >= 1000 and 17 or 300
      check_all('[' .. rows .. ', ' .. len .. ']', tensor(rows * len, { rows, len }), 2)
      check_all('[' .. len .. ', ' .. rows .. ']', tensor(rows * len, { len, rows }), 1)
    end
  end)

  it('many rows of 130 (a warp per row)', function()
    check_all('[8192, 130]', tensor(8192 * 130, { 8192, 130 }), 2, { 'sum', 'max' })
  end)

  it('transposed, narrowed, expanded and 3-D inputs', function()
    local b = tensor(16000, { 16, 1000 })
    check_all('t([16, 1000])', b:t(), 1)
    check_all('t([16, 1000])', b:t(), 2)
    local n = tensor(64000, { 4000, 16 }):narrow(2, 3, 9)
    check_all('narrow', n, 1)
    check_all('narrow', n, 2)
    check_all('expand', tensor(16, { 1, 16 }):expand(1000, 16), 1)
    local c = tensor(4 * 50 * 6, { 4, 50, 6 })
    for d = 1, 3 do check_all('[4, 50, 6]', c, d) end
    check_all('[4, 50, 6] permuted', c:permute(3, 1, 2), 3)
  end)

  it('keepdim keeps the reduced dim as size 1', function()
    local x = tensor(2000, { 100, 20 })
    local s = x:sum(1, true)
    assert.are.same({ 1, 20 }, s:size():totable())
    local want = reference(x, 1, 'sum')
    for i, v in ipairs(flat(s:tolist())) do assert.are.equal(rounded(want[i][1], 'float32'), v) end
    local m, i = x:max(2, true)
    assert.are.same({ 100, 1 }, m:size():totable())
    assert.are.same({ 100, 1 }, i:size():totable())
  end)

  it('ties give the first index and NaN wins, across split blocks', function()
    for _, shape in ipairs { { 200000, 2 }, { 2, 200000 } } do
      local x = torch.zeros(shape)
      local along = shape[1] == 2 and 2 or 1
      -- equal maxima at several places: the first is the answer
      for _, at in ipairs { 150001, 70001, 199999 } do
        if along == 1 then x[at][1] = 5; x[at][2] = -5 else x[1][at] = 5; x[2][at] = -5 end
      end
      check_reduce('ties', x, along, 'max')
      check_reduce('ties', x, along, 'min')
      -- NaN: the first one wins
      for _, at in ipairs { 180000, 90000 } do
        if along == 1 then x[at][2] = 0 / 0 else x[2][at] = 0 / 0 end
      end
      check_reduce('NaN', x, along, 'max')
      check_reduce('NaN', x, along, 'min')
      check_reduce('NaN', x, along, 'sum')
    end
  end)

  it('float64, float16, bfloat16 and int64', function()
    for _, dt in ipairs { 'float64', 'float16', 'bfloat16' } do
      check_all(dt .. ' [100000, 16]', tensor(1600000, { 100000, 16 }, { dtype = dt }), 1, { 'sum', 'max' })
      check_all(dt .. ' [16, 1000]', tensor(16000, { 16, 1000 }, { dtype = dt }), 2)
      check_all(dt .. ' [33, 40]', tensor(33 * 40, { 33, 40 }, { dtype = dt }), 1)
    end
    local i = (tensor(300000, { 3, 100000 }) * 8):to('int64')
    check_all('int64 [3, 100000]', i, 1, { 'sum', 'max', 'min' })
    check_all('int64 [3, 100000]', i, 2, { 'sum', 'max', 'min' })
    assert.are.equal('int64', i:sum(1).dtype)
  end)

  it('the bias gradient of a linear layer (a column sum)', function()
    local x = tensor(5000 * 12, { 5000, 12 })
    local b = torch.zeros(12):requires_grad_(true)
    local w = tensor(5000 * 12, { 5000, 12 }, { seed = 7 })
    local loss = ((x + b) * w):sum()
    loss:backward()
    local want = reference(w, 1, 'sum')
    for k, v in ipairs(b.grad:tolist()) do assert.are.equal(rounded(want[k][1], 'float32'), v) end
  end)
end)

-- softmax and log_softmax of x along dim against a Lua reference, and their gradients for
-- the loss sum(y * w)
local function check_softmax(label, x, dim, tol)
  local sizes = x:size():totable()
  local v, wt = flat(x:tolist()), nil
  local inner = 1
  for d = dim + 1, #sizes do inner = inner * sizes[d] end
  local len, outer = sizes[dim], #v // (sizes[dim] * inner)
  local w = tensor(#v, sizes, { seed = 3, dtype = x.dtype })
  wt = flat(w:tolist())
  local want_s, want_l, want_gs, want_gl = {}, {}, {}, {}
  for o = 0, outer - 1 do
    for i = 0, inner - 1 do
      local function at(r) return o * len * inner + r * inner + i + 1 end
      local m = -math.huge
      for r = 0, len - 1 do m = math.max(m, v[at(r)]) end
      local sum = 0
      for r = 0, len - 1 do sum = sum + math.exp(v[at(r)] - m) end
      local dot, wsum = 0, 0
      for r = 0, len - 1 do
        local k = at(r)
        want_s[k] = math.exp(v[k] - m) / sum
        want_l[k] = v[k] - m - math.log(sum)
        dot = dot + wt[k] * want_s[k]
        wsum = wsum + wt[k]
      end
      for r = 0, len - 1 do
        local k = at(r)
        want_gs[k] = want_s[k] * (wt[k] - dot)
        want_gl[k] = wt[k] - want_s[k] * wsum
      end
    end
  end
  for _, case in ipairs { { 'softmax', want_s, want_gs }, { 'log_softmax', want_l, want_gl } } do
    local xg = x:detach():requires_grad_(true)
    local y = xg[case[1]](xg, dim)
    check.close(y, case[2], tol, label .. ' ' .. case[1])
    local loss = (y * w):sum()
    loss:backward()
    check.close(xg.grad, case[3], tol * 10, label .. ' ' .. case[1] .. ' gradient')
  end
end

describe('softmax at every launch shape', function()
  it('rows of 1, 10, 31, 32, 33, 1000, 1024, 1025 and 5000 classes', function()
    for _, c in ipairs { 1, 10, 31, 32, 33, 1000, 1024, 1025, 5000 } do
      local rows = c >= 1000 and 5 or 37
      check_softmax('[' .. rows .. ', ' .. c .. ']', tensor(rows * c, { rows, c }), 2, 1e-6)
    end
  end)

  it('many short rows (several blocks, several rows per block)', function()
    check_softmax('[3000, 10]', tensor(30000, { 3000, 10 }), 2, 1e-6)
  end)

  it('along a non-innermost dim and on a transposed input', function()
    check_softmax('[10, 40] dim 1', tensor(400, { 10, 40 }), 1, 1e-6)
    check_softmax('[3, 33, 5] dim 2', tensor(495, { 3, 33, 5 }), 2, 1e-6)
    check_softmax('t([40, 10])', tensor(400, { 40, 10 }):t(), 2, 1e-6)
  end)

  it('float64, float16 and bfloat16', function()
    check_softmax('float64 [7, 100]', tensor(700, { 7, 100 }, { dtype = 'float64' }), 2, 1e-12)
    check_softmax('float64 [3, 2000]', tensor(6000, { 3, 2000 }, { dtype = 'float64' }), 2, 1e-12)
    check_softmax('float16 [9, 33]', tensor(297, { 9, 33 }, { dtype = 'float16' }), 2, 2e-3)
    check_softmax('bfloat16 [9, 33]', tensor(297, { 9, 33 }, { dtype = 'bfloat16' }), 2, 2e-2)
  end)

  it('a NaN makes its whole row NaN and only its row', function()
    local x = tensor(330, { 10, 33 })
    x[4][20] = 0 / 0
    for _, f in ipairs { 'softmax', 'log_softmax' } do
      local y = x[f](x, 2):tolist()
      for r = 1, 10 do
        for c = 1, 33 do
          assert.are.equal(r == 4, y[r][c] ~= y[r][c], ('%s row %d column %d'):format(f, r, c))
        end
      end
    end
  end)

  it('cross_entropy on 10 and 1000 classes', function()
    local F = require('nn').functional
    for _, c in ipairs { 10, 1000 } do
      local x = tensor(64 * c, { 64, c })
      local tl = {}   -- classes count from 1
      for r, e in ipairs(values(64, 5)) do tl[r] = math.floor(e * 8) % c + 1 end
      local loss = F.cross_entropy(x, torch.tensor(tl, { dtype = 'int64' }))
      local v = x:tolist()
      local want = 0
      for r = 1, 64 do
        local m = -math.huge
        for k = 1, c do m = math.max(m, v[r][k]) end
        local s = 0
        for k = 1, c do s = s + math.exp(v[r][k] - m) end
        want = want + (m + math.log(s) - v[r][tl[r]])
      end
      check.close({ loss:item() }, { want / 64 }, 1e-6, 'cross_entropy ' .. c)
    end
  end)
end)
