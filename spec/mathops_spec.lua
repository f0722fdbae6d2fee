-- The compositions of lua/torch/mathops.lua (and erfinv, the op table's row) against
-- PyTorch 1.13: spec/fixtures/mathops.lua (written by spec/fixtures/make_mathops.py) holds
-- the inputs and PyTorch's outputs of each case; CALLS below is the dplua call of each
-- (1-based dims, indices and positions).  Then float64 gradchecks and the errors.
-- spec/gpu/specs runs it again on cpu:1 and the emulated cuda:0.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local flat, same_number = check.flat, check.same_number

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local cases = dofile(here .. '/fixtures/mathops.lua')

local CALLS = {
  ['nan_to_num'] = function(t) return t:nan_to_num() end,
  ['nan_to_num options'] = function(t) return torch.nan_to_num(t, { nan = 1.0, posinf = 2.0, neginf = -2.0 }) end,
  ['nan_to_num float64 default'] = function(t) return t:nan_to_num() end,
  ['sgn'] = function(t) return t:sgn() end,
  ['signbit'] = function(t) return t:signbit() end,
  ['signbit int64'] = function(t) return torch.signbit(t) end,
  ['logit'] = function(t) return t:logit() end,
  ['logit eps'] = function(t) return t:logit(0.2) end,
  ['xlogy'] = function(a, b) return torch.xlogy(a, b) end,
  ['bmm'] = function(a, b) return torch.bmm(a, b) end,
  ['baddbmm'] = function(c, a, b) return c:baddbmm(a, b, { beta = 0.5, alpha = 2.0 }) end,
  ['addbmm'] = function(c, a, b) return torch.addbmm(c, a, b, 0.5, 2.0) end,
  ['addmv'] = function(c, m, v) return torch.addmv(c, m, v, { beta = 2.0, alpha = -1.0 }) end,
  ['addr'] = function(c, u, v) return c:addr(u, v, { beta = 0.5, alpha = 3.0 }) end,
  ['addmm'] = function(c, a, b) return torch.addmm(c, a, b, { beta = 0.5, alpha = 2.0 }) end,
  ['einsum ij,jk->ik'] = function(a, b) return torch.einsum('ij,jk->ik', a, b) end,
  ['einsum implicit ij,jk'] = function(a, b) return torch.einsum('ij,jk', a, b) end,
  ['einsum bij,bjk->bik'] = function(a, b) return torch.einsum('bij,bjk->bik', a, b) end,
  ['einsum bhqd,bhkd->bhqk'] = function(a, b) return torch.einsum('bhqd,bhkd->bhqk', a, b) end,
  ['einsum i,i->'] = function(a, b) return torch.einsum('i,i->', a, b) end,
  ['einsum i,j->ij'] = function(a, b) return torch.einsum('i,j->ij', { a, b }) end,
  ['einsum ij->ji'] = function(a) return torch.einsum('ij->ji', a) end,
  ['einsum ij->'] = function(a) return torch.einsum('ij->', a) end,
  ['einsum ij->j'] = function(a) return torch.einsum('ij->j', a) end,
  ['einsum ii->i'] = function(a) return torch.einsum('ii->i', a) end,
  ['einsum ii->'] = function(a) return torch.einsum('ii->', a) end,
  ['einsum ij,ij->ij'] = function(a, b) return torch.einsum('ij,ij->ij', a, b) end,
  ['einsum ij,jk,kl->il'] = function(a, b, c) return torch.einsum('ij,jk,kl->il', a, b, c) end,
  ['einsum bn,anm,bm->ba'] = function(a, b, c) return torch.einsum('bn,anm,bm->ba', a, b, c) end,
  ['einsum ijk,ikl->jl'] = function(a, b) return torch.einsum('ijk,ikl->jl', a, b) end,
  ['einsum ij,kj->ik sums a private index'] = function(a, b) return torch.einsum('ij, kl -> ik', a, b) end,
  ['einsum ...ij,...jk->...ik'] = function(a, b) return torch.einsum('...ij,...jk->...ik', a, b) end,
  ['einsum implicit ...ij,...jk'] = function(a, b) return torch.einsum('...ij,...jk', a, b) end,
  ['einsum b...,b...->b'] = function(a, b) return torch.einsum('b...,b...->b', a, b) end,
  ['einsum ...ii->...i'] = function(a) return torch.einsum('...ii->...i', a) end,
  ['einsum i...->...'] = function(a) return torch.einsum('i...->...', a) end,
  ['tensordot'] = function(a, b) return torch.tensordot(a, b) end,
  ['tensordot dims'] = function(a, b) return a:tensordot(b, { { 1 }, { 2 } }) end,
  ['tensor_split sections'] = function(t) return table.unpack(t:tensor_split(3)) end,
  ['tensor_split points'] = function(t) return table.unpack(t:tensor_split({ 1, 4 }, 2)) end,
  ['tensor_split past the end'] = function(t) return table.unpack(torch.tensor_split(t, { 2, 9 })) end,
  ['repeat_interleave'] = function(t) return t:repeat_interleave(2) end,
  ['repeat_interleave tensor dim 1'] = function(t)
    return t:repeat_interleave(torch.tensor({ 1, 2 }), 1)
  end,
  ['repeat_interleave dim 2'] = function(t) return torch.repeat_interleave(t, 3, 2) end,
  ['rot90'] = function(t) return t:rot90() end,
  ['rot90 k=2'] = function(t) return t:rot90(2) end,
  ['rot90 k=3'] = function(t) return torch.rot90(t, 3, { 1, 2 }) end,
  ['rot90 k=-1 dims 2,1'] = function(t) return t:rot90(-1, { 2, 1 }) end,
  ['unflatten'] = function(t) return t:unflatten(2, { 2, 3 }) end,
  ['unflatten -1'] = function(t) return t:unflatten(2, { -1, 2 }) end,
  ['diag vector'] = function(t) return t:diag() end,
  ['diag vector offset 1'] = function(t) return t:diag(1) end,
  ['diag vector offset -2'] = function(t) return torch.diag(t, -2) end,
  ['diag matrix'] = function(t) return t:diag() end,
  ['diag matrix offset 1'] = function(t) return t:diag(1) end,
  ['diag matrix offset -1'] = function(t) return t:diag(-1) end,
  ['diagonal offset 1 dims 2,3'] = function(t) return t:diagonal(1, 2, 3) end,
  ['diagonal dims 3,1'] = function(t) return t:diagonal({ dim1 = 3, dim2 = 1 }) end,
  ['diag_embed'] = function(t) return t:diag_embed() end,
  ['diag_embed offset 1'] = function(t) return t:diag_embed(1) end,
  ['diag_embed offset -1'] = function(t) return torch.diag_embed(t, -1) end,
  ['triu_indices'] = function() return torch.triu_indices(3, 4, 1) end,
  ['tril_indices'] = function() return torch.tril_indices(4, 3, -1) end,
  ['tril_indices square'] = function() return torch.tril_indices(3, 3) end,
  ['trace'] = function(t) return t:trace() end,
  ['trace float'] = function(t) return torch.trace(t) end,
  ['unique'] = function(t) return t:unique({ return_inverse = true, return_counts = true }) end,
  ['unique 2-D float'] = function(t) return torch.unique(t, true, true) end,
  ['unique values only'] = function(t) return t:unique() end,
  ['bincount'] = function(t) return t:bincount() end,
  ['bincount minlength'] = function(t) return t:bincount({ minlength = 6 }) end,
  ['bincount weights float32'] = function(t, w) return t:bincount(w) end,
  ['bincount weights float64'] = function(t, w) return torch.bincount(t, w, 4) end,
  ['bincount empty'] = function(t) return t:bincount() end,
  ['histc'] = function(t) return t:histc(4, 0, 3) end,
  ['histc data range'] = function(t) return t:histc({ bins = 3 }) end,
  ['searchsorted'] = function(s, v) return torch.searchsorted(s, v) end,
  ['searchsorted right'] = function(s, v) return torch.searchsorted(s, v, { right = true }) end,
  ['searchsorted 2-D'] = function(s, v) return torch.searchsorted(s, v) end,
  ['bucketize'] = function(v, b) return v:bucketize(b) end,
  ['bucketize right'] = function(v, b) return torch.bucketize(v, b, { right = true }) end,
  ['cross'] = function(a, b) return a:cross(b, 2) end,
  ['cross default dim'] = function(a, b) return torch.cross(a, b) end,
  ['cdist'] = function(a, b) return torch.cdist(a, b) end,
  ['cdist p=1'] = function(a, b) return torch.cdist(a, b, 1) end,
  ['cdist batched'] = function(a, b) return torch.cdist(a, b) end,
}


local function check(label, got, want, tol)
  assert(torch.is_tensor(got), label .. ': not a tensor')
  assert.are.same(want.shape, got:size():totable(), label .. ': shape')
  assert.are.equal(want.dtype, got.dtype, label .. ': dtype')
  local g, w = flat(got:dim() == 0 and { got:item() } or got:tolist()), flat(want.values)
  assert.are.equal(#w, #g, label .. ': element count')
  for i = 1, #w do
    assert(same_number(g[i], w[i], tol), ('%s: element %d is %s, PyTorch %s'):format(label, i, tostring(g[i]), tostring(w[i])))
  end
end

describe('mathops against PyTorch', function()
  local names = {}
  for name in pairs(cases) do names[#names + 1] = name end
  table.sort(names)
  it('every fixture case has a call and every call a case', function()
    for _, name in ipairs(names) do assert(CALLS[name], 'no call for ' .. name) end
    for name in pairs(CALLS) do assert(cases[name], 'no fixture case for ' .. name) end
  end)
  for _, name in ipairs(names) do
    local c = cases[name]
    it(name, function()
      local inputs = {}
      for i, spec in ipairs(c.inputs) do
        inputs[i] = #spec.values == 0 and torch.zeros({ 0 }, { dtype = spec.dtype })
          or torch.tensor(spec.values, { dtype = spec.dtype })
      end
      local results = { CALLS[name](table.unpack(inputs)) }
      assert.are.equal(#c.outputs, #results, name .. ': number of results')
      for j, want in ipairs(c.outputs) do
        local tol = want.dtype == 'float64' and 1e-12 or 1e-6
        check(('%s (result %d)'):format(name, j), results[j], want, tol)
      end
    end)
  end
end)

describe('mathops gradients and errors', function()
  local function x(...) return torch.randn({ ... }, { dtype = 'float64' }):requires_grad_(true) end
  local gc = torch.autograd.gradcheck

  it('float64 gradchecks', function()
    assert.is_true(gc(function(a, b) return torch.einsum('bij,bjk->bik', a, b) end, { x(2, 3, 4), x(2, 4, 2) }))
    assert.is_true(gc(function(a, b) return torch.einsum('bhqd,bhkd->bhqk', a, b) end, { x(1, 2, 3, 2), x(1, 2, 2, 2) }))
    assert.is_true(gc(function(a) return torch.einsum('ii->i', a) end, { x(3, 3) }))
    assert.is_true(gc(function(a, b) return torch.einsum('...ij,...jk->...ik', a, b) end, { x(2, 1, 2, 3), x(3, 3, 2) }))
    assert.is_true(gc(function(a, b, c) return torch.einsum('bn,anm,bm->ba', a, b, c) end, { x(2, 3), x(2, 3, 2), x(2, 2) }))
    assert.is_true(gc(function(c, a, b) return torch.baddbmm(c, a, b, { beta = 0.5, alpha = 2 }) end,
      { x(2, 3, 2), x(2, 3, 4), x(2, 4, 2) }))
    assert.is_true(gc(function(c, m, v) return torch.addmv(c, m, v) end, { x(3), x(3, 2), x(2) }))
    assert.is_true(gc(function(c, u, v) return torch.addr(c, u, v) end, { x(3, 2), x(3), x(2) }))
    assert.is_true(gc(function(a, b) return torch.tensordot(a, b, 1) end, { x(2, 3), x(3, 2) }))
    assert.is_true(gc(function(a) return a:diag(1) end, { x(3) }))
    assert.is_true(gc(function(a) return a:diagonal(-1, 1, 2) end, { x(3, 4) }))
    assert.is_true(gc(function(a) return a:diag_embed() end, { x(2, 3) }))
    assert.is_true(gc(function(a) return a:trace() end, { x(3, 3) }))
    assert.is_true(gc(function(a, b) return a:cross(b, 2) end, { x(2, 3), x(2, 3) }))
    assert.is_true(gc(function(a, b) return torch.cdist(a, b) end, { x(3, 2), x(2, 2) }))
    assert.is_true(gc(function(a) return a:repeat_interleave(torch.tensor({ 2, 0, 1 }), 1) end, { x(3, 2) }))
    assert.is_true(gc(function(a) return a:rot90(1) end, { x(2, 3) }))
    assert.is_true(gc(function(a) return a:prod(1, true) end, { x(3, 2) }))
    local p = torch.tensor({ 0.2, 0.5, 0.7 }, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(gc(function(a) return a:logit() end, { p }))
    local y = torch.tensor({ 0.5, 1.5, 2.0 }, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(gc(function(a, b) return torch.xlogy(a, b) end, { x(3), y }))
    local e = torch.tensor({ -0.8, 0.1, 0.6 }, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(gc(function(a) return a:erfinv() end, { e }))
  end)

  it('erfinv inverts erf to double precision, with PyTorch\'s ends', function()
    local v = torch.tensor({ -0.999999, -0.5, 0, 0.3, 0.999999999 }, { dtype = 'float64' })
    local back = v:erfinv():erf():tolist()
    for i, want in ipairs(v:tolist()) do assert(math.abs(back[i] - want) < 1e-15, back[i]) end
    local ends = torch.tensor({ 1, -1, 1.5, 0 / 0 }):erfinv():tolist()
    assert.are.equal(math.huge, ends[1])
    assert.are.equal(-math.huge, ends[2])
    assert(ends[3] ~= ends[3] and ends[4] ~= ends[4])
  end)

  it('t.T reverses the dims and t.mT swaps the last two, as views', function()
    local t = torch.arange(24):view(2, 3, 4)
    assert.are.same({ 4, 3, 2 }, t.T:size():totable())
    assert.are.equal(t[2][3][1], t.T[1][3][2])
    assert.are.same({ 2, 4, 3 }, t.mT:size():totable())
    assert.are.equal(t[1][2][4], t.mT[1][4][2])
    assert.are.same({ 1, 2 }, torch.tensor({ 1, 2 }).T:tolist())
    local ok, err = pcall(function() return torch.tensor({ 1 }).mT end)
    assert.is_false(ok)
    assert.matches('mT is only supported on matrices or batches of matrices, got a 1%-D tensor', err)
  end)

  it('xlogy gives 0 where x is 0, and its gradient there is 0', function()
    local a = torch.tensor({ 0.0, 2.0 }, { dtype = 'float64' }):requires_grad_(true)
    local b = torch.tensor({ 3.0, 4.0 }, { dtype = 'float64' })
    torch.xlogy(a, b):sum():backward()
    assert.are.same({ 0, math.log(4) }, a.grad:tolist())
  end)

  it('bad arguments are errors that say what was wrong', function()
    local t = torch.randn(3, 4)
    local function fails(pattern, fn)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.matches(pattern, err)
    end
    fails('bmm: the first batch must be 3%-D, got 2%-D', function() return torch.bmm(t, t) end)
    fails("einsum: operand 1 has 2 dimensions but its subscripts 'ijk' name 3", function() return torch.einsum('ijk->i', t) end)
    fails("einsum: bad subscripts 'i%.%.j'", function() return torch.einsum('i..j->ij', t) end)
    fails("einsum: letter 'j' has size 4 in one operand and 3 in another", function() return torch.einsum('ij,jk->ik', t, t) end)
    fails('einsum: the equation has 2 operands, 1 tensors given', function() return torch.einsum('ij,jk->ik', t) end)
    fails("einsum: output letter 'z' is not in any operand", function() return torch.einsum('ij->z', t) end)
    fails('diagonal: dimension 3 is out of range.*dplua counts dims from 1', function() return t:diagonal(0, 1, 3) end)
    fails('tensor_split: dimension 0 is out of range.*dplua counts dims from 1', function() return t:tensor_split(2, 0) end)
    fails('bincount: values must be non%-negative, got %-1', function() return torch.tensor({ 1, -1 }):bincount() end)
    fails('bincount: expected a 1%-D int64 tensor', function() return t:bincount() end)
    fails('repeat_interleave: 2 repeats for dimension 1 of size 3', function() return t:repeat_interleave({ 1, 2 }, 1) end)
    fails('cross: dimension 2 must have size 3, got 4 and 4', function() return t:cross(t, 2) end)
    fails('unique: dim is not supported', function() return t:unique({ dim = 1 }) end)
    fails('trace: expected a matrix', function() return torch.randn(2, 2, 2):trace() end)
  end)
end)
