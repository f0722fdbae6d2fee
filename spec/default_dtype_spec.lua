-- default_dtype: the floating results of integer and bool operands follow the default dtype
-- (torch.set_default_dtype) as PyTorch 1.13's result_type does: an integer tensor with a Lua
-- float, true division of integers, unary float ops on integers, and the creation functions
-- give float32 or float64 as the default is; a floating tensor's dtype (float32, float16,
-- bfloat16) wins over a number and over an integer tensor.  Each case is evaluated under both
-- default dtypes against PyTorch's result dtype and values (spec/fixtures/make_default_dtype.py).
local torch = require 'torch'
local cases = dofile('spec/fixtures/default_dtype.lua')

local function inputs()
  return {
    torch = torch,
    i = torch.tensor({ 1, 2, -3 }), j = torch.tensor({ 2, 3, 4 }), b = torch.tensor({ true, false, true }),
    f32 = torch.tensor({ 1.0, 2.0, 3.0 }, { dtype = 'float32' }),
    h = torch.tensor({ 1.0, 2.0, 3.0 }, { dtype = 'float16' }),
    bf = torch.tensor({ 1.0, 2.0, 3.0 }, { dtype = 'bfloat16' }),
  }
end

-- the values of t, flattened, floating ones read as float64
local function values(t)
  if t.dtype ~= 'int64' and t.dtype ~= 'bool' then t = t:to('float64') end
  return t:reshape(-1):totable()
end

local function close(got, want, tol)
  if type(want) ~= 'number' or got == want then return got == want end
  if want ~= want then return got ~= got end
  return math.abs(got - want) <= tol * math.max(1, math.abs(want))
end

-- runs fn with the default dtype dd, restoring float32 even when fn fails
local function with_default(dd, fn)
  torch.set_default_dtype(dd)
  local ok, err = pcall(fn)
  torch.set_default_dtype('float32')
  if not ok then error(err, 0) end
end

describe('default dtype', function()
  for _, dd in ipairs { 'float32', 'float64' } do
    for _, c in ipairs(cases) do
      it(('%s under %s'):format(c.expr, dd), function()
        with_default(dd, function()
          local want = c[dd]
          local fn = assert(load('return ' .. c.expr, c.expr, 't', inputs()))
          local r = fn()
          assert.are.equal(want.dtype, r.dtype, c.expr)
          local got = values(r)
          assert.are.equal(#want.values, #got, c.expr)
          local tol = want.dtype == 'float64' and 1e-12 or want.dtype == 'float32' and 1e-6 or 1e-2
          for k = 1, #got do
            assert(close(got[k], want.values[k], tol),
              ('%s under %s: element %d is %s, PyTorch gives %s'):format(c.expr, dd, k, tostring(got[k]), tostring(want.values[k])))
          end
        end)
      end)
    end
  end

  it('an in-place float result into an integer tensor names the default dtype', function()
    -- PyTorch: "result type Double can't be cast to the desired output type Long"
    with_default('float64', function()
      local i = torch.tensor({ 1, 2 })
      local ok, err = pcall(function() i:div_(2) end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("result type float64 can't be cast to the desired output type int64", 1, true), err)
      ok, err = pcall(function() i:add_(1.5) end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("result type float64 can't be cast to the desired output type int64", 1, true), err)
      assert.are.same({ 1, 2 }, i:totable())
    end)
  end)

  it('prints the dtype of a floating tensor that is not the default, as PyTorch', function()
    -- PyTorch under float64: tensor([1.5000]), tensor([1.5000], dtype=torch.float32), tensor([])
    with_default('float64', function()
      assert.are.equal('tensor([1.5000])', tostring(torch.tensor({ 1.5 })))
      assert.are.equal('tensor([1.5000], dtype=float32)', tostring(torch.tensor({ 1.5 }, { dtype = 'float32' })))
      assert.are.equal('tensor([], dtype=float32)', tostring(torch.tensor({}, { dtype = 'float32' })))
      assert.are.equal('tensor([])', tostring(torch.tensor({})))
      assert.are.equal('tensor([1, 2])', tostring(torch.tensor({ 1, 2 })))
    end)
    assert.are.equal('tensor([1.5000], dtype=float64)', tostring(torch.tensor({ 1.5 }, { dtype = 'float64' })))
  end)

  it('refuses a default that is not floating', function()
    local ok, err = pcall(torch.set_default_dtype, 'int64')
    assert.is_false(ok)
    assert.truthy(tostring(err):find('only floating point dtypes', 1, true))
    assert.are.equal('float32', torch.get_default_dtype())
  end)
end)
