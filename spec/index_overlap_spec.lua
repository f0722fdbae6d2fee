-- index_overlap: in-place index writes whose values, source or index share memory with the
-- tensor written.  As PyTorch 1.13, they raise "unsupported operation: some elements of the
-- input tensor and the written-to tensor refer to a single memory location" when the source
-- or index lies in the written tensor's memory (even the same elements: x:index_put_({i}, x)),
-- and work when it is a clone or lies outside (a sub-view written from another part of the
-- storage).  A one-element source is read once (PyTorch's masked_fill_ and index_fill_ route),
-- and layouts with gaps that overlap read a private copy.  The expected values are PyTorch's
-- for the same calls (0-based indices there, 1-based here).
local torch = require 'torch'

local expect_error = dofile('spec/helpers/check.lua').expect_error

local OVERLAP = 'some elements of the input tensor and the written-to tensor refer to a single memory location'

local function x10() return torch.arange(0, 10, { dtype = 'float64' }) end
local function idx(t) return torch.tensor(t, { dtype = 'int64' }) end
local function raises(f, ...) return expect_error(f, OVERLAP, 'clone()', ...) end

describe('index writes that read the tensor they write', function()
  local mask
  before_each(function()
    mask = torch.zeros(10, { dtype = 'bool' })
    mask[{ { 6, 10 } }] = true
  end)

  it('t[mask] = v and t[index] = v', function()
    local x = x10()
    raises(function() x[mask] = x[{ { 1, 5 } }] end, 'index_put_', 'values')     -- PyTorch raises
    raises(function() x[mask] = x[{ { 3, 7 } }] end)                              -- overlapping the written places
    raises(function() x[idx { 2, 3, 4 }] = x[{ { 3, 5 } }] end)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())                -- nothing written
    x[mask] = x[{ { 1, 5 } }]:clone()
    assert.are.same({ 0, 1, 2, 3, 4, 0, 1, 2, 3, 4 }, x:tolist())
    -- one element: read once, as PyTorch's masked_fill_
    x = x10()
    x[mask] = x[1]
    assert.are.same({ 0, 1, 2, 3, 4, 0, 0, 0, 0, 0 }, x:tolist())
    x = x10()
    x[mask] = x[{ { 2, 2 } }]
    assert.are.same({ 0, 1, 2, 3, 4, 1, 1, 1, 1, 1 }, x:tolist())
    -- a sub-view written from another part of the storage: x[0:5][m] = x[5:8] in PyTorch
    x = x10()
    x[{ { 1, 5 } }][torch.tensor({ true, false, true, false, true })] = x[{ { 6, 8 } }]
    assert.are.same({ 5, 1, 6, 3, 7, 5, 6, 7, 8, 9 }, x:tolist())
    local y = torch.arange(0, 6, { dtype = 'float64' }):reshape(2, 3)
    y[1][idx { 1, 2 }] = y[2][{ { 1, 2 } }]
    assert.are.same({ { 3, 4, 2 }, { 3, 4, 5 } }, y:tolist())
    -- a bool mask of the tensor itself with one value: PyTorch's b[b] = False
    local b = torch.tensor({ true, false, true })
    b[b] = false
    assert.are.same({ false, false, false }, b:tolist())
  end)

  it('index_put_', function()
    local x = x10()
    raises(function() x:index_put_({ torch.arange(1, 11) }, x) end)               -- the same elements
    raises(function() x:index_put_({ idx { 6, 7, 8 } }, x[{ { 5, 7 } }]) end)
    raises(function() x:index_put_({ idx { 2, 3 } }, x[{ { 2, 3 } }], { accumulate = true }) end)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    x:index_put_({ idx { 6, 7, 8 } }, x[{ { 5, 7 } }]:clone())
    assert.are.same({ 0, 1, 2, 3, 4, 4, 5, 6, 8, 9 }, x:tolist())
    x = x10()
    x:index_put_({ idx { 1, 2 } }, x[{ { 2, 3 } }]:clone(), { accumulate = true })
    assert.are.same({ 1, 3, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
  end)

  it('index_add_, index_copy_, index_fill_', function()
    local x = x10()
    raises(function() x:index_add_(1, torch.arange(1, 11), x) end)
    raises(function() x:index_add_(1, idx { 6, 7 }, x[{ { 1, 2 } }]) end)   -- elsewhere in x: PyTorch raises too
    raises(function() x:index_add_(1, idx { 6, 7 }, x[{ { 5, 6 } }]) end)
    raises(function() x:index_copy_(1, torch.arange(1, 11), x) end)
    raises(function() x:index_copy_(1, idx { 6, 7 }, x[{ { 5, 6 } }]) end)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    x:index_add_(1, idx { 6, 7 }, x[{ { 5, 6 } }]:clone())
    assert.are.same({ 0, 1, 2, 3, 4, 9, 11, 7, 8, 9 }, x:tolist())
    -- sub-views written from the rest of the storage
    x = x10()
    x[{ { 1, 5 } }]:index_copy_(1, idx { 2, 3 }, x[{ { 6, 7 } }])
    assert.are.same({ 0, 5, 6, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    x = x10()
    x[{ { 1, 5 } }]:index_add_(1, idx { 2, 3 }, x[{ { 6, 7 } }])
    assert.are.same({ 0, 6, 8, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    -- index_fill_ with an element of the tensor: read once, as PyTorch
    x = x10()
    x:index_fill_(1, idx { 1, 2 }, x[6])
    assert.are.same({ 5, 5, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
  end)

  it('scatter_ and scatter_add_', function()
    local x = x10()
    raises(function() x:scatter_(1, torch.arange(10, 0, -1), x) end, 'scatter_')
    raises(function() x:scatter_(1, idx { 6, 7 }, x[{ { 5, 6 } }]) end)
    raises(function() x:scatter_add_(1, torch.arange(10, 0, -1), x) end, 'scatter_add_')
    raises(function() x:scatter_add_(1, idx { 6, 7 }, x[{ { 5, 6 } }]) end)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    x:scatter_(1, torch.arange(10, 0, -1), x:clone())
    assert.are.same({ 9, 8, 7, 6, 5, 4, 3, 2, 1, 0 }, x:tolist())
    x = x10()
    x[{ { 1, 5 } }]:scatter_add_(1, idx { 2, 3 }, x[{ { 6, 7 } }])
    assert.are.same({ 0, 6, 8, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
    -- index and source from the rest of the storage: x[0:3].scatter_(0, x[3:6], x[6:9])
    local n = torch.tensor({ 1, 2, 3, 3, 2, 1, 7, 8, 9 })
    n[{ { 1, 3 } }]:scatter_(1, n[{ { 4, 6 } }], n[{ { 7, 9 } }])
    assert.are.same({ 9, 8, 7, 3, 2, 1, 7, 8, 9 }, n:tolist())
  end)

  it('an index in the memory written', function()
    local function ints() return torch.tensor({ 3, 1, 2, 5, 5 }) end
    local v = torch.tensor({ 7, 8, 9 })
    local x = ints()
    raises(function() x:index_put_({ x[{ { 1, 3 } }] }, v) end, 'index')
    raises(function() x:scatter_(1, x[{ { 1, 3 } }], v) end, 'index')
    raises(function() x:index_copy_(1, x[{ { 1, 3 } }], v) end, 'index')
    raises(function() x:index_add_(1, x[{ { 1, 3 } }], v) end, 'index')
    raises(function() x:index_fill_(1, x[{ { 1, 3 } }], 7) end, 'index')
    local b = torch.tensor({ true, false, true })
    raises(function() b:index_put_({ b }, torch.tensor({ false, false })) end, 'index')
    assert.are.same({ 3, 1, 2, 5, 5 }, x:tolist())
    x:index_put_({ x[{ { 1, 3 } }]:clone() }, v)
    assert.are.same({ 8, 9, 7, 5, 5 }, x:tolist())
  end)

  it('masked_scatter_: a source in the tensor written is refused, a clone works', function()
    -- (PyTorch 1.13 does not check here, and gives a result that depends on the order of the
    -- writes when the source overlaps the places written)
    local x = x10()
    raises(function() x:masked_scatter_(mask, x[{ { 4, 10 } }]) end)
    x:masked_scatter_(mask, x:clone())
    assert.are.same({ 0, 1, 2, 3, 4, 0, 1, 2, 3, 4 }, x:tolist())
  end)

  it('layouts with gaps that overlap read a private copy', function()
    -- x[0::2].index_copy_(0, [1, 2], x[0:6:2][0:2]): every element read before any is written
    local x = x10()
    x[{ { 1, 10, 2 } }]:index_copy_(1, idx { 2, 3 }, x[{ { 1, 6, 2 } }][{ { 1, 2 } }])
    assert.are.same({ 0, 1, 0, 3, 2, 5, 6, 7, 8, 9 }, x:tolist())
    -- interleaved, sharing no element: as PyTorch
    x = x10()
    x[{ { 1, 10, 2 } }]:index_copy_(1, idx { 1, 2 }, x[{ { 2, 5, 2 } }])
    assert.are.same({ 1, 1, 3, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
  end)

  it('copy_ keeps PyTorch\'s rule: partial overlap refused, the same elements fine', function()
    local x = x10()
    expect_error(function() x[{ { 2, 6 } }]:copy_(x[{ { 1, 5 } }]) end, OVERLAP, 'copy_')
    x:copy_(x)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, x:tolist())
  end)
end)
