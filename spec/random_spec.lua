-- Random draws with a generator: the same seed gives the same stream on every function,
-- a generator leaves the global stream alone, and the distributions are right (frequencies
-- and moments within 5 standard errors over many fixed-seed draws); bad arguments.
local torch = require 'torch'
local expect_error = dofile('spec/helpers/check.lua').expect_error

local function gen(seed) return torch.Generator():manual_seed(seed) end
local function same(a, b) return torch.equal and torch.equal(a, b) or (a:double() - b:double()):abs():max():item() == 0 end
local function list(t) return t:reshape(-1):double():tolist() end

-- within 5 standard errors
local function near(got, want, se, what)
  assert(math.abs(got - want) <= 5 * se, ('%s: %.6g, expected %.6g +- %.3g'):format(what, got, want, 5 * se))
end

-- every draw function, called with a generator
local DRAWS = {
  rand = function(g) return torch.rand(3, 4, { generator = g }) end,
  randn = function(g) return torch.randn({ 5 }, { generator = g, dtype = 'float64' }) end,
  randint = function(g) return torch.randint(-3, 9, { 6 }, { generator = g }) end,
  randint_high = function(g) return torch.randint(9, { 6 }, { generator = g }) end,
  randperm = function(g) return torch.randperm(10, { generator = g }) end,
  rand_like = function(g) return torch.rand_like(torch.zeros(4), { generator = g }) end,
  randn_like = function(g) return torch.randn_like(torch.zeros(4), { generator = g }) end,
  randint_like = function(g) return torch.randint_like(torch.zeros(4), 2, 5, { generator = g }) end,
  multinomial = function(g) return torch.multinomial(torch.tensor { 0.2, 0.3, 0.5 }, 5, { replacement = true, generator = g }) end,
  multinomial_norep = function(g) return torch.multinomial(torch.tensor { { 1.0, 2, 3, 4 } }, 3, { generator = g }) end,
  bernoulli = function(g) return torch.bernoulli(torch.full({ 8 }, 0.4), { generator = g }) end,
  normal = function(g) return torch.normal(torch.zeros(4), torch.ones(4), { generator = g }) end,
  normal_numbers = function(g) return torch.normal(2, 3, { 4 }, { generator = g }) end,
  uniform_ = function(g) return torch.empty(5):uniform_(-2, 2, { generator = g }) end,
  normal_ = function(g) return torch.empty(5):normal_(1, 2, { generator = g }) end,
  exponential_ = function(g) return torch.empty(5):exponential_(3, { generator = g }) end,
  bernoulli_ = function(g) return torch.empty(6):bernoulli_(0.5, { generator = g }) end,
  random_ = function(g) return torch.empty(6):random_(0, 100, { generator = g }) end,
}

describe('generator = option', function()
  local names = {}
  for name in pairs(DRAWS) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(name .. ': the same seed gives the same values, a stream moves on, the global one stays', function()
      local f = DRAWS[name]
      local g1, g2 = gen(1234), gen(1234)
      local a, b = f(g1), f(g2)
      assert.is_true(same(a, b), name .. ': two generators seeded alike differ')
      assert(g1.offset > 0, name .. ': the generator did not move')
      -- a second draw from the same generator differs, and a different seed differs
      local c, d = f(g1), f(gen(99))
      assert.is_false(same(a, c) and same(a, d), name .. ': draws repeat')
      -- the global stream is not touched
      torch.manual_seed(7)
      local x = torch.rand(4)
      torch.manual_seed(7)
      f(gen(5))
      assert.is_true(same(x, torch.rand(4)), name .. ': drew from the global stream')
    end)
  end

  it('Generator:get_state and set_state replay a stream', function()
    local g = gen(3)
    torch.rand(2, { generator = g })
    local s = g:get_state()
    local a = torch.randn(3, { generator = g })
    g:set_state(s)
    assert.is_true(same(a, torch.randn(3, { generator = g })))
  end)

  it('DataLoader and RandomSampler take a torch.Generator', function()
    local ds = torch.data.TensorDataset(torch.arange(1, 21))
    local function order(g)
      local seen = {}
      for b in torch.data.DataLoader(ds, { batch_size = 5, shuffle = true, generator = g }):iter() do
        for _, v in ipairs((torch.is_tensor(b) and b or b[1]):tolist()) do seen[#seen + 1] = v end
      end
      return seen
    end
    local a, b = order(gen(11)), order(gen(11))
    assert.are.same(a, b)
    table.sort(a)
    for i = 1, 20 do assert.are.equal(i, a[i]) end
    local s1 = {}
    for i in torch.data.RandomSampler(ds, { generator = gen(4) }):iter() do s1[#s1 + 1] = i end
    local s2 = {}
    for i in torch.data.RandomSampler(ds, { generator = gen(4) }):iter() do s2[#s2 + 1] = i end
    assert.are.same(s1, s2)
  end)

  it('SubsetRandomSampler and WeightedRandomSampler draw from their generator', function()
    local function all(s) local out = {} for i in s:iter() do out[#out + 1] = i end return out end
    local a = all(torch.data.SubsetRandomSampler({ 10, 20, 30, 40 }, { generator = gen(1) }))
    assert.are.same(a, all(torch.data.SubsetRandomSampler({ 10, 20, 30, 40 }, { generator = gen(1) })))
    table.sort(a)
    assert.are.same({ 10, 20, 30, 40 }, a)
    local w = torch.data.WeightedRandomSampler({ 0.0, 1.0, 3.0 }, 4000, { generator = gen(2) })
    assert.are.equal(4000, #w)
    local d = all(w)
    assert.are.same(d, all(torch.data.WeightedRandomSampler({ 0.0, 1.0, 3.0 }, 4000, { generator = gen(2) })))
    local c = {}
    for _, v in ipairs(d) do c[v] = (c[v] or 0) + 1 end
    assert.is_nil(c[1])
    near(c[3] / 4000, 0.75, math.sqrt(0.75 * 0.25 / 4000), 'weighted sampler')
    local nr = all(torch.data.WeightedRandomSampler({ 1.0, 1.0, 1.0 }, 3, { replacement = false, generator = gen(3) }))
    table.sort(nr)
    assert.are.same({ 1, 2, 3 }, nr)
    expect_error(function() torch.data.WeightedRandomSampler({ 1.0 }, 0) end, 'num_samples should be a positive integer')
  end)
end)

-- spec/fixtures/make_philox.py computes the draws from a separate implementation of
-- src/philox.h's mapping: each Philox call gives four 32-bit words and a draw uses them all
-- (four float32 uniforms or normals, two float64 uniforms, normals or integers per call)
describe('the Philox mapping', function()
  local F = dofile('spec/fixtures/philox.lua')
  for _, c in ipairs(F.cases) do
    it(c.name .. ': the values and the counters of a separate implementation', function()
      local g = gen(F.seed)
      g:set_state { seed = F.seed, offset = c.offset }
      local got = list(assert(load('local torch, g = ...; return ' .. c.call))(torch, g))
      assert.are.equal(#c.values, #got)
      -- exact, but for the normals' log, cos and sin (a GPU's may differ in the last bit)
      local tol = (c.name:find('randn') or c.name:find('normal_')) and 1e-6 or 0
      for i, want in ipairs(c.values) do
        assert(math.abs(got[i] - want) <= tol * math.max(1, math.abs(want)),
          ('%s: element %d is %.17g, expected %.17g'):format(c.name, i, got[i], want))
      end
      assert.are.equal(c.after, g.offset, c.name .. ': counters used')
    end)
  end

  it('dropout masks: four per call from the global stream, which moves on by the calls used', function()
    torch.manual_seed(F.seed)
    local y = torch.nn.functional.dropout(torch.ones(11), F.dropout.p, true)
    local next_draw = torch.rand(5)
    assert.are.same(F.dropout.values, list(y))
    -- 11 elements took 3 calls: the global stream's next draw is the generator's at offset 3
    local g = gen(F.seed)
    g:set_state { seed = F.seed, offset = 3 }
    assert.is_true(same(next_draw, torch.rand(5, { generator = g })))
  end)

  it('a draw continues where the same draw of fewer elements stops, at whole calls', function()
    for _, dt in ipairs({ 'float32', 'float64' }) do
      local per = dt == 'float32' and 4 or 2
      local g1, g2 = gen(77), gen(77)
      local whole = torch.randn(4 * per, { generator = g1, dtype = dt })
      local first = torch.randn(per, { generator = g2, dtype = dt })   -- one call
      local rest = torch.randn(3 * per, { generator = g2, dtype = dt })
      assert.is_true(same(whole, torch.cat({ first, rest })), dt)
      assert.are.equal(4, g1.offset, dt)
    end
  end)
end)

describe('distributions', function()
  it('multinomial with replacement: frequencies within 5 sigma, 1-based, zero weights never drawn', function()
    local p = { 0.1, 0.2, 0.0, 0.3, 0.4 }
    local N = 20000
    local draws = list(torch.multinomial(torch.tensor(p) * 3, N, { replacement = true, generator = gen(1) }))
    local count = {}
    for _, v in ipairs(draws) do count[v] = (count[v] or 0) + 1 end
    assert.is_nil(count[0]); assert.is_nil(count[3]); assert.is_nil(count[6])
    for k, pk in ipairs(p) do
      if pk > 0 then near(count[k] / N, pk, math.sqrt(pk * (1 - pk) / N), 'category ' .. k) end
    end
  end)

  it('multinomial without replacement: no repeats, first draws in proportion to the weights', function()
    local w = torch.tensor { 1.0, 2, 3, 4, 0 }
    local R = 4000
    local probs = w:reshape(1, 5):expand(R, 5):contiguous()
    local d = torch.multinomial(probs, 4, { generator = gen(2) })
    assert.are.same({ R, 4 }, { d:size(1), d:size(2) })
    local rows = d:tolist()
    local first = {}
    for _, row in ipairs(rows) do
      local seen = {}
      for _, v in ipairs(row) do
        assert(v >= 1 and v <= 4, 'drew category ' .. v)
        assert(not seen[v], 'a row repeats category ' .. v)
        seen[v] = true
      end
      first[row[1]] = (first[row[1]] or 0) + 1
    end
    for k = 1, 4 do near(first[k] / R, k / 10, math.sqrt(k / 10 * (1 - k / 10) / R), 'first draw ' .. k) end
    -- the second draw: P(2nd = k) = sum_j p_j p_k / (1 - p_j)
    local second = {}
    for _, row in ipairs(rows) do second[row[2]] = (second[row[2]] or 0) + 1 end
    for k = 1, 4 do
      local pk = 0
      for j = 1, 4 do if j ~= k then pk = pk + (j / 10) * (k / 10) / (1 - j / 10) end end
      near(second[k] / R, pk, math.sqrt(pk * (1 - pk) / R), 'second draw ' .. k)
    end
    -- every category with weight, once each
    local all = torch.multinomial(torch.tensor { 0.5, 0.1, 0.4 }, 3, { generator = gen(3) })
    local s = all:tolist(); table.sort(s)
    assert.are.same({ 1, 2, 3 }, s)
  end)

  it('bernoulli, bernoulli_, exponential_, normal and random_ have their moments', function()
    local N = 40000
    local g = gen(9)
    local p = torch.rand(N, { generator = g }) * 0.8 + 0.1
    local b = torch.bernoulli(p, { generator = g })
    assert.are.equal('float32', b.dtype)
    local want = p:double():sum():item()
    local var = (p:double() * (1 - p:double())):sum():item()
    near(b:double():sum():item(), want, math.sqrt(var), 'bernoulli(p) total')
    local b2 = torch.zeros(N, { dtype = 'float64' }):bernoulli_(0.3, { generator = g })
    near(b2:mean():item(), 0.3, math.sqrt(0.21 / N), 'bernoulli_(0.3)')
    local e = torch.empty(N, { dtype = 'float64' }):exponential_(2, { generator = g })
    assert(e:min():item() >= 0)
    near(e:mean():item(), 0.5, 0.5 / math.sqrt(N), 'exponential_(2) mean')
    near((e:gt(1)):double():mean():item(), math.exp(-2), math.sqrt(math.exp(-2) * (1 - math.exp(-2)) / N), 'P(E > 1)')
    local z = torch.normal(torch.full({ N }, 3.0, { dtype = 'float64' }), 2.0, { generator = g })
    near(z:mean():item(), 3, 2 / math.sqrt(N), 'normal mean')
    local sd = z:std():item()
    assert(math.abs(sd - 2) < 0.05, 'normal std ' .. sd)
    local r = torch.empty(N, { dtype = 'int64' }):random_(3, 9, { generator = g })
    assert(r:min():item() == 3 and r:max():item() == 8)
    for v = 3, 8 do near(r:eq(v):double():mean():item(), 1 / 6, math.sqrt(5 / 36 / N), 'random_ value ' .. v) end
    local ri = torch.randint(-2, 3, { N }, { generator = g })
    assert(ri:min():item() == -2 and ri:max():item() == 2)
    local perm = torch.randperm(50, { generator = g }):tolist()
    table.sort(perm)
    for i = 1, 50 do assert.are.equal(i, perm[i]) end
  end)

  it('normal is differentiable in mean and std, as PyTorch', function()
    local m = torch.zeros(3, { requires_grad = true })
    local s = torch.ones(3, { requires_grad = true })
    local z = torch.normal(m, s, { generator = gen(1) })
    z:sum():backward()
    assert.are.same({ 1, 1, 1 }, m.grad:tolist())
    assert.is_true(same(s.grad, z:detach()))
  end)
end)

describe('random errors', function()
  it('name what was wrong', function()
    expect_error(function() torch.multinomial(torch.tensor { 0.5, -0.1 }, 1) end, 'element < 0')
    expect_error(function() torch.multinomial(torch.tensor { 0.0, 0 }, 1) end, 'sum of probabilities <= 0')
    expect_error(function() torch.multinomial(torch.tensor { 1.0, 2 }, 3) end, 'cannot sample n_sample > prob_dist.size(-1) samples without replacement')
    expect_error(function() torch.multinomial(torch.tensor { 1.0, 0, 2 }, 3) end, 'not enough non-negative category')
    expect_error(function() torch.multinomial(torch.tensor { 1.0, 2 }, 0) end, 'n_sample <= 0')
    expect_error(function() torch.multinomial(torch.ones(2, 2, 2), 1) end, 'prob_dist must be 1 or 2 dim')
    expect_error(function() torch.multinomial(torch.tensor { 1, 2 }, 1) end, 'only supports floating-point dtypes')
    expect_error(function() torch.multinomial(torch.tensor { 1.0, 2 }, 1, { replace = true }) end, 'unknown option replace')
    expect_error(function() torch.bernoulli(torch.tensor { 0.5, 1.5 }) end, 'probabilities must be in [0, 1]')
    expect_error(function() torch.empty(2):bernoulli_(2) end, 'p must be in [0, 1], got 2')
    expect_error(function() torch.empty(2):exponential_(0) end, 'expects lambda > 0.0')
    expect_error(function() torch.normal(0, -1, { 2 }) end, 'std must be >= 0')
    expect_error(function() torch.normal(0, 1) end, 'give the size')
    expect_error(function() torch.rand(2, { generator = 'seed' }) end, 'generator must be a torch.Generator')
    expect_error(function() torch.randint(5, 5, { 2 }, { generator = gen(1) }) end, 'high (5) must be greater than low (5)')
    expect_error(function() torch.zeros(2, { dtype = 'int64' }):uniform_(0, 1, { generator = gen(1) }) end, 'floating point')
    expect_error(function() torch.empty(2):random_(5, 2, { generator = gen(1) }) end, "expects 'from' to be less than 'to'")
  end)
end)
