-- spec/signatures_spec.lua: every op of lua/torch/signatures.lua takes its arguments as its
-- signature says: by position or as options, each meaning PyTorch's keyword, with tables of
-- dims where PyTorch takes tuples; an unknown option, a wrong type or a value outside an
-- enum is an error naming the op, the option and the value.  Values against PyTorch 1.13
-- (spec/fixtures/signatures.lua, written by make_signatures.py).
local torch = require 'torch'
local signature = require 'torch.signature'
local check = dofile('spec/helpers/check.lua')
local fixture = dofile('spec/fixtures/signatures.lua')

local function tol_of(dtype)
  if dtype == 'float16' then return 2e-3 end
  if dtype == 'float32' then return 2e-5 end
  return 1e-12
end

describe('signatures: results against PyTorch', function()
  local env = setmetatable({ torch = torch }, { __index = _G })
  for name, code in pairs(fixture.inputs) do env[name] = assert(load('return ' .. code, name, 't', env))() end

  for _, case in ipairs(fixture.cases) do
    it(case.lua .. '  (PyTorch: ' .. case.torch .. ')', function()
      local f = assert(load('return ' .. case.lua, case.lua, 't', env))
      local res = table.pack(pcall(f))
      if case.error then
        assert(not res[1], ('PyTorch raises "%s"; dplua gave a result'):format(case.error))
        return
      end
      assert(res[1], res[2])
      if case.list then   -- one table of tensors
        assert.are.equal(2, res.n, 'one result')
        res = table.pack(nil, table.unpack(res[2]))
      end
      assert.are.equal(#case.outputs, res.n - 1, 'number of results')
      for i, want in ipairs(case.outputs) do
        local got = res[i + 1]
        assert.is_true(torch.is_tensor(got), 'result ' .. i .. ' is a tensor')
        assert.are.equal(want.dtype, got.dtype, 'dtype of result ' .. i)
        assert.are.same(want.shape, got:size():totable(), 'shape of result ' .. i)
        local vals = check.flat(got:tolist())
        if got:dim() == 0 then vals = { got:item() } end
        assert.are.equal(#want.values, #vals, 'number of values')
        for k, w in ipairs(want.values) do
          local g = vals[k]
          assert(check.same_number(g, w, tol_of(want.dtype)),
            ('value %d of result %d: %s, PyTorch %s'):format(k, i, tostring(g), tostring(w)))
        end
      end
    end)
  end
end)

-- a 2-D float tensor, and inputs that suit each parameter type, to call every op with
local function sample_tensor() return torch.tensor({ { 1.5, -2.0, 3.25 }, { 0.5, 4.0, -1.0 } }) end
local SAMPLE = {
  dim = 2, dims = 2, int = 1, ['int[]'] = { 1 }, bool = true, Scalar = 2, float = 2.0, dtype = 'float64',
  ['Tensor|Scalar'] = 2, ['Scalar|str'] = 2, Tensor = sample_tensor,
}
local WRONG = {   -- a value of the wrong type for each parameter type
  dim = 'a', dims = 'a', int = 'a', ['int[]'] = 'a', bool = {}, Scalar = 'a', float = 'a', dtype = 'floot',
  ['Tensor|Scalar'] = 'a', ['Scalar|str'] = {}, Tensor = 'a',
}

-- samples for a parameter by its name and type, where the type alone does not say enough
local NAMED = {
  ['index Tensor'] = function() return torch.tensor({ { 1, 2, 1 }, { 2, 1, 1 } }) end,
  ['index Tensor|int[]'] = { 1, 3 }, ['index int'] = 1,
  ['tensors Tensor[]'] = function() return { sample_tensor(), sample_tensor() } end,
  ['repeats Tensor|int[]'] = 2, ['split_size_or_sections int|int[]'] = 1,
  ['indices_or_sections int|int[]|Tensor'] = 2, ['chunks int'] = 2, ['k int'] = 1, ['start int|Tensor'] = 1,
  ['length int'] = 1, ['shifts int[]'] = { 1 }, ['other Tensor|Scalar'] = 2, ['src Tensor|Scalar'] = 2,
  ['src Tensor'] = sample_tensor,
  ['bins int|Tensor'] = 4,
  ['other Tensor'] = sample_tensor, ['weight Tensor'] = function() return torch.tensor({ 0.25, 0.5 }) end,
  ['normalized_shape int[]'] = { 4 }, ['num_groups int'] = 2, ['upscale_factor int'] = 1,
  ['downscale_factor int'] = 1, ['size int'] = 2, ['step int'] = 1,
  ['input Tensor'] = function() return torch.arange(0, 16):float():reshape(1, 2, 2, 4) end,
}

-- the positional arguments to call an op with, where its required ones are not enough
local BASE_ARGS = {
  ['F.interpolate'] = function() return { torch.arange(0, 16):float():reshape(1, 2, 2, 4), 3 } end,
  ['F.one_hot'] = function() return { torch.tensor({ 1, 3, 2 }) } end,
  ['F.max_pool1d'] = function() return { torch.arange(0, 8):float():reshape(1, 2, 4), 2 } end,
  ['F.max_pool2d'] = function() return { torch.arange(0, 16):float():reshape(1, 1, 4, 4), 2 } end,
  ['F.avg_pool1d'] = function() return { torch.arange(0, 8):float():reshape(1, 2, 4), 2 } end,
  ['F.avg_pool2d'] = function() return { torch.arange(0, 16):float():reshape(1, 1, 4, 4), 2 } end,
  ['F.batch_norm'] = function() return { torch.arange(0, 8):float():reshape(2, 2, 2), torch.zeros(2), torch.ones(2) } end,
  diag_embed = function() return { torch.ones(2, 3) } end,
  ['F.conv1d'] = function() return { torch.ones(1, 2, 5), torch.ones(3, 2, 2) } end,
  ['F.conv2d'] = function() return { torch.ones(1, 2, 5, 5), torch.ones(3, 2, 2, 2) } end,
  ['F.conv3d'] = function() return { torch.ones(1, 2, 4, 4, 4), torch.ones(3, 2, 2, 2, 2) } end,
  ['F.conv_transpose1d'] = function() return { torch.ones(1, 2, 5), torch.ones(2, 3, 2) } end,
  ['F.conv_transpose2d'] = function() return { torch.ones(1, 2, 5, 5), torch.ones(2, 3, 2, 2) } end,
  ['F.conv_transpose3d'] = function() return { torch.ones(1, 2, 3, 3, 3), torch.ones(2, 3, 2, 2, 2) } end,
  ['F.unfold'] = function() return { torch.arange(0, 16):float():reshape(1, 1, 4, 4), 2 } end,
  ['F.fold'] = function() return { torch.arange(0, 36):float():reshape(1, 4, 9), { 4, 4 }, 2 } end,
  index_put_ = function() return { torch.zeros(3), { torch.tensor({ 1, 1 }) }, torch.tensor({ 1.0, 2.0 }) } end,
  index_put = function() return { torch.zeros(3), { torch.tensor({ 1, 1 }) }, torch.tensor({ 1.0, 2.0 }) } end,
  backward = function() return { (torch.ones(2, { requires_grad = true }) * 2):sum(), torch.tensor(1.0), true } end,
  put_ = function() return { torch.zeros(2, 3), torch.tensor({ 1, 4 }), torch.tensor({ 1.0, 2.0 }) } end,
  put = function() return { torch.zeros(2, 3), torch.tensor({ 1, 4 }), torch.tensor({ 1.0, 2.0 }) } end,
  cross = function() return { torch.ones(2, 3), torch.arange(0, 6):float():reshape(2, 3) } end,
}

local function sample_of(p)
  local v = NAMED[p.name .. ' ' .. p.type_text]
  if v == nil then v = SAMPLE[p.type_text] end
  if type(v) == 'function' then v = v() end
  if v == nil and p.type_text:match('^str{') then v = p.type_text:match('^str{([^,}]+)') end
  return v
end

-- the first n values of list, then the extra values
local function args_of(list, n, ...)
  local out = {}
  for i = 1, n do out[i] = list[i] end
  local extra = table.pack(...)
  for i = 1, extra.n do out[n + i] = extra[i] end
  return out, n + extra.n
end

local function call(fn, list, n, ...)
  local args, m = args_of(list, n, ...)
  return table.pack(pcall(fn, table.unpack(args, 1, m)))
end

local function same_value(x, y)
  if torch.is_tensor(x) then
    return torch.is_tensor(y) and x.dtype == y.dtype and torch.equal(x, y)
  elseif type(x) == 'table' then   -- a table of tensors (split, unbind, ...)
    if type(y) ~= 'table' or #x ~= #y then return false end
    for i = 1, #x do
      if not same_value(x[i], y[i]) then return false end
    end
    return true
  end
  return x == y
end

local function same_results(a, b)
  if a.n ~= b.n then return false end
  for i = 1, a.n do
    if not same_value(a[i], b[i]) then return false end
  end
  return true
end

describe('signatures: every op of the table', function()
  require 'nn'
  local rows = require('torch.signatures').list
  local function target(r)
    if r.module == 'Tensor' then return torch.Tensor end
    return r.module == 'F' and torch.nn.functional or torch
  end

  it('is the table of doc/signatures.md (build/dplua tools/signatures.lua > doc/signatures.md)', function()
    local f = assert(io.open('doc/signatures.md'))
    local page = f:read('a')
    f:close()
    assert(page == require('torch.signatures').markdown(),
      'doc/signatures.md is out of date: build/dplua tools/signatures.lua > doc/signatures.md')
  end)

  it('has a signature for each op, parsed and registered on torch and Tensor', function()
    assert.is_true(#rows >= 30)
    for _, r in ipairs(rows) do
      local lines = signature.lines(target(r)[r.name])
      assert(lines, r.name .. ' has no signature')
      assert.are.same(r.lines, lines)
      if not r.module and rawget(torch.Tensor, r.name) ~= nil then
        assert.are.same(r.lines, signature.lines(rawget(torch.Tensor, r.name)))
      end
    end
  end)

  -- For every form of every op: each parameter with a default passed by position and as an
  -- option gives the same result as its default left out; a misspelled option, and a value
  -- of the wrong type by position and as an option, are errors that name the op and the
  -- parameter.
  for _, r in ipairs(rows) do
    for _, line in ipairs(r.lines) do
      local sig = signature.parse(line)
      it(line, function()
        local fn = target(r)[r.name]
        local key = r.module == 'F' and 'F.' .. r.name or r.name
        local base = {}
        for i, p in ipairs(sig.params) do
          if not p.has_default and not p.optional then base[i] = sample_of(p) end
          assert(BASE_ARGS[key] or p.has_default or p.optional or base[i] ~= nil, 'no sample for ' .. p.type_text)
        end
        local nreq = 0
        for i, p in ipairs(sig.params) do if base[i] ~= nil and not p.kwonly then nreq = i end end
        if BASE_ARGS[key] then   -- an op whose arguments depend on each other
          base = BASE_ARGS[key]()
          nreq = #base
        end
        local ref = call(fn, base, nreq)
        assert(ref[1], ('%s with its required arguments: %s'):format(line, tostring(ref[2])))
        for i, p in ipairs(sig.params) do
          if p.has_default and p.default ~= nil and type(p.default) ~= 'table' then
            local opts = { [p.name] = p.default }
            local by_opt = call(fn, base, nreq, opts)
            assert(by_opt[1], ('%s {%s = %s}: %s'):format(r.name, p.name, tostring(p.default), tostring(by_opt[2])))
            assert(same_results(ref, by_opt), ('%s: option %s = its default changes the result'):format(r.name, p.name))
            if not p.kwonly and i == nreq + 1 then
              local by_pos = call(fn, base, nreq, p.default)
              assert(by_pos[1], tostring(by_pos[2]))
              assert(same_results(ref, by_pos), ('%s: argument %s = its default changes the result'):format(r.name, p.name))
            end
          end
          if p.name ~= 'self' then
            local wrong = WRONG[p.type_text] or (p.type_text:match('^str{') and 'no-such-mode')
            if wrong ~= nil then
              local args, m = args_of(base, nreq, { [p.name] = wrong })
              if not p.kwonly and i <= nreq then args[i] = nil end
              local e = check.err(fn, table.unpack(args, 1, m))
              if #r.lines == 1 then
                assert(e:find(r.name .. ':', 1, true) and e:find(p.name, 1, true),
                  ('%s: the error for a wrong %s names neither: %s'):format(r.name, p.name, e))
              end
            end
          end
        end
        local args, m = args_of(base, nreq, { no_such_option = 1 })
        local e = check.err(fn, table.unpack(args, 1, m))
        assert(e:find(r.name .. ':', 1, true) and e:find('no_such_option', 1, true),
          ('%s: a misspelled option gives "%s"'):format(r.name, e))
      end)
    end
  end
end)

describe('signatures: calls', function()
  local x = torch.tensor({ { 1.5, -2.0, 3.25 }, { 0.5, 4.0, -1.0 } })

  it('refuse a misspelled option, naming the op, the option, its value and the options there are', function()
    check.expect_error(function() return x:sum(2, { keepdm = false }) end,
      'sum: unknown option keepdm = false (the options are dim, keepdim, dtype)')
  end)

  it('refuse a value of the wrong type, naming the parameter and the value', function()
    check.expect_error(function() return x:sum(2, { keepdim = 'no' }) end, "sum: option keepdim must be a boolean, got 'no'")
    check.expect_error(function() return x:sum(2, { keepdim = {} }) end, 'sum: option keepdim must be a boolean, got the table {}')
    check.expect_error(function() return x:sum(2, { dtype = 'floot64' }) end, "sum: option dtype must be a dtype")
    check.expect_error(function() return torch.div(x, 2, { rounding_mode = 'round' }) end,
      "div: option rounding_mode must be 'trunc' or 'floor', got 'round'")
  end)

  it('refuse an argument given both by position and as an option', function()
    check.expect_error(function() return x:sum(2, { dim = 1 }) end, 'sum: dim given twice (as argument 2 and as an option)')
  end)

  it('refuse a table that mixes values and options', function()
    check.expect_error(function() return x:sum({ 2, keepdim = true }) end, 'sum: the last table mixes values and options')
  end)

  it('refuse too many arguments', function()
    check.expect_error(function() return x:sum(2, true, 3) end, 'sum: too many arguments (4 before the options)')
  end)

  it('name every form of an overloaded op when none fits', function()
    local e = check.expect_error(function() return x:max('a') end, 'max: no form of it takes (tensor, string)')
    assert.truthy(e:find('max(Tensor self, dim dim, bool keepdim=False)', 1, true))
  end)

  it("diagonal is a view, as PyTorch's: writes land in the tensor, the gradient lands on the diagonal", function()
    local y = torch.zeros(3, 4)
    y:diagonal(1):fill_(2)
    assert.are.same({ { 0, 2, 0, 0 }, { 0, 0, 2, 0 }, { 0, 0, 0, 2 } }, y:tolist())
    local w = torch.ones(2, 3, 3, { dtype = 'float64', requires_grad = true })
    local d = w:diagonal({ offset = -1, dim1 = 2, dim2 = 3 })
    assert.are.same({ 2, 2 }, d:size():totable())
    ;(d * torch.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { dtype = 'float64' })):sum():backward()
    assert.are.same({ { { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, { { 0, 0, 0 }, { 3, 0, 0 }, { 0, 4, 0 } } }, w.grad:tolist())
    check.expect_error(function() return torch.ones(3):diagonal() end, 'diagonal: expected a tensor with at least 2 dimensions, got 1')
    check.expect_error(function() return torch.ones(3, 3):diagonal(0, 2, -1) end, 'diagonal: dim1 and dim2 cannot be the same dimension (2)')
  end)

  it('Tensor:unfold is a view whose gradient adds up over overlapping windows', function()
    local x = torch.arange(0, 5, { dtype = 'float64' }):requires_grad_()
    local u = x:unfold(1, 3, 1)
    assert.are.same({ { 0, 1, 2 }, { 1, 2, 3 }, { 2, 3, 4 } }, u:tolist())
    u:sum():backward()
    assert.are.same({ 1, 2, 3, 2, 1 }, x.grad:tolist())          -- how many windows hold each element
    local y = torch.zeros(6)
    y:unfold(1, 2, 3):select(2, 2):fill_(7)                      -- the second element of each window
    assert.are.same({ 0, 7, 0, 0, 7, 0 }, y:tolist())
    check.expect_error(function() return torch.zeros(3):unfold(1, 4, 1) end, 'unfold: size 4 is larger than dimension 1')
    check.expect_error(function() return torch.zeros(3):unfold(1, 2, 0) end, 'unfold: step must be positive')
  end)

  it('backward takes retain_graph by position, as PyTorch; create_graph and inputs are refused, not ignored', function()
    local w = torch.ones(2, { requires_grad = true })
    local loss = (w * w):sum()
    loss:backward(nil, true)
    loss:backward()                       -- the graph was kept: a second pass adds
    assert.are.same({ 4, 4 }, w.grad:tolist())
    check.expect_error(function() loss:backward({ create_graph = true }) end, 'create_graph = true is not supported by t:backward')
    check.expect_error(function() loss:backward({ retain_grph = true }) end, 'backward: unknown option retain_grph')
    check.expect_error(function() return torch.tensor({ 0, 1 }):nonzero(true) end, 'nonzero')
  end)

  it('point at the caller', function()
    local e = check.err(function()
      local r = x:sum(2, { keepdm = 1 })   -- not a tail call: this frame is the caller
      return r
    end)
    assert.truthy(e:find('signatures_spec.lua:%d+: sum:'))
  end)

  it('reach help(), for the value and for its name', function()
    local function help_text(...)
      local lines, saved = {}, _G.print
      _G.print = function(s) lines[#lines + 1] = tostring(s) end
      local ok, e = pcall(torch.help, ...)
      _G.print = saved
      assert(ok, e)
      return table.concat(lines, '\n')
    end
    local line = 'sum(Tensor self, dims? dim=None, bool keepdim=False, *, dtype? dtype=None)'
    for _, what in ipairs { torch.sum, 'torch.sum', 'Tensor:sum' } do
      local text = help_text(what)
      assert(text:find(line, 1, true), ('help(%s) does not show the signature:\n%s'):format(tostring(what), text))
    end
  end)
end)
