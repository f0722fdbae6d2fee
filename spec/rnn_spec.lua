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

-- The fused steps the layers above run on (torch._C.lstm_cell, torch._C.gru_cell) against
-- PyTorch's composition of chunk, sigmoid, tanh, mul and add (spec/fixtures/rnn_cell.lua,
-- written by spec/fixtures/make_rnn_cell.py), float64 gradchecks and their errors.
describe('fused LSTM and GRU steps', function()
  local C = require 'torch._C'
  local cells = dofile('spec/fixtures/rnn_cell.lua')
  local ops = { lstm = C.lstm_cell, gru = C.gru_cell }

  local function check_case(kind, dtype, make)
    local c = cells[kind .. '_' .. dtype]
    local tol = dtype == 'float64' and 1e-12 or 1e-5
    local xs, args = {}, {}
    for i, v in ipairs(c.inputs) do
      xs[i] = torch.tensor(v, { dtype = dtype, requires_grad = true })
      args[i] = make and make(xs[i]) or xs[i]
    end
    local outs = { ops[kind](table.unpack(args)) }
    assert.are.equal(#c.outs, #outs, kind .. ': result count')
    local loss
    for i, o in ipairs(outs) do
      close(o, c.outs[i], ('%s %s result %d'):format(kind, dtype, i), tol)
      local l = (o * torch.tensor(c.ups[i], { dtype = dtype })):sum()
      loss = loss and loss + l or l
    end
    loss:backward()
    for i, x in ipairs(xs) do close(x.grad, c.grads[i], ('%s %s grad of input %d'):format(kind, dtype, i), tol) end
  end

  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, kind in ipairs({ 'lstm', 'gru' }) do
      it(("match PyTorch's composition (%s, %s)"):format(kind, dtype), function() check_case(kind, dtype) end)
    end
  end

  it('take non-contiguous inputs', function()
    -- the same values through transposed copies: strides [1, batch]
    local function strided(x) return x:t():contiguous():t() end
    check_case('lstm', 'float64', strided)
    check_case('gru', 'float64', strided)
  end)

  it('pass float64 gradchecks, with either LSTM result unused', function()
    local function r(a, b) return torch.randn(a, b, { dtype = 'float64', requires_grad = true }) end
    local gates, c0 = r(3, 8), r(3, 2)
    local gradcheck = torch.autograd.gradcheck
    assert.is_true(gradcheck(function(a, b)
      local h, c = C.lstm_cell(a, b)
      return { h, c }
    end, { gates, c0 }))
    assert.is_true(gradcheck(function(a, b) return (C.lstm_cell(a, b)) end, { gates, c0 }))
    assert.is_true(gradcheck(function(a, b) return select(2, C.lstm_cell(a, b)) end, { gates, c0 }))
    assert.is_true(gradcheck(function(a) return (C.lstm_cell(a, c0:detach())) end, { gates }))
    local gi, gh, h0 = r(3, 6), r(3, 6), r(3, 2)
    assert.is_true(gradcheck(function(a, b, c) return C.gru_cell(a, b, c) end, { gi, gh, h0 }))
    assert.is_true(gradcheck(function(c) return C.gru_cell(gi:detach(), gh:detach(), c) end, { h0 }))
  end)

  it('run the float16 and bfloat16 layers in float32', function()
    local c = ref.lstmcell
    for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
      local m = build(c):to(dtype)
      local h, cn = m(torch.tensor(c.x, { dtype = dtype }), {
        torch.tensor(c.states[1], { dtype = dtype }), torch.tensor(c.states[2], { dtype = dtype }) })
      assert.are.equal(dtype, h.dtype)
      close(h:double(), c.outs[1], 'LSTMCell ' .. dtype .. ' h', 5e-2)
      close(cn:double(), c.outs[2], 'LSTMCell ' .. dtype .. ' c', 5e-2)
    end
  end)

  it('give empty results for an empty batch', function()
    local h, c = C.lstm_cell(torch.randn(0, 8), torch.randn(0, 2))
    assert.are.same({ 0, 2 }, h:size():totable())
    assert.are.same({ 0, 2 }, c:size():totable())
    assert.are.same({ 0, 3 }, C.gru_cell(torch.randn(0, 9), torch.randn(0, 9), torch.randn(0, 3)):size():totable())
  end)

  it('name what was wrong with a bad input', function()
    error_matches(function() C.lstm_cell(torch.randn(3, 7), torch.randn(3, 2)) end,
      'lstm_cell: expected gates of shape [batch, 4 * hidden_size], got [3, 7]')
    error_matches(function() C.lstm_cell(torch.randn(3, 8), torch.randn(2, 2)) end,
      'lstm_cell: expected c_prev of shape [3, 2], got [2, 2]')
    error_matches(function() C.lstm_cell(torch.randn(8), torch.randn(2)) end, 'got [8]')
    error_matches(function() C.gru_cell(torch.randn(3, 6), torch.randn(3, 6, { dtype = 'float64' }), torch.randn(3, 2)) end,
      'gru_cell: gh must have the dtype of the first input (float32), got float64')
    error_matches(function() C.gru_cell(torch.randn(3, 6), torch.randn(3, 3), torch.randn(3, 2)) end,
      'gru_cell: expected gh of shape [3, 6], got [3, 3]')
    error_matches(function() C.gru_cell(torch.ones(3, 6, { dtype = 'int64' }), torch.randn(3, 6), torch.randn(3, 2)) end,
      'gru_cell: expected gi of dtype float32 or float64, got int64')
  end)
end)
