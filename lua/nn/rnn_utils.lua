-- nn.utils.rnn: variable-length batches for the recurrent layers, as PyTorch's.
--
--   pad_sequence(sequences [, {batch_first=false, padding_value=0}]): a list of [L_i, *]
--     tensors as one [T, B, *] ([B, T, *] with batch_first), T the longest, padded.
--   pack_padded_sequence(input, lengths [, {batch_first=false, enforce_sorted=true}]):
--     a PackedSequence of the valid steps of a padded batch; lengths a table or an int64
--     tensor.  With enforce_sorted=false the batch is sorted by decreasing length first
--     (a stable sort) and sorted_indices / unsorted_indices record the permutation.
--   pad_packed_sequence(packed [, {batch_first=false, padding_value=0, total_length=}]):
--     the padded batch and its lengths (an int64 tensor), in the original batch order.
--   pack_sequence(sequences [, {enforce_sorted=true}]): pad_sequence then pack_padded_sequence.
--
-- A PackedSequence has data [sum of lengths, *] (time step by time step, each step's
-- sequences in order of decreasing length), batch_sizes (an int64 tensor on the cpu: how
-- many sequences are still running at each step), sorted_indices and unsorted_indices
-- (1-based int64, or nil).  nn.RNN, nn.LSTM and nn.GRU take one and give one back.
local torch = require 'torch'
local utils = require 'nn.utils'

local M = {}

local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end

local PackedSequence = torch.class('nn.PackedSequence')
M.PackedSequence = PackedSequence

function PackedSequence:__init(data, batch_sizes, sorted_indices, unsorted_indices)
  self.data, self.batch_sizes = data, batch_sizes
  self.sorted_indices, self.unsorted_indices = sorted_indices, unsorted_indices
end

function PackedSequence:__tostring()
  return ('PackedSequence(data=%s, batch_sizes=%s, sorted_indices=%s, unsorted_indices=%s)'):format(
    utils.shape(self.data), '[' .. table.concat(self.batch_sizes:tolist(), ', ') .. ']',
    self.sorted_indices and '[' .. table.concat(self.sorted_indices:tolist(), ', ') .. ']' or 'None',
    self.unsorted_indices and '[' .. table.concat(self.unsorted_indices:tolist(), ', ') .. ']' or 'None')
end

-- the same sequences with data moved or converted (the indices stay on the cpu, as PyTorch's
-- batch_sizes; sorted_indices follow the data)
function PackedSequence:to(...)
  local data = self.data:to(...)
  local function move(t) return t and t:to(data.device) or nil end
  return PackedSequence(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))
end

function M.is_packed(x) return torch.typename(x) == 'nn.PackedSequence' end

local function as_list(who, sequences)
  if type(sequences) ~= 'table' or torch.is_tensor(sequences) or #sequences == 0 then
    fail('%s: expected a non-empty table of tensors, got %s', who, torch.is_tensor(sequences) and 'a tensor' or type(sequences))
  end
  for i, s in ipairs(sequences) do
    if not torch.is_tensor(s) then fail('%s: sequence %d is a %s, not a tensor', who, i, type(s)) end
    if s:dim() < 1 then fail('%s: sequence %d is 0-dim; each must be [L, *]', who, i) end
  end
  return sequences
end

-- positional (batch_first, padding_value) or one options table
local function pad_options(who, a, b)
  if type(a) == 'table' then return utils.options(who, a, { batch_first = false, padding_value = 0 }) end
  return { batch_first = a or false, padding_value = b or 0 }
end

function M.pad_sequence(sequences, batch_first, padding_value)
  local who = 'nn.utils.rnn.pad_sequence'
  local o = pad_options(who, batch_first, padding_value)
  as_list(who, sequences)
  local first = sequences[1]
  local trailing = first:size():totable()
  table.remove(trailing, 1)
  local T = 0
  for i, s in ipairs(sequences) do
    local sz = s:size():totable()
    table.remove(sz, 1)
    if #sz ~= #trailing then fail('%s: sequence %d has shape %s, the first %s (they may differ only in dim 1)', who, i, utils.shape(s), utils.shape(first)) end
    for d = 1, #sz do
      if sz[d] ~= trailing[d] then fail('%s: sequence %d has shape %s, the first %s (they may differ only in dim 1)', who, i, utils.shape(s), utils.shape(first)) end
    end
    T = math.max(T, s:size(1))
  end
  local padded = {}
  for i, s in ipairs(sequences) do
    local n = s:size(1)
    if n < T then
      local shape = { T - n, table.unpack(trailing) }
      s = torch.cat({ s, torch.full(shape, o.padding_value, { dtype = s.dtype, device = s.device }) }, 1)
    end
    padded[i] = s
  end
  return torch.stack(padded, o.batch_first and 1 or 2)
end

local function lengths_list(who, lengths, B)
  local list
  if torch.is_tensor(lengths) then
    if lengths:dim() ~= 1 or (lengths.dtype ~= 'int64' and lengths.dtype ~= 'int32') then
      fail('%s: lengths must be a 1-D integer tensor or a table of integers, got %s %s', who, lengths.dtype, utils.shape(lengths))
    end
    list = lengths:tolist()
  elseif type(lengths) == 'table' then
    list = {}
    for i, v in ipairs(lengths) do
      if math.type(v) ~= 'integer' then fail('%s: lengths[%d] must be an integer, got %s', who, i, show(v)) end
      list[i] = v
    end
  else
    fail('%s: lengths must be a 1-D integer tensor or a table of integers, got %s', who, type(lengths))
  end
  if #list ~= B then fail('%s: Expected `len(lengths)` to be equal to batch_size, but got %d (batch_size=%d)', who, #list, B) end
  return list
end

-- a stable order of decreasing length: sorted[k] is the k-th longest (1-based)
local function sort_order(list)
  local order = {}
  for i = 1, #list do order[i] = i end
  table.sort(order, function(a, b)
    if list[a] ~= list[b] then return list[a] > list[b] end
    return a < b
  end)
  return order
end

local function index_tensor(list, device) return torch.tensor(list, { dtype = 'int64', device = device }) end

function M.pack_padded_sequence(input, lengths, opts)
  local who = 'nn.utils.rnn.pack_padded_sequence'
  utils.check_tensor(who, input)
  if type(opts) == 'boolean' then opts = { batch_first = opts } end
  local o = utils.options(who, opts, { batch_first = false, enforce_sorted = true })
  if input:dim() < 2 then fail('%s: expected an input [T, B, *] ([B, T, *] with batch_first), got shape %s', who, utils.shape(input)) end
  if o.batch_first then input = input:transpose(1, 2) end
  local T, B = input:size(1), input:size(2)
  local list = lengths_list(who, lengths, B)
  local sorted, unsorted
  if o.enforce_sorted then
    for k = 2, B do
      if list[k] > list[k - 1] then
        fail('%s: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass `enforce_sorted=false` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do not need ONNX exportability.', who)
      end
    end
  else
    local order = sort_order(list)
    local inverse, sorted_list = {}, {}
    for k, i in ipairs(order) do inverse[i] = k; sorted_list[k] = list[i] end
    sorted = index_tensor(order, input.device)
    unsorted = index_tensor(inverse, input.device)
    input = input:index_select(2, sorted)
    list = sorted_list
  end
  for _, n in ipairs(list) do
    if n <= 0 then fail("%s: Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0", who) end
  end
  if list[1] > T then
    fail('%s: a length %d is longer than the input\'s %d time steps', who, list[1], T)
  end
  local steps, sizes = {}, {}
  for t = 1, list[1] do
    local bt = 0
    for _, n in ipairs(list) do if n >= t then bt = bt + 1 end end
    sizes[t] = bt
    steps[t] = input:select(1, t):narrow(1, 1, bt)
  end
  return PackedSequence(torch.cat(steps, 1), torch.tensor(sizes, { dtype = 'int64' }), sorted, unsorted)
end

function M.pad_packed_sequence(seq, opts)
  local who = 'nn.utils.rnn.pad_packed_sequence'
  if not M.is_packed(seq) then fail('%s: expected a PackedSequence, got %s', who, torch.typename(seq) or type(seq)) end
  if type(opts) == 'boolean' then opts = { batch_first = opts } end
  local o = utils.options(who, opts, { batch_first = false, padding_value = 0, total_length = false })
  local sizes = seq.batch_sizes:tolist()
  local T, B = #sizes, sizes[1]
  if o.total_length then
    if math.type(o.total_length) ~= 'integer' or o.total_length < T then
      fail('%s: Expected total_length to be at least the length of the longest sequence input (%d), but got total_length=%s',
        who, T, show(o.total_length))
    end
  end
  local data = seq.data
  local trailing = data:size():totable()
  table.remove(trailing, 1)
  local rows, at = {}, 1
  for t = 1, T do
    local bt = sizes[t]
    local step = data:narrow(1, at, bt)
    at = at + bt
    if bt < B then
      step = torch.cat({ step, torch.full({ B - bt, table.unpack(trailing) }, o.padding_value, { dtype = data.dtype, device = data.device }) }, 1)
    end
    rows[t] = step
  end
  local padded = torch.stack(rows, 1)
  local total = o.total_length or T
  if total > T then
    local fill = torch.full({ total - T, B, table.unpack(trailing) }, o.padding_value, { dtype = data.dtype, device = data.device })
    padded = torch.cat({ padded, fill }, 1)
  end
  local lengths = {}
  for b = 1, B do
    local n = 0
    for t = 1, T do if sizes[t] >= b then n = n + 1 end end
    lengths[b] = n
  end
  if seq.unsorted_indices ~= nil then
    padded = padded:index_select(2, seq.unsorted_indices:to(padded.device))
    local orig = {}
    for i, k in ipairs(seq.unsorted_indices:tolist()) do orig[i] = lengths[k] end
    lengths = orig
  end
  if o.batch_first then padded = padded:transpose(1, 2) end
  return padded, torch.tensor(lengths, { dtype = 'int64' })
end

function M.pack_sequence(sequences, opts)
  local who = 'nn.utils.rnn.pack_sequence'
  if type(opts) == 'boolean' then opts = { enforce_sorted = opts } end
  local o = utils.options(who, opts, { enforce_sorted = true })
  as_list(who, sequences)
  local lengths = {}
  for i, s in ipairs(sequences) do lengths[i] = s:size(1) end
  return M.pack_padded_sequence(M.pad_sequence(sequences), lengths, { enforce_sorted = o.enforce_sorted })
end

return M
