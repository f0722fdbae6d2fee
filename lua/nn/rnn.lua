-- The recurrent layers, compositions of linear, sigmoid, tanh and chunk with PyTorch 1.13's
-- parameter names, shapes, gate order and initialization, so its state_dicts load as they are.
--
-- nn.RNNCell(input_size, hidden_size [, {bias=true, nonlinearity='tanh', device=, dtype=}])
-- nn.LSTMCell(input_size, hidden_size [, {bias=true, device=, dtype=}])
-- nn.GRUCell(input_size, hidden_size [, {bias=true, device=, dtype=}])
--   cell(input [, hx]): one step; input is [batch, input_size] or [input_size]; hx (zeros
--   when absent) is h for RNNCell and GRUCell and {h, c} for LSTMCell, which returns h, c.
--   Parameters weight_ih [G*hidden, input], weight_hh [G*hidden, hidden], bias_ih, bias_hh
--   [G*hidden] with G = 1, 4 (gates i, f, g, o) or 3 (r, z, n).
-- nn.RNN / nn.LSTM / nn.GRU(input_size, hidden_size [, {num_layers=1, bias=true,
--   batch_first=false, dropout=0, bidirectional=false, nonlinearity='tanh' (RNN only),
--   device=, dtype=}])
--   m(input [, hx]): input [seq, batch, input_size] ([batch, seq, ...] with batch_first) or
--   unbatched [seq, input_size]; hx [num_layers * directions, batch, hidden] (zeros when
--   absent), {h_0, c_0} for LSTM.  Returns output [seq, batch, directions * hidden] and
--   h_n, or output and {h_n, c_n} for LSTM.  Parameters weight_ih_l<k>, weight_hh_l<k>,
--   bias_ih_l<k>, bias_hh_l<k>, with the suffix _reverse for the backward direction.
--   The input may also be a PackedSequence (nn.utils.rnn.pack_padded_sequence ...): the
--   output is then packed too and h_n is each sequence's state after its last valid step.
--
-- The LSTM and GRU steps run on fused gate kernels (src/rnn_cell.c).
--
-- All weights are drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as in PyTorch.
local torch = require 'torch'
local Parameter = require 'nn.Parameter'
local F = require 'nn.functional'
local utils = require 'nn.utils'
local C = require 'torch._C'

local function check_size(who, what, n, min)
  if math.type(n) ~= 'integer' or n < (min or 0) then
    utils.error(('%s: %s must be an integer >= %d, got %s'):format(who, what, min or 0, tostring(n)))
  end
end

local function shape_of(list)
  return '[' .. table.concat(list, ', ') .. ']'
end

local function same_shape(t, list)
  if t:dim() ~= #list then return false end
  for i = 1, #list do
    if t:size(i) ~= list[i] then return false end
  end
  return true
end

local function init_uniform(params, hidden_size)
  local bound = hidden_size > 0 and 1 / math.sqrt(hidden_size) or 0
  torch.no_grad(function()
    for _, p in ipairs(params) do p:uniform_(-bound, bound) end
  end)
end

-- ---------------------------------------------------------------- one time step

-- gi = W_ih x + b_ih (computed once for the whole sequence by the layers), h the state
local function rnn_step(act)
  return function(gi, h, w_hh, b_hh)
    return act(gi + F.linear(h, w_hh, b_hh))
  end
end

local step = {
  RNN_TANH = rnn_step(torch.tanh),
  RNN_RELU = rnn_step(F.relu),
}

-- The gate arithmetic of an LSTM or GRU step is one fused op (torch._C.lstm_cell and
-- gru_cell, src/rnn_cell.c) instead of ten or so elementwise ops.  They take [batch, G*hidden]
-- rows of float32 or float64: an unbatched step is a batch of one, and float16 / bfloat16
-- compute in float32 inside (as every other op does, src/half.c) and convert back.
local function fused(fn, ...)
  local args = { ... }
  local one, dtype = args[1]:dim() == 1, args[1].dtype
  local half = dtype == 'float16' or dtype == 'bfloat16'
  for k, t in ipairs(args) do
    if one then t = t:unsqueeze(1) end
    args[k] = half and t:float() or t
  end
  local outs = { fn(table.unpack(args)) }
  for k, t in ipairs(outs) do
    if half then t = t:to(dtype) end
    outs[k] = one and t:squeeze(1) or t
  end
  return table.unpack(outs)
end

-- c = sigmoid(f) * c + sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c) for the gates i, f, g, o
function step.LSTM(gi, hc, w_hh, b_hh)
  local h, c = fused(C.lstm_cell, gi + F.linear(hc[1], w_hh, b_hh), hc[2])
  return { h, c }
end

-- r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r * h_n), (1 - z) * n + z * h
function step.GRU(gi, h, w_hh, b_hh)
  return (fused(C.gru_cell, gi, F.linear(h, w_hh, b_hh), h))
end

local gates = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

local function mode_of(who, kind, nonlinearity)
  if kind ~= 'RNN' then return kind end
  if nonlinearity == 'tanh' then return 'RNN_TANH' end
  if nonlinearity == 'relu' then return 'RNN_RELU' end
  utils.error(("%s: unknown nonlinearity '%s' (expected 'tanh' or 'relu')"):format(who, tostring(nonlinearity)))
end

-- ---------------------------------------------------------------- cells

local RNNCellBase, parent = torch.class('nn.RNNCellBase', 'nn.Module')

function RNNCellBase:__init(kind, input_size, hidden_size, opts)
  parent.__init(self)
  local who = 'nn.' .. kind .. 'Cell'
  check_size(who, 'input_size', input_size)
  check_size(who, 'hidden_size', hidden_size)
  local defaults = { bias = true, device = false, dtype = false }
  if kind == 'RNN' then defaults.nonlinearity = 'tanh' end
  local o = utils.options(who, opts, defaults)
  self.mode = mode_of(who, kind, o.nonlinearity)
  self.nonlinearity = o.nonlinearity
  self.input_size, self.hidden_size, self.bias = input_size, hidden_size, o.bias
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  local G = gates[self.mode] * hidden_size
  self.weight_ih = Parameter(torch.empty(G, input_size, topts))
  self.weight_hh = Parameter(torch.empty(G, hidden_size, topts))
  if o.bias then
    self.bias_ih = Parameter(torch.empty(G, topts))
    self.bias_hh = Parameter(torch.empty(G, topts))
  end
  self:reset_parameters()
end

function RNNCellBase:reset_parameters()
  init_uniform(self:parameters(), self.hidden_size)
end

local function zeros_like_state(x, shape)
  return torch.zeros(shape, { dtype = x.dtype, device = x.device })
end

function RNNCellBase:_check_state(t, what, shape)
  if not torch.is_tensor(t) then
    utils.error(('%s: expected %s to be a tensor, got %s'):format(tostring(self), what, type(t)))
  end
  if not same_shape(t, shape) then
    utils.error(('%s: expected %s of shape %s, got %s'):format(tostring(self), what, shape_of(shape),
      utils.shape(t)))
  end
  return t
end

function RNNCellBase:forward(x, hx)
  utils.check_tensor(tostring(self), x)
  if (x:dim() ~= 1 and x:dim() ~= 2) or x:size(x:dim()) ~= self.input_size then
    utils.error(('%s: expected input of shape [batch, %d] or [%d], got %s'):format(tostring(self),
      self.input_size, self.input_size, utils.shape(x)))
  end
  local shape = x:dim() == 2 and { x:size(1), self.hidden_size } or { self.hidden_size }
  local state
  if self.mode == 'LSTM' then
    if hx == nil then
      state = { zeros_like_state(x, shape), zeros_like_state(x, shape) }
    else
      if type(hx) ~= 'table' or torch.is_tensor(hx) then
        utils.error(('%s: expected hx to be a table {h, c}, got %s'):format(tostring(self), utils.shape(hx)))
      end
      state = { self:_check_state(hx[1], 'h', shape), self:_check_state(hx[2], 'c', shape) }
    end
  else
    state = hx == nil and zeros_like_state(x, shape) or self:_check_state(hx, 'hx', shape)
  end
  local out = step[self.mode](F.linear(x, self.weight_ih, self.bias_ih), state, self.weight_hh, self.bias_hh)
  if self.mode == 'LSTM' then return out[1], out[2] end
  return out
end

function RNNCellBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ', bias=false' end
  if self.nonlinearity and self.nonlinearity ~= 'tanh' then s = s .. ", nonlinearity='" .. self.nonlinearity .. "'" end
  return s
end

for _, kind in ipairs { 'RNN', 'LSTM', 'GRU' } do
  local cls, base = torch.class('nn.' .. kind .. 'Cell', 'nn.RNNCellBase')
  cls.__init = function(self, input_size, hidden_size, opts)
    base.__init(self, kind, input_size, hidden_size, opts)
  end
end

-- ---------------------------------------------------------------- multi-layer sequences

local RNNBase, rnn_parent = torch.class('nn.RNNBase', 'nn.Module')

function RNNBase:__init(kind, input_size, hidden_size, opts)
  rnn_parent.__init(self)
  local who = 'nn.' .. kind
  check_size(who, 'input_size', input_size)
  check_size(who, 'hidden_size', hidden_size, 1)
  local defaults = { num_layers = 1, bias = true, batch_first = false, dropout = 0, bidirectional = false,
                     device = false, dtype = false }
  if kind == 'RNN' then defaults.nonlinearity = 'tanh' end
  if kind == 'LSTM' then defaults.proj_size = 0 end
  local o = utils.options(who, opts, defaults)
  if kind == 'LSTM' and o.proj_size ~= 0 then
    utils.error(('%s: proj_size = %s is not supported (only 0, no projection)'):format(who, tostring(o.proj_size)))
  end
  check_size(who, 'num_layers', o.num_layers, 1)
  if type(o.dropout) ~= 'number' or o.dropout < 0 or o.dropout > 1 then
    utils.error(('%s: dropout should be a number in [0, 1], got %s'):format(who, tostring(o.dropout)))
  end
  self.mode = mode_of(who, kind, o.nonlinearity)
  self.nonlinearity = o.nonlinearity
  self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, o.num_layers
  self.bias, self.batch_first, self.dropout = o.bias, o.batch_first, o.dropout
  self.bidirectional = o.bidirectional
  local topts = { device = o.device or nil, dtype = o.dtype or nil }
  local G = gates[self.mode] * hidden_size
  local dirs = o.bidirectional and 2 or 1
  for layer = 0, o.num_layers - 1 do
    local in_size = layer == 0 and input_size or hidden_size * dirs
    for dir = 1, dirs do
      local sfx = ('_l%d%s'):format(layer, dir == 2 and '_reverse' or '')
      self['weight_ih' .. sfx] = Parameter(torch.empty(G, in_size, topts))
      self['weight_hh' .. sfx] = Parameter(torch.empty(G, hidden_size, topts))
      if o.bias then
        self['bias_ih' .. sfx] = Parameter(torch.empty(G, topts))
        self['bias_hh' .. sfx] = Parameter(torch.empty(G, topts))
      end
    end
  end
  self:reset_parameters()
end

function RNNBase:reset_parameters()
  init_uniform(self:parameters(), self.hidden_size)
end

-- Runs one direction of one layer over gi [seq, batch, G*hidden] from state; returns the
-- outputs (one [batch, hidden] per time step, in time order) and the final state.
local function run_direction(self, gi, state, w_hh, b_hh, reverse)
  local T = gi:size(1)
  local outs = {}
  local fn = step[self.mode]
  local lstm = self.mode == 'LSTM'
  for k = 1, T do
    local t = reverse and T - k + 1 or k
    state = fn(gi:select(1, t), state, w_hh, b_hh)
    outs[t] = lstm and state[1] or state
  end
  return outs, state
end

-- Runs one direction of one layer over a packed sequence: gi [sum, G*hidden] holds the
-- steps one after the other, sizes[t] rows each (the sequences still running, longest
-- first).  Rows past sizes[t] keep their state, so each sequence's final state is the one
-- after its own last step (forward) or after step 1 (reverse, which starts each sequence
-- at its last step from the initial state).  Returns the outputs [sum, hidden] and the
-- final state.
local function run_packed_direction(self, gi, sizes, state, w_hh, b_hh, reverse)
  local T, B = #sizes, sizes[1]
  local starts, at = {}, 1
  for t = 1, T do starts[t] = at; at = at + sizes[t] end
  local outs = {}
  local fn = step[self.mode]
  local lstm = self.mode == 'LSTM'
  local function head(s, n) return s:narrow(1, 1, n) end
  local function join(new, old, n)
    if n == B then return new end
    return torch.cat({ new, old:narrow(1, n + 1, B - n) }, 1)
  end
  for k = 1, T do
    local t = reverse and T - k + 1 or k
    local n = sizes[t]
    local g = gi:narrow(1, starts[t], n)
    if lstm then
      local new = fn(g, { head(state[1], n), head(state[2], n) }, w_hh, b_hh)
      state = { join(new[1], state[1], n), join(new[2], state[2], n) }
      outs[t] = new[1]
    else
      local new = fn(g, head(state, n), w_hh, b_hh)
      state = join(new, state, n)
      outs[t] = new
    end
  end
  return torch.cat(outs, 1), state
end

-- hx checked (a tensor of state_shape, or {h_0, c_0} of them for LSTM) and each state passed
-- through place (which gets nil for one not given); returns h0 and c0 (LSTM)
local function initial_states(name, lstm, hx, state_shape, place)
  local function one(t, what)
    if t ~= nil then
      if not torch.is_tensor(t) then utils.error(('%s: expected %s to be a tensor, got %s'):format(name, what, type(t))) end
      if not same_shape(t, state_shape) then
        utils.error(('%s: expected %s of shape %s, got %s'):format(name, what, shape_of(state_shape), utils.shape(t)))
      end
    end
    return place(t)
  end
  if not lstm then return one(hx, 'h_0') end
  if hx ~= nil and (type(hx) ~= 'table' or torch.is_tensor(hx)) then
    utils.error(('%s: expected hx to be a table {h_0, c_0}, got %s'):format(name, utils.shape(hx)))
  end
  return one(hx and hx[1], 'h_0'), one(hx and hx[2], 'c_0')
end

-- m(packed [, hx]): the layers over a PackedSequence (nn.utils.rnn); the output is packed
-- the same way and h_n (c_n) holds each sequence's state after its last valid step, in the
-- original batch order
function RNNBase:_forward_packed(packed, hx)
  local name = tostring(self)
  local x, sizes = packed.data, packed.batch_sizes:tolist()
  if x:dim() ~= 2 or x:size(2) ~= self.input_size then
    utils.error(('%s: expected packed data of shape [steps, %d], got %s'):format(name, self.input_size, utils.shape(x)))
  end
  local dirs = self.bidirectional and 2 or 1
  local B, H = sizes[1], self.hidden_size
  local state_shape = { self.num_layers * dirs, B, H }
  local lstm = self.mode == 'LSTM'
  local h0, c0 = initial_states(name, lstm, hx, state_shape, function(t)
    if t == nil then return zeros_like_state(x, state_shape) end
    -- given in the original batch order; the packed rows are sorted
    if packed.sorted_indices ~= nil then t = t:index_select(2, packed.sorted_indices:to(t.device)) end
    return t
  end)
  local input = x
  local h_n, c_n = {}, {}
  for layer = 0, self.num_layers - 1 do
    local per_dir = {}
    for dir = 1, dirs do
      local sfx = ('_l%d%s'):format(layer, dir == 2 and '_reverse' or '')
      local k = layer * dirs + dir
      local state = lstm and { h0:select(1, k), c0:select(1, k) } or h0:select(1, k)
      local gi = F.linear(input, self['weight_ih' .. sfx], self['bias_ih' .. sfx])
      local out, last = run_packed_direction(self, gi, sizes, state, self['weight_hh' .. sfx], self['bias_hh' .. sfx], dir == 2)
      per_dir[dir] = out
      if lstm then h_n[k], c_n[k] = last[1], last[2] else h_n[k] = last end
    end
    input = dirs == 2 and torch.cat(per_dir, 2) or per_dir[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      input = F.dropout(input, self.dropout, true)
    end
  end
  local hn = torch.stack(h_n, 1)
  local cn = lstm and torch.stack(c_n, 1) or nil
  if packed.unsorted_indices ~= nil then
    local back = packed.unsorted_indices:to(hn.device)
    hn = hn:index_select(2, back)
    if cn then cn = cn:index_select(2, back) end
  end
  local out = require('nn.rnn_utils').PackedSequence(input, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
  if lstm then return out, { hn, cn } end
  return out, hn
end

function RNNBase:forward(x, hx)
  local name = tostring(self)
  if torch.typename(x) == 'nn.PackedSequence' then return self:_forward_packed(x, hx) end
  utils.check_tensor(name, x)
  local batched = x:dim() == 3
  if (x:dim() ~= 2 and x:dim() ~= 3) or x:size(x:dim()) ~= self.input_size then
    utils.error(('%s: expected input of shape [%s, %d] or unbatched [seq, %d], got %s'):format(name,
      self.batch_first and 'batch, seq' or 'seq, batch', self.input_size, self.input_size, utils.shape(x)))
  end
  -- a batch of 0 sequences is fine (empty outputs, as PyTorch's); a sequence of 0 steps is not
  if x:size((batched and self.batch_first) and 2 or 1) == 0 then
    utils.error(('%s: expected a sequence of at least one step, got input of shape %s'):format(name, utils.shape(x)))
  end
  if not batched then
    x = x:unsqueeze(2)
  elseif self.batch_first then
    x = x:transpose(1, 2)
  end
  local dirs = self.bidirectional and 2 or 1
  local B, H = x:size(2), self.hidden_size
  local state_shape = batched and { self.num_layers * dirs, B, H } or { self.num_layers * dirs, H }
  local lstm = self.mode == 'LSTM'

  -- h0 (and c0) as [layers * dirs, batch, hidden]
  local h0, c0 = initial_states(name, lstm, hx, state_shape, function(t)
    if t == nil then return zeros_like_state(x, { self.num_layers * dirs, B, H }) end
    return batched and t or t:unsqueeze(2)
  end)

  local input = x
  local h_n, c_n = {}, {}
  for layer = 0, self.num_layers - 1 do
    local per_dir = {}
    for dir = 1, dirs do
      local sfx = ('_l%d%s'):format(layer, dir == 2 and '_reverse' or '')
      local k = layer * dirs + dir
      local state = lstm and { h0:select(1, k), c0:select(1, k) } or h0:select(1, k)
      local gi = F.linear(input, self['weight_ih' .. sfx], self['bias_ih' .. sfx])
      local outs, last = run_direction(self, gi, state, self['weight_hh' .. sfx], self['bias_hh' .. sfx], dir == 2)
      per_dir[dir] = torch.stack(outs, 1)
      if lstm then h_n[k], c_n[k] = last[1], last[2] else h_n[k] = last end
    end
    input = dirs == 2 and torch.cat(per_dir, 3) or per_dir[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      input = F.dropout(input, self.dropout, true)
    end
  end

  local output = input
  local hn = torch.stack(h_n, 1)
  local cn = lstm and torch.stack(c_n, 1) or nil
  if not batched then
    output = output:squeeze(2)
    hn = hn:squeeze(2)
    if cn then cn = cn:squeeze(2) end
  elseif self.batch_first then
    output = output:transpose(1, 2)
  end
  if lstm then return output, { hn, cn } end
  return output, hn
end

function RNNBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if self.num_layers ~= 1 then s = s .. ', num_layers=' .. self.num_layers end
  if not self.bias then s = s .. ', bias=false' end
  if self.batch_first then s = s .. ', batch_first=true' end
  if self.dropout ~= 0 then s = s .. ', dropout=' .. tostring(self.dropout) end
  if self.bidirectional then s = s .. ', bidirectional=true' end
  if self.nonlinearity and self.nonlinearity ~= 'tanh' then s = s .. ", nonlinearity='" .. self.nonlinearity .. "'" end
  return s
end

-- PyTorch's positional arguments after hidden_size: nn.LSTM(10, 20, 2) is two layers
local POSITIONAL = {
  RNN = { 'num_layers', 'nonlinearity', 'bias', 'batch_first', 'dropout', 'bidirectional' },
  LSTM = { 'num_layers', 'bias', 'batch_first', 'dropout', 'bidirectional' },
  GRU = { 'num_layers', 'bias', 'batch_first', 'dropout', 'bidirectional' },
}

-- (num_layers, ... [, opts]) as one options table
local function positional(kind, ...)
  local n, given = select('#', ...), { ... }
  local opts = nil
  if n > 0 and type(given[n]) == 'table' then opts, n = given[n], n - 1 end
  if n == 0 then return opts end
  local names, out = POSITIONAL[kind], {}
  if n > #names then utils.error(('nn.%s: too many arguments (%d after hidden_size)'):format(kind, n)) end
  for k, v in pairs(opts or {}) do out[k] = v end
  for i = 1, n do
    if given[i] ~= nil then
      if out[names[i]] ~= nil then utils.error(('nn.%s: %s given twice'):format(kind, names[i])) end
      out[names[i]] = given[i]
    end
  end
  return out
end

for _, kind in ipairs { 'RNN', 'LSTM', 'GRU' } do
  local cls, base = torch.class('nn.' .. kind, 'nn.RNNBase')
  cls.__init = function(self, input_size, hidden_size, ...)
    base.__init(self, kind, input_size, hidden_size, positional(kind, ...))
  end
end

return true
