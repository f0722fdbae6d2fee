-- torch.data.DataLoader with num_workers > 0 over datasets written in Lua: each worker is a
-- thread with its own Lua state holding a copy of the dataset (classes, upvalues, shared
-- references), batches come back in the order of num_workers = 0, tensors by reference;
-- worker_init_fn, get_worker_info, per-worker seeds, errors with the worker's traceback,
-- values that cannot be sent, early exits, and epochs with and without persistent workers.
local torch = require 'torch'
local data = require 'torch.data'

local expect_error = dofile('spec/helpers/check.lua').expect_error

-- A dataset class whose methods reach helpers through upvalues: a local function, a
-- local table of constants, and a module (string).
local SCALE = { factor = 10 }
local function label_of(i) return i % 3 end
local fmt = string.format

local Squares, parent = torch.class('workerspec.Squares', 'torch.data.Dataset')
function Squares:__init(n, d)
  parent.__init(self)
  self.n, self.d = n, d
  self.base = torch.arange(1, d + 1, { dtype = 'float32' })
end
function Squares:get(i)
  return { self.base * (i * SCALE.factor), label_of(i) }
end
function Squares:__len() return self.n end

-- Items holding a tensor, a nested table, a string and booleans.
local Records, rparent = torch.class('workerspec.Records', 'torch.data.Dataset')
function Records:__init(n) rparent.__init(self); self.n = n end
function Records:get(i)
  return { id = i, name = fmt('item-%03d', i), even = i % 2 == 0, pair = { torch.full({ 2 }, i), i / 4 } }
end
function Records:__len() return self.n end

-- A plain table with get/__len in its metatable (no torch.class).
local function plain_dataset(n)
  local mt = {}
  mt.__index = { get = function(self, i) return torch.full({ 3 }, self.offset + i) end,
    __len = function() return n end }
  return setmetatable({ offset = 100 }, mt)
end

local function batches_of(loader)
  local out = {}
  for x, y in loader:iter() do out[#out + 1] = { x, y } end
  return out
end

-- a and b hold the same values (tensors compared by value, tables entry by entry)
local function same(u, v, where)
  if torch.is_tensor(u) then
    assert.is_true(torch.is_tensor(v) and torch.equal(u, v), where .. ' differs')
  elseif type(u) == 'table' then
    assert.are.equal('table', type(v), where)
    for k, x in pairs(u) do same(x, v[k], where .. '.' .. tostring(k)) end
    for k in pairs(v) do assert.is_not_nil(u[k], where .. '.' .. tostring(k)) end
  else
    assert.are.same(u, v, where)
  end
end

local function same_batches(a, b)
  assert.are.equal(#a, #b)
  for k = 1, #a do same(a[k], b[k], 'batch ' .. k) end
end

describe('DataLoader workers over a Lua dataset', function()
  it('give the batches of num_workers = 0, in the same order (shuffled, with a generator)', function()
    local ds = Squares(53, 4)
    for _, opts in ipairs({ { num_workers = 1 }, { num_workers = 2 }, { num_workers = 3, prefetch = 1 },
      { num_workers = 2, prefetch = 4, drop_last = true } }) do
      local function make(nw)
        return data.DataLoader(ds, { batch_size = 5, shuffle = true, generator = { seed = 7 },
          drop_last = opts.drop_last, num_workers = nw, prefetch = nw > 0 and opts.prefetch or nil })
      end
      local want, got = batches_of(make(0)), batches_of(make(opts.num_workers))
      assert.are.equal(opts.drop_last and 10 or 11, #want)
      same_batches(want, got)
      -- and the values are the dataset's: item i is {1, 2, 3, 4} * 10 i with label i % 3,
      -- each index once
      local seen = 0
      for _, b in ipairs(got) do
        local x, y = b[1], b[2]
        for r = 1, x:size(1) do
          local i = x[r][1] // 10
          assert.are.same({ 10 * i, 20 * i, 30 * i, 40 * i }, { x[r][1], x[r][2], x[r][3], x[r][4] })
          assert.are.equal(i % 3, y[r])
          seen = seen + i
        end
      end
      if not opts.drop_last then assert.are.equal(53 * 54 // 2, seen) end
    end
  end)

  it('copy plain-table datasets and return tables, strings and booleans', function()
    local got = {}
    for x in data.DataLoader(plain_dataset(7), { batch_size = 3, num_workers = 2 }):iter() do
      got[#got + 1] = x
    end
    assert.are.same({ 3, 3 }, { got[1]:size(1), got[1]:size(2) })
    assert.are.same({ 101, 104, 107 }, { got[1][1][1], got[2][1][1], got[3][1][1] })
    local want = batches_of(data.DataLoader(Records(10), { batch_size = 4 }))
    local recs = batches_of(data.DataLoader(Records(10), { batch_size = 4, num_workers = 2 }))
    assert.are.equal(3, #recs)
    same_batches(want, recs)
    assert.are.same({ 'item-001', 'item-002', 'item-003', 'item-004' }, recs[1][1].name)
    assert.are.same({ 4, 2 }, { recs[1][1].pair[1]:size(1), recs[1][1].pair[1]:size(2) })
  end)

  it('hand tensors back by reference (no copy)', function()
    local store = torch.zeros(6, 2)
    local ds = plain_dataset(6)
    getmetatable(ds).__index.get = function(self, i) return self.store[i] end
    ds.store = store
    local loader = data.DataLoader(ds, { batch_size = 2, num_workers = 2, collate_fn = function(items) return items end })
    local _, second = loader:iter()()   -- a sequence of items comes back as several values
    -- the items are views of the main state's tensor: writing it shows through them
    store[2][1] = 42
    assert.are.equal(42, second[1])
    assert.are.equal(store[2]:data_ptr(), second:data_ptr())
  end)

  it('keep shared references, cycles and shared upvalues', function()
    local count = 0
    local function bump() count = count + 1; return count end
    local function peek() return count end
    local shared = { tag = 'S' }
    local ds = { n = 4, a = shared, b = shared }
    ds.self_ref = ds
    setmetatable(ds, { __index = {
      get = function(self, i)
        bump()
        return { same = self.a == self.b, cycle = self.self_ref == self, calls = peek(), tag = self.a.tag }
      end,
      __len = function(self) return self.n end,
    } })
    local got = batches_of(data.DataLoader(ds, { batch_size = 2, num_workers = 1,
      collate_fn = function(items) return items end }))
    assert.are.equal(2, #got)
    assert.is_true(got[1][1].same)
    assert.is_true(got[1][1].cycle)
    assert.are.equal('S', got[1][1].tag)
    -- bump and peek share `count` in the worker as in the main state: calls go 1, 2, 3, 4
    assert.are.same({ 1, 2, 3, 4 }, { got[1][1].calls, got[1][2].calls, got[2][1].calls, got[2][2].calls })
    assert.are.equal(0, count)   -- the main state's count is untouched
  end)

  it('send modules by name: the worker requires its own, from the main state\'s package.path', function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. dir))
    local f = assert(io.open(dir .. '/wspec_mod.lua', 'w'))
    f:write("local M = { loads = 0 }\nM.loads = M.loads + 1\nfunction M.twice(x) return 2 * x end\nreturn M\n")
    f:close()
    local saved = package.path
    package.path = dir .. '/?.lua;' .. package.path
    local mod = require 'wspec_mod'
    mod.loads = 10                                -- the main state's module state stays here
    package.loaded.wspec_by_hand = { k = 3 }      -- no file: copied instead
    local by_hand = package.loaded.wspec_by_hand
    local ds = plain_dataset(4)
    getmetatable(ds).__index.get = function(self, i)
      return { mod.twice(i), mod.loads, by_hand.k, package.loaded.wspec_mod == mod }
    end
    local ok, got = pcall(batches_of, data.DataLoader(ds, { batch_size = 4, num_workers = 1,
      collate_fn = function(items) return items end }))
    package.path = saved
    package.loaded.wspec_mod, package.loaded.wspec_by_hand = nil, nil
    os.remove(dir .. '/wspec_mod.lua')
    os.remove(dir)
    assert(ok, got)
    assert.are.same({ 2, 1, 3, true }, got[1][1])
    assert.are.same({ 4, 1, 3, true }, got[1][2])
  end)

  it('run worker_init_fn in each worker, and get_worker_info there (nil in the main state)', function()
    assert.is_nil(data.get_worker_info())
    local ds = plain_dataset(12)
    getmetatable(ds).__index.get = function(self, i)
      local info = torch.data.get_worker_info()
      return { worker = info.id, nw = info.num_workers, seed = info.seed, init = WORKER_INIT, same = info.dataset == self }
    end
    local loader = data.DataLoader(ds, { batch_size = 2, num_workers = 3,
      worker_init_fn = function(id) WORKER_INIT = 'ready ' .. id end,
      collate_fn = function(items) return items[1] end })
    local seeds = {}
    local k = 0
    for b in loader:iter() do
      k = k + 1
      local id = (k - 1) % 3 + 1   -- batch k is made by worker (k - 1) % 3 + 1
      assert.are.equal(id, b.worker)
      assert.are.equal(3, b.nw)
      assert.are.equal('ready ' .. id, b.init)
      assert.is_true(b.same)
      seeds[id] = b.seed
    end
    assert.are.equal(6, k)
    assert.is_nil(rawget(_G, 'WORKER_INIT'))
    -- seeds: a base seed drawn in the main state, plus the worker's number
    assert.are.equal(seeds[1] + 1, seeds[2])
    assert.are.equal(seeds[1] + 2, seeds[3])
  end)

  it('draw random numbers from a stream per worker, repeatable with torch.manual_seed', function()
    local ds = plain_dataset(8)
    getmetatable(ds).__index.get = function() return torch.rand(2) end
    local function run()
      torch.manual_seed(123)
      local out = batches_of(data.DataLoader(ds, { batch_size = 2, num_workers = 2 }))
      return out, torch.rand(1):item()
    end
    local a, after_a = run()
    local b, after_b = run()
    same_batches(a, b)
    assert.are.equal(after_a, after_b)
    assert.is_false(torch.equal(a[1][1], a[2][1]))   -- the two workers draw differently
    -- each epoch seeds the workers anew
    local loader = data.DataLoader(ds, { batch_size = 2, num_workers = 2 })
    assert.is_false(torch.equal(batches_of(loader)[1][1], batches_of(loader)[1][1]))
    -- the workers leave the main stream alone: shuffled orders over epochs, and the draws
    -- after them, are those of num_workers = 0
    local squares = Squares(30, 2)
    local function epochs(nw)
      torch.manual_seed(77)
      local l = data.DataLoader(squares, { batch_size = 4, shuffle = true, num_workers = nw })
      local out = { batches_of(l), batches_of(l) }
      return out, torch.rand(2)
    end
    local e0, r0 = epochs(0)
    local e2, r2 = epochs(2)
    same_batches(e0[1], e2[1])
    same_batches(e0[2], e2[2])
    assert.is_false(torch.equal(e0[1][1][1], e0[2][1][1]))   -- two epochs, two orders
    assert.is_true(torch.equal(r0, r2))
    -- a worker's torch.manual_seed sets its own stream only
    torch.manual_seed(5)
    local want = torch.rand(3)
    torch.manual_seed(5)
    getmetatable(ds).__index.get = function() torch.manual_seed(99); return torch.rand(1) end
    batches_of(data.DataLoader(ds, { batch_size = 2, num_workers = 2 }))
    torch.manual_seed(5)
    assert.is_true(torch.equal(want, torch.rand(3)))
  end)

  it('run without recording autograd graphs', function()
    local w = torch.ones(2, { requires_grad = true })
    local ds = plain_dataset(4)
    ds.w = w
    getmetatable(ds).__index.get = function(self, i) return { torch.is_grad_enabled(), (self.w * i).requires_grad } end
    local got = batches_of(data.DataLoader(ds, { batch_size = 2, num_workers = 2, collate_fn = function(items) return items end }))
    assert.are.same({ false, false }, got[1][1])
    assert.is_true(torch.is_grad_enabled())
  end)

  it('raise a worker\'s error at its batch, with the worker\'s traceback', function()
    local ds = Squares(20, 2)
    local Failing = torch.class('workerspec.Failing', 'workerspec.Squares')
    function Failing:get(i)
      if i == 13 then error('cannot decode item ' .. i) end
      return Squares.get(self, i)
    end
    local loader = data.DataLoader(Failing(20, 2), { batch_size = 2, num_workers = 2 })
    local it = loader:iter()
    for _ = 1, 6 do it() end
    -- batch 7 holds items 13 and 14 and is made by worker 1
    local err = expect_error(function() it() end, 'DataLoader worker 1 (batch 7)', 'cannot decode item 13',
      'stack traceback', 'data_workers_spec.lua')
    assert.truthy(err:find('in method \'get\'', 1, true) or err:find('in function', 1, true))
    local x = it()   -- the epoch goes on after the failed batch
    assert.are.equal(2, x:size(1))
    loader:close()
    assert.are.equal(20, #ds)
    -- errors in worker_init_fn and collate_fn
    local bad_init = data.DataLoader(Squares(4, 2), { batch_size = 2, num_workers = 2,
      worker_init_fn = function(id) if id == 2 then error('no device for worker ' .. id) end end })
    local it2 = bad_init:iter()
    it2()
    expect_error(function() it2() end, 'DataLoader worker 2 (batch 2)', 'no device for worker 2', 'stack traceback')
    bad_init:close()
    local bad_collate = data.DataLoader(Squares(4, 2), { batch_size = 2, num_workers = 1,
      collate_fn = function() return nil end })
    expect_error(function() bad_collate:iter()() end, 'DataLoader worker 1 (batch 1)', 'collate_fn returned nil')
    bad_collate:close()
  end)

  it('refuse what cannot be sent to a worker, naming where it is', function()
    local f = io.tmpfile()
    local ds = plain_dataset(4)
    ds.reader = { file = f }
    local loader = data.DataLoader(ds, { batch_size = 2, num_workers = 2 })
    expect_error(function() loader:iter() end, 'dataset.reader.file: a file handle cannot be sent to a worker',
      'worker_init_fn')
    f:close()
    ds.reader = { co = coroutine.create(function() end) }
    expect_error(function() loader:iter() end, 'dataset.reader.co: a coroutine cannot be sent to a worker')
    local write = getmetatable(io.stdout).__index.write
    ds.reader = nil
    getmetatable(ds).__index.get = function(self, i) write(io.stdout, '') return torch.zeros(1) end
    expect_error(function() loader:iter() end, "<upvalue 'write'>",
      'a C function that is not part of a loaded module cannot be sent')
    -- a chain too deep to copy
    local deep, link = {}, nil
    link = deep
    for _ = 1, 1200 do link.next = {}; link = link.next end
    ds.deep = deep
    expect_error(function() loader:iter() end, 'dataset.deep.next.next', 'nested more than 1000')
    ds.deep = nil
    -- a batch holding what a worker cannot hand back
    local odd = data.DataLoader(plain_dataset(4), { batch_size = 2, num_workers = 1,
      collate_fn = function(items) return { items = items, f = print } end })
    expect_error(function() odd:iter()() end, 'DataLoader worker 1 (batch 1)', 'batch.f: a function cannot be handed back')
    -- the same dataset is fine once the worker opens what it needs itself
    getmetatable(ds).__index.get = function(self, i) return torch.full({ 1 }, i) end
    assert.are.equal(2, #batches_of(loader))
  end)

  it('stop on break and on close, and start again', function()
    local ds = Squares(40, 3)
    local want = batches_of(data.DataLoader(ds, { batch_size = 4 }))
    for _, persistent in ipairs({ false, true }) do
      local loader = data.DataLoader(ds, { batch_size = 4, num_workers = 2, persistent_workers = persistent })
      local n = 0
      for _ in loader:iter() do
        n = n + 1
        if n == 3 then break end
      end
      assert.are.equal(persistent, rawget(loader, '_pool') ~= nil)
      same_batches(want, batches_of(loader))   -- the next epoch starts from its first batch
      local it = loader:iter()
      it()
      loader:close()
      expect_error(function() it() end, 'loader:close()')
      same_batches(want, batches_of(loader))
      loader:close()
    end
    -- abandoned iterators are collected with their threads
    for _ = 1, 10 do
      local it = data.DataLoader(ds, { batch_size = 4, num_workers = 2 }):iter()
      it()
    end
    collectgarbage()
    collectgarbage()
  end)

  it('stop at Ctrl-C while waiting, and let a process exit mid-epoch', function()
    local LUA = os.getenv('LUA') or 'lua5.4'
    local slow = [[
      local torch = require 'torch'
      local mt = {}
      mt.__index = {
        get = function(self, i) local t = torch.Timer() while t:time().real < 0.05 do end return torch.full({ 2 }, i) end,
        __len = function() return 10000 end,
      }
      local loader = torch.data.DataLoader(setmetatable({}, mt), { batch_size = 4, num_workers = 2 })
      print('started')
      io.stdout:flush()
      io.open('%s', 'w'):close()
      %s
    ]]
    local function run(body, interrupt)
      local marker = os.tmpname()
      os.remove(marker)
      local script = slow:format(marker, body):gsub('\n', ' ')
      -- SIGINT half a second after the loop started (the marker file exists)
      -- (one SIGINT to the interpreter itself: a second one would kill it, as Lua's does)
      local cmd = interrupt
        and '(%s -e %q 2>&1 & pid=$!; (sleep 60; kill -9 $pid) >/dev/null 2>&1 & dog=$!; '
          .. 'for i in $(seq 600); do [ -e %s ] && break; sleep 0.1; done; '
          .. 'sleep 0.5; kill -INT $pid; wait $pid; echo "status $?"; kill $dog)'
        or 'timeout 60 %s -e %q 2>&1; echo "status $?"'
      local p = io.popen(cmd:format(LUA, script, marker))
      local out = p:read('a')
      p:close()
      os.remove(marker)
      return out
    end
    -- Ctrl-C stops the loop and the program, without hanging
    local out = run('for x in loader:iter() do end', true)
    assert.truthy(out:find('started', 1, true), out)
    assert.truthy(out:find('interrupted', 1, true), out)
    assert.truthy(out:find('status 1', 1, true), out)
    -- leaving with a loader mid-epoch (its workers busy) ends the process
    out = run('local it = loader:iter() it() KEEP = { loader, it } print("ok")')
    assert.are.equal('started\nok\nstatus 0\n', out)
  end)

  it('keep the worker states between epochs only with persistent_workers', function()
    local ds = plain_dataset(4)
    getmetatable(ds).__index.get = function(self)
      self.calls = (self.calls or 0) + 1   -- the worker's copy counts
      return self.calls
    end
    for _, persistent in ipairs({ false, true }) do
      local loader = data.DataLoader(ds, { batch_size = 2, num_workers = 1, persistent_workers = persistent,
        collate_fn = function(items) return items end })
      local counts = {}
      for _ = 1, 3 do
        for a, b in loader:iter() do counts[#counts + 1] = a .. ',' .. b end
      end
      if persistent then
        assert.are.same({ '1,2', '3,4', '5,6', '7,8', '9,10', '11,12' }, counts)
      else
        assert.are.same({ '1,2', '3,4', '1,2', '3,4', '1,2', '3,4' }, counts)
      end
      loader:close()
    end
    assert.is_nil(ds.calls)
    expect_error(function() data.DataLoader(ds, { persistent_workers = true }) end, 'persistent_workers', 'num_workers')
    expect_error(function() data.DataLoader(ds, { num_workers = 1, worker_init_fn = 3 }) end, 'worker_init_fn', '3')
  end)
end)
