-- torch.data: datasets, samplers (PyTorch's index lists), default collation, the
-- DataLoader (batch sizes, orders, seeds, options and their errors), the engine's batch
-- assembly for tensor datasets with and without worker threads, and the progress bar.
local torch = require 'torch'
local data = require 'torch.data'

local LUA = os.getenv('LUA') or 'lua5.4'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local shape_of = dofile('spec/helpers/check.lua').shape_of

-- The notes' dataset: `length` random rows of `size` values.
local RandomDataset, parent = torch.class('dataspec.RandomDataset', 'torch.data.Dataset')
function RandomDataset:__init(size, length)
  parent.__init(self)
  self.len = length
  self.data = torch.randn(length, size)
end
function RandomDataset:get(i) return self.data[i] end
function RandomDataset:__len() return self.len end

-- Items that are tables of several kinds of values.
local RecordDataset, rparent = torch.class('dataspec.RecordDataset', 'torch.data.Dataset')
function RecordDataset:__init(n)
  rparent.__init(self)
  self.n = n
end
function RecordDataset:get(i)
  return { id = i, score = i / 2, even = i % 2 == 0, name = 'item' .. i, pair = { torch.full({ 2 }, i), i * 10 } }
end
function RecordDataset:__len() return self.n end

-- Item i is {x_i, y_i}: a 3-vector and an integer label.
local PairDataset, pparent = torch.class('dataspec.PairDataset', 'torch.data.Dataset')
function PairDataset:__init(n)
  pparent.__init(self)
  self.n = n
end
function PairDataset:get(i) return { torch.full({ 3 }, i), i } end
function PairDataset:__len() return self.n end

-- The first column of a batch of RandomDataset rows, mapped back to dataset indices.
local function ids_of(ds, batch)
  local lookup = {}
  for i = 1, #ds do lookup[ds.data[i][1]] = i end
  local out = {}
  for r = 1, batch:size(1) do out[r] = lookup[batch[r][1]] end
  return out
end

local function epoch_ids(loader, ds)
  local ids, sizes = {}, {}
  for x in loader:iter() do
    sizes[#sizes + 1] = x:size(1)
    for _, i in ipairs(ids_of(ds, x)) do ids[#ids + 1] = i end
  end
  return ids, sizes
end

local function is_permutation(ids, n)
  if #ids ~= n then return false end
  local seen = {}
  for _, i in ipairs(ids) do
    if seen[i] or i < 1 or i > n then return false end
    seen[i] = true
  end
  return true
end

describe('datasets', function()
  it('a torch.class subclass of Dataset: get(i) and #ds', function()
    local ds = RandomDataset(5, 100)
    assert.are.equal(100, #ds)
    assert.are.same({ 5 }, shape_of(ds:get(7)))
    assert.is_true(torch.equal(ds:get(7), ds.data[7]))
    assert.is_true(torch.isinstance == nil or torch.isinstance(ds, 'torch.data.Dataset'))
  end)

  it('TensorDataset: item i is {t1[i], t2[i]}, or t1[i] for one tensor', function()
    local x = torch.arange(1, 13):reshape(4, 3):float()
    local y = torch.tensor({ 10, 20, 30, 40 })
    local ds = data.TensorDataset(x, y)
    assert.are.equal(4, #ds)
    local item = ds:get(3)
    assert.are.same({ 7.0, 8.0, 9.0 }, item[1]:tolist())
    assert.are.equal(30, item[2])
    local one = data.TensorDataset(x)
    assert.are.same({ 4.0, 5.0, 6.0 }, one:get(2):tolist())
    expect_error(function() ds:get(5) end, 'index 5', '4 items')
    expect_error(function() ds:get(0) end, 'index 0')
  end)

  it('TensorDataset checks its tensors', function()
    expect_error(function() data.TensorDataset(torch.zeros(4, 2), torch.zeros(5)) end,
      'tensor 1 has 4 items', 'tensor 2 has 5')
    expect_error(function() data.TensorDataset(torch.zeros(4), 'labels') end, 'argument 2', 'string')
    expect_error(function() data.TensorDataset(torch.tensor(3.0)) end, '0-dimensional')
    expect_error(function() data.TensorDataset() end, 'at least one tensor')
  end)
end)

describe('samplers', function()
  local ds10 = data.TensorDataset(torch.zeros(10, 1))

  it('SequentialSampler and RandomSampler', function()
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, data.SequentialSampler(ds10):indices())
    local seen = {}
    for i in data.SequentialSampler(ds10):iter() do seen[#seen + 1] = i end
    assert.are.equal(10, #seen)
    local s = data.RandomSampler(ds10)
    assert.are.equal(10, #s)
    local a, b = s:indices(), s:indices()
    assert.is_true(is_permutation(a, 10))
    assert.is_true(is_permutation(b, 10))
    assert.are_not.same(a, b)
  end)

  it('RandomSampler repeats after torch.manual_seed, and with a generator', function()
    torch.manual_seed(5)
    local s = data.RandomSampler(ds10)
    local a1, a2 = s:indices(), s:indices()
    torch.manual_seed(5)
    assert.are.same(a1, s:indices())
    assert.are.same(a2, s:indices())
    local g1 = data.RandomSampler(ds10, { generator = { seed = 7 } })
    local g2 = data.RandomSampler(ds10, { generator = { seed = 7 } })
    local first = g1:indices()
    assert.are.same(first, g2:indices())
    assert.are.same(g1:indices(), g2:indices())
    assert.are_not.same(first, g1:indices())
    expect_error(function() data.RandomSampler(ds10, { replace = true }) end, 'unknown option replace')
  end)

  it('DistributedSampler without shuffling matches PyTorch\'s padding and interleaving', function()
    -- reference lists from torch.utils.data.DistributedSampler (1.13), shifted to 1-based
    local cases = {
      { 10, 3, false, { { 1, 4, 7, 10 }, { 2, 5, 8, 1 }, { 3, 6, 9, 2 } } },
      { 10, 3, true, { { 1, 4, 7 }, { 2, 5, 8 }, { 3, 6, 9 } } },
      { 7, 4, false, { { 1, 5 }, { 2, 6 }, { 3, 7 }, { 4, 1 } } },
      { 7, 4, true, { { 1 }, { 2 }, { 3 }, { 4 } } },
      { 2, 3, false, { { 1 }, { 2 }, { 1 } } },
      { 2, 3, true, { {}, {}, {} } },
      { 5, 5, false, { { 1 }, { 2 }, { 3 }, { 4 }, { 5 } } },
      { 11, 2, true, { { 1, 3, 5, 7, 9 }, { 2, 4, 6, 8, 10 } } },
    }
    for _, c in ipairs(cases) do
      local n, r, drop, want = c[1], c[2], c[3], c[4]
      local ds = data.TensorDataset(torch.zeros(n, 1))
      for rank = 0, r - 1 do
        local s = data.DistributedSampler(ds, { num_replicas = r, rank = rank, shuffle = false, drop_last = drop })
        assert.are.same(want[rank + 1], s:indices(), ('n=%d replicas=%d rank=%d drop_last=%s'):format(n, r, rank, drop))
        assert.are.equal(#want[rank + 1], #s)
      end
    end
  end)

  it('DistributedSampler shuffles from seed + epoch, the same permutation on every rank', function()
    local ds = data.TensorDataset(torch.zeros(10, 1))
    local function shares(epoch, seed)
      local all, out = {}, {}
      for rank = 0, 2 do
        local s = data.DistributedSampler(ds, { num_replicas = 3, rank = rank, seed = seed })
        s:set_epoch(epoch)
        out[rank + 1] = s:indices()
        for _, i in ipairs(out[rank + 1]) do all[#all + 1] = i end
      end
      return out, all
    end
    local e0, all0 = shares(0, 0)
    local seen = {}
    for _, i in ipairs(all0) do seen[i] = true end
    for i = 1, 10 do assert.is_true(seen[i], 'index ' .. i .. ' is in no share') end
    assert.are.equal(12, #all0)
    torch.manual_seed(123)   -- the global stream does not matter
    assert.are.same(e0, (shares(0, 0)))
    assert.are_not.same(e0, (shares(1, 0)))
    assert.are_not.same(e0, (shares(0, 1)))
    assert.are.same((shares(1, 0)), (shares(0, 1)))   -- seed + epoch
  end)

  it('DistributedSampler checks its options', function()
    expect_error(function() data.DistributedSampler(ds10, { num_replicas = 3, rank = 3 }) end, 'rank 3', '[0, 2]')
    expect_error(function() data.DistributedSampler(ds10, { num_replicas = 0, rank = 0 }) end, 'num_replicas', '0')
    expect_error(function() data.DistributedSampler(ds10, { num_replicas = 2, rank = 0, ranks = 1 }) end,
      'unknown option ranks')
    local ok, dist = pcall(require, 'torch.distributed')
    if not (ok and dist.is_initialized and dist.is_initialized()) then
      expect_error(function() data.DistributedSampler(ds10) end, 'num_replicas and rank', 'process group')
    end
  end)
end)

describe('default collate', function()
  local collate = data.default_collate

  it('stacks tensors along a new first dimension', function()
    local b = collate({ torch.tensor({ 1.0, 2.0 }), torch.tensor({ 3.0, 4.0 }), torch.tensor({ 5.0, 6.0 }) })
    assert.are.same({ 3, 2 }, shape_of(b))
    assert.are.same({ { 1.0, 2.0 }, { 3.0, 4.0 }, { 5.0, 6.0 } }, b:tolist())
    local nc = torch.arange(1, 7):reshape(2, 3):float():t()    -- non-contiguous items
    local s = collate({ nc, nc * 2 })
    assert.are.same({ 2, 3, 2 }, shape_of(s))
    assert.is_true(torch.equal(s[2], nc * 2))
  end)

  it('numbers, booleans and strings as PyTorch collates them', function()
    local ints = collate({ 1, 2, 3 })
    assert.are.equal('int64', ints.dtype)
    assert.are.same({ 1, 2, 3 }, ints:tolist())
    local floats = collate({ 1.5, 2, 3 })
    assert.are.equal('float64', floats.dtype)
    assert.are.same({ 1.5, 2.0, 3.0 }, floats:tolist())
    local bools = collate({ true, false })
    assert.are.equal('bool', bools.dtype)
    assert.are.same({ true, false }, bools:tolist())
    assert.are.same({ 'a', 'b' }, collate({ 'a', 'b' }))
  end)

  it('tables field by field, sequences position by position', function()
    local ds = RecordDataset(4)
    local b = collate({ ds:get(1), ds:get(2), ds:get(3) })
    assert.are.same({ 1, 2, 3 }, b.id:tolist())
    assert.are.equal('int64', b.id.dtype)
    assert.are.same({ 0.5, 1.0, 1.5 }, b.score:tolist())
    assert.are.same({ false, true, false }, b.even:tolist())
    assert.are.same({ 'item1', 'item2', 'item3' }, b.name)
    assert.are.same({ { 1.0, 1.0 }, { 2.0, 2.0 }, { 3.0, 3.0 } }, b.pair[1]:tolist())
    assert.are.same({ 10, 20, 30 }, b.pair[2]:tolist())
  end)

  it('names both shapes and both items when shapes differ', function()
    expect_error(function() collate({ torch.zeros(2), torch.zeros(2), torch.zeros(3) }) end,
      '[2]', '[3]', 'item 1', 'item 3')
    expect_error(function() collate({ { x = torch.zeros(2) }, { x = torch.zeros(2, 1) } }) end, '[2]', '[2, 1]', '.x')
    expect_error(function() collate({ torch.zeros(2), 5 }) end, 'item 1 is a tensor', 'item 2 is an integer')
    expect_error(function() collate({ { 1, 2 }, { 1 } }) end, 'item 1 has 2 entries', 'item 2 has 1')
    expect_error(function() collate({ { a = 1 }, { b = 1 } }) end, 'field')
    expect_error(function() collate({ print }) end, 'function', 'collate_fn')
  end)
end)

describe('DataLoader', function()
  before_each(function() torch.manual_seed(0) end)

  it('the notes\' case: 100 items in batches of 30, shuffled, each item once per epoch', function()
    local ds = RandomDataset(5, 100)
    local loader = data.DataLoader(ds, { batch_size = 30, shuffle = true })
    assert.are.equal(4, #loader)
    local ids1, sizes = epoch_ids(loader, ds)
    assert.are.same({ 30, 30, 30, 10 }, sizes)
    assert.is_true(is_permutation(ids1, 100))
    local ids2 = epoch_ids(loader, ds)
    assert.is_true(is_permutation(ids2, 100))
    assert.are_not.same(ids1, ids2)
    local sorted = {}
    for i = 1, 100 do sorted[i] = i end
    assert.are_not.same(sorted, ids1)
    -- the same orders after the same seed
    torch.manual_seed(42)
    local a1, a2 = epoch_ids(loader, ds), epoch_ids(loader, ds)
    torch.manual_seed(42)
    assert.are.same(a1, (epoch_ids(loader, ds)))
    assert.are.same(a2, (epoch_ids(loader, ds)))
  end)

  it('without shuffling visits items in order; #loader is ceil, or floor with drop_last', function()
    local ds = RandomDataset(2, 10)
    local loader = data.DataLoader(ds, { batch_size = 4 })
    assert.are.equal(3, #loader)
    local ids, sizes = epoch_ids(loader, ds)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, ids)
    assert.are.same({ 4, 4, 2 }, sizes)
    local dl = data.DataLoader(ds, { batch_size = 4, drop_last = true })
    assert.are.equal(2, #dl)
    local _, dsizes = epoch_ids(dl, ds)
    assert.are.same({ 4, 4 }, dsizes)
    assert.are.equal(10, #data.DataLoader(ds))
    assert.are.equal(1, #data.DataLoader(ds, { batch_size = 10 }))
    assert.are.equal(1, #data.DataLoader(ds, { batch_size = 11 }))
    assert.are.equal(0, #data.DataLoader(ds, { batch_size = 11, drop_last = true }))
    local n = 0
    for _ in data.DataLoader(ds, { batch_size = 11, drop_last = true }):iter() do n = n + 1 end
    assert.are.equal(0, n)
  end)

  it('returns a sequence batch as multiple values', function()
    local loader = data.DataLoader(PairDataset(5), { batch_size = 2 })
    local got = {}
    for x, y in loader:iter() do
      got[#got + 1] = { shape_of(x), y:tolist(), y.dtype }
    end
    assert.are.same({ { { 2, 3 }, { 1, 2 }, 'int64' }, { { 2, 3 }, { 3, 4 }, 'int64' }, { { 1, 3 }, { 5 }, 'int64' } }, got)
  end)

  it('collates tables of mixed values; strings stay a table', function()
    local loader = data.DataLoader(RecordDataset(5), { batch_size = 3 })
    local batches = {}
    for b in loader:iter() do batches[#batches + 1] = b end
    assert.are.equal(2, #batches)
    assert.are.same({ 'item4', 'item5' }, batches[2].name)
    assert.are.same({ 4, 5 }, batches[2].id:tolist())
    local words = setmetatable({}, { __index = { get = function(_, i) return ('w%d'):format(i) end,
      __len = function() return 3 end } })
    local s = {}
    for b in data.DataLoader(words, { batch_size = 3 }):iter() do s[#s + 1] = b end
    assert.are.same({ { 'w1', 'w2', 'w3' } }, s)
  end)

  it('#loader raises when the sampler has no __len (as len() in PyTorch), and does not draw an epoch', function()
    local drawn = 0
    local sampler = { iter = function()
      drawn = drawn + 1
      local i = 0
      return function() i = i + 1; if i <= 4 then return i end end
    end }
    local loader = data.DataLoader(PairDataset(4), { batch_size = 2, sampler = sampler })
    expect_error(function() return #loader end, 'this sampler has no __len()')
    assert.are.equal(0, drawn)
    local n = 0
    for _ in loader:iter() do n = n + 1 end
    assert.are.equal(2, n)
    sampler.__len = function() return 4 end
    assert.are.equal(2, #loader)
  end)

  it('uses collate_fn when given', function()
    local loader = data.DataLoader(PairDataset(4), {
      batch_size = 2,
      collate_fn = function(items)
        local sum = 0
        for _, it in ipairs(items) do sum = sum + it[2] end
        return { #items, sum }
      end,
    })
    local got = {}
    for n, sum in loader:iter() do got[#got + 1] = { n, sum } end
    assert.are.same({ { 2, 3 }, { 2, 7 } }, got)
    -- a TensorDataset with collate_fn sees the items
    local tl = data.DataLoader(data.TensorDataset(torch.arange(1, 5)), { batch_size = 4, collate_fn = function(items)
      return items
    end })
    for a, b, c, d in tl:iter() do assert.are.same({ 1, 2, 3, 4 }, { a, b, c, d }) end
  end)

  it('raises errors naming the option and its value', function()
    local ds = RandomDataset(2, 10)
    expect_error(function() data.DataLoader(ds, { batch_size = 0 }) end, 'batch_size', '0')
    expect_error(function() data.DataLoader(ds, { batch_size = 2.5 }) end, 'batch_size', '2.5')
    expect_error(function() data.DataLoader(ds, { batch_size = 'ten' }) end, 'batch_size', 'ten')
    expect_error(function() data.DataLoader(ds, { num_workers = -1 }) end, 'num_workers', '-1')
    expect_error(function() data.DataLoader(ds, { prefetch = 0 }) end, 'prefetch', '0')
    expect_error(function() data.DataLoader(ds, { shuffle = true, sampler = data.SequentialSampler(ds) }) end,
      'shuffle', 'sampler')
    expect_error(function() data.DataLoader(ds, { batchsize = 30 }) end, 'unknown option batchsize', '30')
    expect_error(function() data.DataLoader(ds, { shuffle = 'yes' }) end, 'shuffle', 'yes')
    expect_error(function() data.DataLoader(ds, { collate_fn = 3 }) end, 'collate_fn', '3')
    expect_error(function() data.DataLoader(ds, { device = 'tpu:0' }) end, 'device', 'tpu:0')
    expect_error(function() data.DataLoader(ds, 30) end, 'options must be a table')
  end)

  it('raises errors naming the item for bad datasets', function()
    local NoGet = torch.class('dataspec.NoGetDataset', 'torch.data.Dataset')
    function NoGet:__len() return 3 end
    expect_error(function() data.DataLoader(NoGet()) end, 'get(i)')
    local NoLen = torch.class('dataspec.NoLenDataset', 'torch.data.Dataset')
    function NoLen:get(i) return i end
    expect_error(function() data.DataLoader(NoLen()) end, '__len')

    local Holes = torch.class('dataspec.HolesDataset', 'torch.data.Dataset')
    function Holes:get(i) if i ~= 6 then return torch.zeros(2) end end
    function Holes:__len() return 8 end
    local loader = data.DataLoader(Holes(), { batch_size = 4 })
    local it = loader:iter()
    assert.are.same({ 4, 2 }, shape_of(it()))
    expect_error(function() it() end, 'get(6)', 'nil')

    local Ragged = torch.class('dataspec.RaggedDataset', 'torch.data.Dataset')
    function Ragged:get(i) return torch.zeros(i == 7 and 3 or 2) end
    function Ragged:__len() return 8 end
    expect_error(function() for _ in data.DataLoader(Ragged(), { batch_size = 4 }):iter() do end end,
      'item 5 has shape [2]', 'item 7 has shape [3]')

    local bad_sampler = { indices = function() return { 1, 2, 3, 42 } end, __len = function() return 4 end }
    expect_error(function()
      for _ in data.DataLoader(RandomDataset(2, 10), { batch_size = 2, sampler = bad_sampler }):iter() do end
    end, 'index 42', '10 items')
  end)

  it('takes a sampler: a DistributedSampler, or a plain list of indices', function()
    local ds = RandomDataset(2, 10)
    local s = data.DistributedSampler(ds, { num_replicas = 3, rank = 1, shuffle = false })
    local loader = data.DataLoader(ds, { batch_size = 3, sampler = s })
    assert.are.equal(2, #loader)
    local ids = epoch_ids(loader, ds)
    assert.are.same({ 2, 5, 8, 1 }, ids)
    local listed = data.DataLoader(ds, { batch_size = 2, sampler = { 10, 9, 1 } })
    assert.are.same({ 10, 9, 1 }, (epoch_ids(listed, ds)))
  end)

  it('moves batches to device=', function()
    local loader = data.DataLoader(PairDataset(4), { batch_size = 2, device = 'cpu' })
    for x, y in loader:iter() do
      assert.are.equal('cpu', tostring(x.device))
      assert.are.equal('cpu', tostring(y.device))
    end
    local tl = data.DataLoader(data.TensorDataset(torch.zeros(4, 2)), { batch_size = 2, device = torch.device('cpu'),
      pin_memory = true })
    for x in tl:iter() do assert.is_false(x.is_cuda) end
    if torch.cuda.is_available() then
      local cl = data.DataLoader(data.TensorDataset(torch.zeros(4, 2), torch.arange(1, 5)),
        { batch_size = 2, device = 'cuda:0', pin_memory = true })
      for x, y in cl:iter() do
        assert.is_true(x.is_cuda)
        assert.is_true(y.is_cuda)
      end
    end
  end)
end)

describe('DataLoader over a TensorDataset', function()
  local N, D = 1000, 7
  local x, y, ds
  before_each(function()
    torch.manual_seed(1)
    x = torch.randn(N, D)
    y = torch.arange(1, N + 1)
    ds = data.TensorDataset(x, y)
  end)

  -- The batches of one epoch as Lua values, and the permutation they followed.
  local function collect(loader)
    local out = {}
    for bx, by in loader:iter() do out[#out + 1] = { bx:tolist(), by:tolist(), bx.dtype, by.dtype } end
    return out
  end

  it('gathers the rows each batch names, keeping dtypes', function()
    local loader = data.DataLoader(ds, { batch_size = 64, shuffle = true })
    assert.are.equal(16, #loader)
    local seen, n = {}, 0
    for bx, by in loader:iter() do
      assert.are.equal('float32', bx.dtype)
      assert.are.equal('int64', by.dtype)
      assert.is_true(torch.equal(bx, x:index_select(1, by)))
      for _, i in ipairs(by:tolist()) do
        assert.is_nil(seen[i])
        seen[i] = true
      end
      n = n + by:size(1)
    end
    assert.are.equal(N, n)
  end)

  it('gathers large batches (copied by several threads) exactly', function()
    local big = torch.randn(3000, 600)
    local labels = torch.arange(1, 3001)
    local loader = data.DataLoader(data.TensorDataset(big, labels), { batch_size = 1000, shuffle = true })
    local n = 0
    for bx, by in loader:iter() do
      assert.is_true(torch.equal(bx, big:index_select(1, by)))
      n = n + 1
    end
    assert.are.equal(3, n)
  end)

  it('batches equal the item-by-item path (same sampler order)', function()
    local fast = data.DataLoader(ds, { batch_size = 50, sampler = data.RandomSampler(ds, { generator = { seed = 9 } }) })
    local slow = data.DataLoader(ds, { batch_size = 50, sampler = data.RandomSampler(ds, { generator = { seed = 9 } }),
      collate_fn = function(items)
        local xs, ys = {}, {}
        for k, it in ipairs(items) do xs[k], ys[k] = it[1], it[2] end
        return { torch.stack(xs, 1), torch.tensor(ys) }
      end })
    assert.are.same(collect(slow), collect(fast))
  end)

  it('num_workers gives the same batches in the same order', function()
    for _, opts in ipairs({ { num_workers = 1 }, { num_workers = 2 }, { num_workers = 3, prefetch = 1 },
      { num_workers = 2, prefetch = 5, drop_last = true } }) do
      torch.manual_seed(77)
      local base = data.DataLoader(ds, { batch_size = 64, shuffle = true, drop_last = opts.drop_last })
      local want1, want2 = collect(base), collect(base)
      torch.manual_seed(77)
      local w = data.DataLoader(ds, { batch_size = 64, shuffle = true, drop_last = opts.drop_last,
        num_workers = opts.num_workers, prefetch = opts.prefetch })
      assert.are.same(want1, collect(w))
      assert.are.same(want2, collect(w))
      w:close()
    end
  end)

  it('a one-tensor dataset yields the batch tensor', function()
    local loader = data.DataLoader(data.TensorDataset(x), { batch_size = 300, num_workers = 2 })
    local sizes = {}
    for b in loader:iter() do
      assert.is_true(torch.is_tensor(b))
      sizes[#sizes + 1] = b:size(1)
    end
    assert.are.same({ 300, 300, 300, 100 }, sizes)
  end)

  it('a bad index fails at its batch, with or without workers', function()
    local indices = {}
    for i = 1, 20 do indices[i] = i end
    indices[13] = N + 5
    for _, nw in ipairs({ 0, 2 }) do
      local loader = data.DataLoader(ds, { batch_size = 5, num_workers = nw,
        sampler = { indices = function() return indices end, __len = function() return 20 end } })
      local it = loader:iter()
      it()
      it()
      local err = expect_error(function() it() end, 'index ' .. (N + 5), 'batch 3')
      assert.truthy(err:find(tostring(N) .. ' items', 1, true))
      local bx = it()   -- the epoch goes on after the bad batch
      assert.are.same({ 5, D }, shape_of(bx))
      assert.is_nil(it())
    end
  end)

  it('a loader abandoned mid-epoch stops its threads', function()
    for _ = 1, 20 do
      local loader = data.DataLoader(ds, { batch_size = 10, num_workers = 3, shuffle = true })
      local it = loader:iter()
      it()
      it()
    end
    collectgarbage()
    collectgarbage()
    -- and a process that exits with a loader mid-epoch does not hang
    local script = ([[
      local torch = require 'torch'
      local ds = torch.data.TensorDataset(torch.zeros(5000, 20))
      local loader = torch.data.DataLoader(ds, {batch_size = 8, num_workers = 4, prefetch = 4})
      local it = loader:iter()
      it()
      KEEP = {loader, it}
      print('ok')
    ]]):gsub('\n', ' ')
    local p = io.popen(('timeout 60 %s -e %q 2>&1; echo "status $?"'):format(LUA, script))
    local out = p:read('a')
    p:close()
    assert.are.equal('ok\nstatus 0\n', out)
  end)

  it('a new iter() ends the previous epoch\'s iterator', function()
    local loader = data.DataLoader(ds, { batch_size = 100, num_workers = 2 })
    local it1 = loader:iter()
    it1()
    local it2 = loader:iter()
    local first = it2()
    assert.are.same({ 100, D }, shape_of(first))
    assert.is_true(torch.equal(first, x:narrow(1, 1, 100)))
    expect_error(function() it1() end, 'later loader:iter()')
    loader:close()
    expect_error(function() it2() end, 'loader:close()')
    local n = 0
    for _ in loader:iter() do n = n + 1 end   -- a closed loader starts again
    assert.are.equal(10, n)
  end)

  it('gives a dataset written in Lua the same batches with num_workers (worker threads, spec/data_workers_spec.lua)', function()
    torch.manual_seed(3)
    local rd = RandomDataset(3, 50)
    local a = epoch_ids(data.DataLoader(rd, { batch_size = 7, sampler = data.RandomSampler(rd, { generator = { seed = 1 } }) }), rd)
    local b = epoch_ids(data.DataLoader(rd, { batch_size = 7, num_workers = 4,
      sampler = data.RandomSampler(rd, { generator = { seed = 1 } }) }), rd)
    assert.are.same(a, b)
  end)
end)

describe('DataLoader progress bar', function()
  it('writes a plain line each quarter of the epoch when stderr is not a terminal', function()
    local script = ([[
      local torch = require 'torch'
      local ds = torch.data.TensorDataset(torch.zeros(100, 2))
      for _ in torch.data.DataLoader(ds, {batch_size = 2, progress = true}):iter() do end
    ]]):gsub('\n', ' ')
    local p = io.popen(('%s -e %q 2>&1 >/dev/null'):format(LUA, script))
    local out = p:read('a')
    p:close()
    local lines = {}
    for line in out:gmatch('[^\n]+') do lines[#lines + 1] = line end
    assert.are.equal(4, #lines, out)
    assert.truthy(lines[1]:find('^13/50 batches %(26%%%), [%d.]+ batches/s, %d+:%d%d:%d%d left$'), lines[1])
    assert.truthy(lines[4]:find('^50/50 batches %(100%%%)'), lines[4])
    assert.is_nil(out:find('\r', 1, true))
  end)

  it('redraws one line in place on a terminal', function()
    local Progress = require 'torch.data.progress'
    local buf = {}
    local sink = { write = function(_, s) buf[#buf + 1] = s end, flush = function() end }
    local bar = Progress.new(4, sink, true)
    for i = 1, 4 do bar:step(i) end
    bar:finish()
    local out = table.concat(buf)
    assert.truthy(out:find('\r4/4 [==============================] 100%', 1, true), out)
    assert.truthy(out:find('batches/s', 1, true))
    assert.truthy(out:find('left', 1, true))
    assert.are.equal('\n', out:sub(-1))
    assert.is_nil(out:sub(1, -2):find('\n', 1, true))
  end)
end)
