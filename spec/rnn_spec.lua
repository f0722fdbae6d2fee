-- The recurrent layers (RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU): outputs, final states
-- and the gradients of the input, the initial state and every parameter against PyTorch 1.13
-- (spec/fixtures/rnn.lua, written by spec/fixtures/make_rnn.py, which also records the
-- weights so both sides start equal), parameter names and shapes, init bounds and errors.
local torch = require 'torch'
local nn = require 'nn'

local ref = dofile('spec/fixtures/rnn.lua')

local flat = dofile('spec/helpers/check.lua').flat

local function close(got, want, what, tol)
  assert(torch.is_tensor(got), what .. ': no tensor')
  local g, w = flat(got:tolist()), flat(want)
  assert.are.equal(#w, #g, what .. ': element count')
  tol = tol or 1e-10
  for i = 1, #w do
    assert(math.abs(g[i] - w[i]) <= tol * math.max(1, math.abs(w[i])),
      ('%s element %d: dplua %s, PyTorch %s'):format(what, i, tostring(g[i]), tostring(w[i])))
  end
end

local function f64(v, rg) return torch.tensor(v, { dtype = 'float64', requires_grad = rg or nil }) end

local function error_matches(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert(tostring(err):find(pattern, 1, true), ('error "%s" does not contain "%s"'):format(tostring(err), pattern))
end

-- builds the module of case c with its recorded weights
local function build(c)
  local m = nn[c.kind](c.args[1], c.args[2], c.opts):double()
  local sd = {}
  for name, v in pairs(c.params) do sd[name] = f64(v) end
  m:load_state_dict(sd)
  return m
end

local names = {}
for name in pairs(ref) do names[#names + 1] = name end
table.sort(names)

describe('recurrent layers against PyTorch 1.13', function()
  for _, name in ipairs(names) do
    local c = ref[name]
    it(name, function()
      local m = build(c)
      -- PyTorch's parameter names in PyTorch's order
      local order = {}
      for n in m:named_parameters() do order[#order + 1] = n end
      assert.are.same(c.order, order)

      local x = f64(c.x, true)
      local states = {}
      for i, s in ipairs(c.states) do states[i] = f64(s, true) end
      local outs
      if c.kind == 'LSTM' then
        local out, hc = m(x, #states > 0 and states or nil)
        outs = { out, hc[1], hc[2] }
      elseif c.kind == 'LSTMCell' then
        outs = { m(x, #states > 0 and states or nil) }
      elseif c.kind == 'RNN' or c.kind == 'GRU' then
        outs = { m(x, states[1]) }
      else
        outs = { m(x, states[1]) }
      end
      assert.are.equal(#c.outs, #outs)
      local loss
      for i, o in ipairs(outs) do
        close(o, c.outs[i], ('output %d'):format(i))
        local term = (o * f64(c.gouts[i])):sum()
        loss = loss and loss + term or term
      end
      loss:backward()
      close(x.grad, c.gx, 'input gradient')
      for i, s in ipairs(states) do close(s.grad, c.gstates[i], ('state %d gradient'):format(i)) end
      for n, p in m:named_parameters() do close(p.grad, c.gparams[n], n .. ' gradient') end
    end)
  end
end)

describe('recurrent layers', function()
  it('have PyTorch shapes and init bounds', function()
    local m = nn.LSTM(3, 5, { num_layers = 2, bidirectional = true })
    assert.are.same({ 20, 3 }, m.weight_ih_l0:size():totable())
    assert.are.same({ 20, 10 }, m.weight_ih_l1_reverse:size():totable())
    assert.are.same({ 20, 5 }, m.weight_hh_l1:size():totable())
    assert.are.same({ 20 }, m.bias_hh_l0_reverse:size():totable())
    local bound = 1 / math.sqrt(5)
    for _, p in ipairs(m:parameters()) do
      assert(p:abs():max():item() <= bound, 'a parameter outside U(-1/sqrt(hidden), 1/sqrt(hidden))')
      assert(p:abs():max():item() > bound / 2, 'a parameter that was not initialized')
    end
    local g = nn.GRUCell(2, 3, { bias = false })
    assert.are.same({ 9, 2 }, g.weight_ih:size():totable())
    assert.is_nil(g.bias_ih)
    assert.are.equal(2, #g:parameters())
  end)

  it('return zeros-started states of the right shape and keep batch_first', function()
    local m = nn.GRU(3, 4, { num_layers = 2, batch_first = true, bidirectional = true })
    local out, h = m(torch.randn(2, 7, 3))
    assert.are.same({ 2, 7, 8 }, out:size():totable())
    assert.are.same({ 4, 2, 4 }, h:size():totable())
    local c = nn.LSTMCell(3, 4)
    local h1, c1 = c(torch.randn(3))
    assert.are.same({ 4 }, h1:size():totable())
    assert.are.same({ 4 }, c1:size():totable())
  end)

  it('pass float64 gradchecks (LSTM with given states, 2 layers, bidirectional)', function()
    local m = nn.LSTM(2, 3, { num_layers = 2, bidirectional = true }):double()
    local x = torch.randn(3, 2, 2, { dtype = 'float64', requires_grad = true })
    local h0 = torch.randn(4, 2, 3, { dtype = 'float64', requires_grad = true })
    local c0 = torch.randn(4, 2, 3, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(a, b, c)
      local out, hc = m(a, { b, c })
      return { out, hc[1], hc[2] }
    end, { x, h0, c0 }))
    assert.is_true(torch.autograd.gradcheck(function(a) return (m(a)) end, { x }))
  end)

  it('apply dropout between layers only in training', function()
    local m = nn.RNN(3, 4, { num_layers = 2, dropout = 0.5 })
    local x = torch.randn(5, 2, 3)
    m:eval()
    local a = m(x)
    local b = m(x)
    assert.are.equal(0, (a - b):abs():max():item())
    m:train()
    assert(((m(x)) - a):abs():max():item() > 0, 'dropout 0.5 left the training output unchanged')
  end)

  it('name what was wrong with a bad input', function()
    local lstm = nn.LSTM(3, 4, { num_layers = 2 })
    error_matches(function() lstm(torch.randn(5, 2, 6)) end, 'expected input of shape [seq, batch, 3]')
    error_matches(function() lstm(torch.randn(5, 2, 6)) end, 'got [5, 2, 6]')
    error_matches(function() lstm(torch.randn(3)) end, 'got [3]')
    error_matches(function() lstm(torch.randn(0, 2, 3)) end, 'expected a sequence of at least one step, got input of shape [0, 2, 3]')
    error_matches(function() lstm(torch.randn(5, 2, 3), { torch.zeros(1, 2, 4), torch.zeros(2, 2, 4) }) end,
      'expected h_0 of shape [2, 2, 4], got [1, 2, 4]')
    error_matches(function() lstm(torch.randn(5, 2, 3), { torch.zeros(2, 2, 4), torch.zeros(2, 3, 4) }) end,
      'expected c_0 of shape [2, 2, 4], got [2, 3, 4]')
    error_matches(function() lstm(torch.randn(5, 2, 3), torch.zeros(2, 2, 4)) end, 'expected hx to be a table {h_0, c_0}')
    local gru = nn.GRU(3, 4, { batch_first = true })
    error_matches(function() gru(torch.randn(2, 5, 4)) end, 'expected input of shape [batch, seq, 3]')
    error_matches(function() gru(torch.randn(2, 5, 3), torch.zeros(1, 5, 4)) end,
      'expected h_0 of shape [1, 2, 4], got [1, 5, 4]')
    error_matches(function() gru('x') end, 'expected the input to be a tensor, got string')
    local cell = nn.LSTMCell(3, 4)
    error_matches(function() cell(torch.randn(2, 5)) end, 'expected input of shape [batch, 3] or [3], got [2, 5]')
    error_matches(function() cell(torch.randn(2, 3), { torch.zeros(2, 4), torch.zeros(3, 4) }) end,
      'expected c of shape [2, 4], got [3, 4]')
    error_matches(function() nn.RNNCell(3, 4)(torch.randn(2, 3), torch.zeros(2, 5)) end,
      'expected hx of shape [2, 4], got [2, 5]')
    error_matches(function() nn.RNN(3, 4, { nonlinearity = 'sigmoid' }) end,
      "nn.RNN: unknown nonlinearity 'sigmoid' (expected 'tanh' or 'relu')")
    error_matches(function() nn.LSTM(3, 0) end, 'nn.LSTM: hidden_size must be an integer >= 1, got 0')
    error_matches(function() nn.GRU(3, 4, { num_layers = 0 }) end, 'nn.GRU: num_layers must be an integer >= 1, got 0')
    error_matches(function() nn.GRU(3, 4, { dropout = 2 }) end, 'nn.GRU: dropout should be a number in [0, 1], got 2')
  end)
end)
