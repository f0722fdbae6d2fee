-- The losses of nn.functional beyond the fused ones of the engine, as compositions of tensor
-- ops (so they run on every device and autograd differentiates them), with PyTorch 1.13's
-- formulas: l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
-- binary_cross_entropy_with_logits, kl_div, and cross_entropy / nll_loss with weight,
-- ignore_index, label_smoothing and class-probability targets.
--
-- Each takes (input, target [, opts]) where opts is a reduction ('mean' | 'sum' | 'none')
-- or a table {reduction=, ...}.  Class indices count from 1, as everywhere in dplua, and
-- ignore_index is given in the same numbering as the targets.
local torch = require 'torch'
local C = require 'torch._C'
local utils = require 'nn.utils'
local options = require 'torch.options'

local L = {}

local check = utils.check_tensor
local shape = utils.shape
local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- opts (nil, a reduction string or a table) checked against defaults (+ reduction)
local function loss_options(who, opts, defaults, reductions)
  local d = { reduction = 'mean' }
  for k, v in pairs(defaults or {}) do d[k] = v end
  if type(opts) == 'string' then opts = { reduction = opts } end
  local o = utils.options(who, opts, d)
  reductions = reductions or { mean = true, sum = true, none = true }
  if not reductions[o.reduction] then
    local names = {}
    for k in pairs(reductions) do names[#names + 1] = ("'%s'"):format(k) end
    table.sort(names)
    fail('%s: reduction must be one of %s, got %s', who, table.concat(names, ', '), options.show(o.reduction))
  end
  return o
end
L.options = loss_options

-- PyTorch's positional weight of cross_entropy and nll_loss, (input, target, weight [,
-- opts]): the options with weight added; otherwise the options as given
local function weight_first(who, weight, opts)
  if not torch.is_tensor(weight) then
    if opts ~= nil then fail('%s: expected the options (a table or a reduction) after the target, got %s and %s',
                             who, options.show(weight), options.show(opts)) end
    return weight
  end
  if type(opts) == 'string' then opts = { reduction = opts } end
  if opts ~= nil and type(opts) ~= 'table' then
    fail('%s: options must be a table, got %s %s', who, type(opts), options.show(opts))
  end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  if o.weight ~= nil then fail('%s: weight is given twice, by position and as an option', who) end
  o.weight = weight
  return o
end

local function reduce(l, reduction)
  if reduction == 'sum' then return l:sum() end
  if reduction == 'mean' then return l:mean() end
  return l
end
L.reduce = reduce

local function same_shape(who, input, target)
  check(who, input, 'input'); check(who, target, 'target')
  local a, b = input:size(), target:size()
  local same = #a == #b
  for i = 1, #a do same = same and a[i] == b[i] end
  if not same then
    fail('%s: the input has shape %s but the target has shape %s (they must match)', who, shape(input), shape(target))
  end
end

local function optional_tensor(who, name, t)
  if t ~= nil and not torch.is_tensor(t) then fail('%s: %s must be a tensor, got %s', who, name, type(t)) end
  return t
end

-- ---------------------------------------------------------------- regression losses

function L.l1_loss(input, target, opts)
  local o = loss_options('l1_loss', opts)
  same_shape('l1_loss', input, target)
  return reduce((input - target):abs(), o.reduction)
end

-- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0 is the L1 loss)
function L.smooth_l1_loss(input, target, opts)
  local o = loss_options('smooth_l1_loss', opts, { beta = 1.0 })
  same_shape('smooth_l1_loss', input, target)
  local beta = o.beta
  if type(beta) ~= 'number' or beta < 0 then
    fail('smooth_l1_loss: beta must be a non-negative number, got %s', tostring(beta))
  end
  local diff = input - target
  -- beta = 0 is |d|, with PyTorch's gradient of -1 (not 0) where d = 0
  if beta == 0 then return reduce(torch.where(diff:le(0), -diff, diff), o.reduction) end
  local d = diff:abs()
  return reduce(torch.where(d:lt(beta), d * d * (0.5 / beta), d - 0.5 * beta), o.reduction)
end

-- 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
function L.huber_loss(input, target, opts)
  local o = loss_options('huber_loss', opts, { delta = 1.0 })
  same_shape('huber_loss', input, target)
  local delta = o.delta
  if type(delta) ~= 'number' or delta <= 0 then
    fail('huber_loss: delta must be a positive number, got %s', tostring(delta))
  end
  local d = (input - target):abs()
  return reduce(torch.where(d:lt(delta), d * d * 0.5, (d - 0.5 * delta) * delta), o.reduction)
end

-- ---------------------------------------------------------------- binary cross entropy

-- -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch (so x = 0 or 1
-- gives a finite loss); the input must be probabilities.
function L.binary_cross_entropy(input, target, opts)
  local who = 'binary_cross_entropy'
  local o = loss_options(who, opts, { weight = options.none })
  check(who, input, 'input'); check(who, target, 'target')
  if not torch.FLOAT_DTYPES[input.dtype] then fail('%s: expected a floating point input, got %s', who, input.dtype) end
  local a, b = input:size(), target:size()
  local same = #a == #b
  for i = 1, #a do same = same and a[i] == b[i] end
  if not same then
    fail('%s: Using a target size (%s) that is different to the input size (%s) is deprecated. Please ensure they have the same size.',
      who, shape(target), shape(input))
  end
  if input:numel() > 0 then
    local d = input:detach()
    if (d:lt(0) + d:gt(1) + d:ne(d)):any():item() then
      fail('%s: all elements of input should be between 0 and 1', who)
    end
  end
  local w = optional_tensor(who, 'weight', o.weight)
  local function log_clamped(x) return x:log():clamp(-100) end
  local l = -(target * log_clamped(input) + (1 - target) * log_clamped(1 - input))
  if w ~= nil then l = l * w end
  return reduce(l, o.reduction)
end

-- binary_cross_entropy(sigmoid(x), y) computed stably: with m = max(-x, 0),
--   (1 - y) x + lw (log(exp(-m) + exp(-x - m)) + m),   lw = 1 + (pos_weight - 1) y
function L.binary_cross_entropy_with_logits(input, target, opts)
  local who = 'binary_cross_entropy_with_logits'
  local o = loss_options(who, opts, { weight = options.none, pos_weight = options.none })
  check(who, input, 'input'); check(who, target, 'target')
  local a, b = input:size(), target:size()
  local same = #a == #b
  for i = 1, #a do same = same and a[i] == b[i] end
  if not same then
    fail('%s: Target size (%s) must be the same as input size (%s)', who, shape(target), shape(input))
  end
  local w = optional_tensor(who, 'weight', o.weight)
  local pw = optional_tensor(who, 'pos_weight', o.pos_weight)
  local m = (-input):clamp(0)
  local softplus = ((-m):exp() + (-input - m):exp()):log() + m   -- log(1 + exp(-x))
  local l
  if pw ~= nil then
    l = (1 - target) * input + ((pw - 1) * target + 1) * softplus
  else
    l = (1 - target) * input + softplus
  end
  if w ~= nil then l = l * w end
  return reduce(l, o.reduction)
end

-- ---------------------------------------------------------------- KL divergence

-- input: log-probabilities; target: probabilities (log-probabilities with log_target).
-- Pointwise y (log y - x), 0 where y = 0; 'batchmean' divides the sum by the batch size.
function L.kl_div(input, target, opts)
  local who = 'kl_div'
  local o = loss_options(who, opts, { log_target = false }, { mean = true, sum = true, none = true, batchmean = true })
  check(who, input, 'input'); check(who, target, 'target')
  local l
  if o.log_target then
    l = target:exp() * (target - input)
  else
    local pos = target:gt(0)
    l = torch.where(pos, target * torch.where(pos, target, 1):log(), 0) - target * input
  end
  if o.reduction == 'batchmean' then
    local s = l:sum()
    if input:dim() == 0 then return s end
    return s / input:size(1)
  end
  return reduce(l, o.reduction)
end

-- ---------------------------------------------------------------- cross entropy, NLL

local function is_float(t) return torch.FLOAT_DTYPES[t.dtype] == true end

-- input [N, C, d1 ...] (or [C]) as [M, C] rows with the class last; target the same
-- positions as a flat [M]; how to put a per-position result back into target's shape
local function as_rows(who, input, target, probs)
  local nd = input:dim()
  if nd == 0 then fail('%s: the input must have at least one dimension (the classes), got a 0-dim tensor', who) end
  local C = input:size(nd == 1 and 1 or 2)
  local want = {}          -- the shape the target must have (class indices)
  if nd >= 2 then
    want[1] = input:size(1)
    for d = 3, nd do want[#want + 1] = input:size(d) end
  end
  local tshape = target:size()
  local ok
  if probs then
    ok = #tshape == nd
    for d = 1, nd do ok = ok and tshape[d] == input:size(d) end
  else
    ok = #tshape == #want
    for d = 1, #want do ok = ok and tshape[d] == want[d] end
  end
  if not ok and probs then
    fail('%s: a %s target must be class probabilities of the input\'s shape %s (or give int64 class indices), got target %s',
      who, target.dtype, shape(input), shape(target))
  elseif not ok then
    fail('%s: expected input [N, C] (or [C], or [N, C, d1 ...]) with int64 target [N] (or [], or [N, d1 ...]), got input %s and target %s',
      who, shape(input), shape(target))
  end
  local rows = input
  if nd == 1 then rows = input:reshape(1, C)
  elseif nd > 2 then rows = input:movedim(2, nd):reshape(-1, C) end
  local t = target
  if probs then
    if nd == 1 then t = target:reshape(1, C)
    elseif nd > 2 then t = target:movedim(2, nd):reshape(-1, C) end
  else
    t = target:reshape(-1)
  end
  return rows, t, C, want
end

-- the class targets checked: each in 1..C or equal to ignore_index.  On a GPU the check
-- runs there and a bad target is reported at the next synchronisation (no copy of the
-- targets to the host, which would stall the stream on every loss); on the CPU at once.
-- t with the targets equal to ignore_index set to class 1 (by arithmetic: torch.where with
-- a number would copy it to the device, a wait)
local function unignored(t, ignore_index) return t + t:eq(ignore_index):long() * (1 - ignore_index) end

local function check_classes(who, t, C, ignore_index)
  if t:numel() == 0 then return end
  local kept = unignored(t, ignore_index)
  local ok, err = pcall(kept._check_index, kept,
    C, who .. ': target %d at position %d is out of bounds: class indices must be between 1 and ' .. C ..
    ' (dplua counts classes from 1)')
  if not ok then utils.error((tostring(err):gsub('^.-:%d+: ', ''))) end
end

local function class_weight(who, weight, input, C)
  if weight == nil then return nil end
  optional_tensor(who, 'weight', weight)
  if weight:dim() ~= 1 or weight:size(1) ~= C then
    fail('%s: weight tensor should be defined either for all %d classes or no classes but got weight tensor of shape: %s',
      who, C, shape(weight))
  end
  return weight
end

local function index_target(who, target, input)
  if type(target) == 'table' then
    return torch.tensor(target, { dtype = 'int64', device = input.device })
  end
  check(who, target, 'target')
  return target
end

-- v where keep holds, else 0, with no gradient through the 0s: unlike v * keep, an
-- infinite v gives no NaN there, and an infinite gradient (a mean over a total weight of
-- 0) none either: PyTorch gives the ignored targets a gradient of exactly 0
local function kept(v, keep) return torch.where(keep, v, torch.zeros_like(v)) end

-- the negative log likelihood of rows [M, C] (log-probabilities) at classes t [M]: per row
-- -w[t] * rows[t] (0 where ignored) and the rows' weights w[t] (0 where ignored).  The
-- entry is picked with gather, not a one-hot product: a -inf log-probability of another
-- class (log 0) must not turn the loss into NaN, and its gradient goes to that one entry,
-- as in PyTorch.
local function picked(rows, t, C, weight, ignore_index)
  local valid = t:ne(ignore_index)
  local cls = unignored(t, ignore_index)
  local w = weight ~= nil and weight:index_select(1, cls):to(rows.dtype)
    or torch.ones(t:size(1), { dtype = rows.dtype, device = rows.device })
  w = w * valid:to(rows.dtype)
  local l = -rows:gather(2, cls:reshape(-1, 1)):reshape(-1) * w
  return kept(l, valid), w, valid
end

local function unrows(l, want) return l:reshape(want) end

local function nll(who, logp, target, o, smoothing)
  local weight = o.weight
  local rows, t, C, want = as_rows(who, logp, target, false)
  weight = class_weight(who, weight, logp, C)
  local ignore = o.ignore_index
  if math.type(ignore) ~= 'integer' then fail('%s: ignore_index must be an integer, got %s', who, tostring(ignore)) end
  check_classes(who, t, C, ignore)
  local l, w, valid = picked(rows, t, C, weight, ignore)
  local out
  if o.reduction == 'none' then out = unrows(l, want)
  elseif o.reduction == 'sum' then out = l:sum()
  else out = l:sum() / w:sum() end
  if smoothing == nil or smoothing == 0 then return out end
  -- label smoothing: PyTorch's (1 - s) nll + s / C * (the weighted sum of -logp over classes)
  local smooth = weight ~= nil and -(rows * weight):sum(2) or -rows:sum(2)
  smooth = kept(smooth, valid)
  local ret
  if o.reduction == 'none' then ret = unrows(smooth, want)
  elseif o.reduction == 'sum' then ret = smooth:sum()
  elseif weight ~= nil then ret = smooth:sum() / w:sum()
  else ret = smooth:sum() / valid:to(rows.dtype):sum() end
  return out * (1 - smoothing) + ret * (smoothing / C)
end

-- on a GPU: the fused loss per target, the ignored ones (set to class 1) masked out, and
-- the mean divided by the number kept, summed there: nothing read back to the host
local function fused_masked(fn, who, input, target, o)
  local C = input:size(input:dim() == 1 and 1 or 2)
  check_classes(who, target:reshape(-1), C, o.ignore_index)
  local valid = target:ne(o.ignore_index)
  local l = fn(input, unignored(target, o.ignore_index), 'none')
  l = kept(l, valid:reshape(l:size()))
  if o.reduction == 'none' then return l end
  if o.reduction == 'sum' then return l:sum() end
  return l:sum() / valid:sum():to(l.dtype)
end

-- the engine's fused loss, where it applies: no weight, nothing ignored (when it refuses
-- the targets, the check here says which one, with the numbering)
local function fused(fn, who, input, target, o)
  if input.device.type ~= 'cpu' then return fused_masked(fn, who, input, target, o) end
  local ok, r = pcall(fn, input, target, o.reduction)
  if ok then return r end
  local C = input:size(input:dim() == 1 and 1 or 2)
  check_classes(who, target:reshape(-1), C, o.ignore_index)
  local msg = tostring(r):gsub('^.-:%d+: ', '')
  if msg:sub(1, #who + 1) ~= who .. ':' then msg = who .. ': ' .. msg end
  utils.error(msg)
end

local function fusable(input, target, o)
  if o.weight ~= nil or input:dim() > 2 or not torch.is_tensor(target) or target.dtype ~= 'int64' then return false end
  if input.device.type ~= 'cpu' then return true end   -- fused_masked: ignored targets masked there
  if target:numel() > 0 and target:eq(o.ignore_index):any():item() then return false end
  return true
end

local NLL_DEFAULTS = { weight = options.none, ignore_index = -100 }

function L.nll_loss(input, target, opts, more)
  local who = 'nll_loss'
  local o = loss_options(who, weight_first(who, opts, more), NLL_DEFAULTS)
  check(who, input, 'input')
  target = index_target(who, target, input)
  if target.dtype ~= 'int64' then
    fail('%s: target must be an int64 tensor of 1-based class indices, got %s', who, target.dtype)
  end
  if not is_float(input) then fail('%s: expected a floating point input, got %s', who, input.dtype) end
  if fusable(input, target, o) then return fused(C.nll_loss, who, input, target, o) end
  return nll(who, input, target, o)
end

-- input: raw scores [N, C] ([C], [N, C, d1 ...]); target: int64 class indices (1-based) of
-- the positions, or class probabilities of the input's shape
function L.cross_entropy(input, target, opts, more)
  local who = 'cross_entropy'
  local o = loss_options(who, weight_first(who, opts, more), { weight = options.none, ignore_index = -100, label_smoothing = 0.0 })
  check(who, input, 'input')
  target = index_target(who, target, input)
  if not is_float(input) then fail('%s: expected a floating point input, got %s', who, input.dtype) end
  local s = o.label_smoothing
  if type(s) ~= 'number' or s < 0 or s > 1 then
    fail('%s: label_smoothing must be between 0.0 and 1.0. Got: %s', who, tostring(s))
  end
  if is_float(target) then
    -- class probabilities: no target is a class to ignore (PyTorch refuses any ignore_index
    -- but its default)
    if o.ignore_index ~= -100 then
      fail('%s: ignore_index is not supported for floating point target (class probabilities), got ignore_index = %s',
        who, tostring(o.ignore_index))
    end
    local rows, t, C = as_rows(who, input, target, true)
    local weight = class_weight(who, o.weight, input, C)
    if s > 0 then t = t * (1 - s) + s / C end
    local logp = rows:log_softmax(2)
    local per = weight ~= nil and logp * t * weight or logp * t
    local l = -per:sum(2)
    if o.reduction == 'sum' then return l:sum() end
    if o.reduction == 'mean' then return l:sum() / (input:numel() // C) end
    if input:dim() == 1 then return l:reshape({}) end
    if input:dim() == 2 then return l end
    local want = { input:size(1) }
    for d = 3, input:dim() do want[#want + 1] = input:size(d) end
    return l:reshape(want)
  end
  if target.dtype ~= 'int64' then
    fail('%s: target must be int64 class indices (1-based) or floating point class probabilities, got %s', who, target.dtype)
  end
  if s == 0 and fusable(input, target, o) then return fused(C.cross_entropy, who, input, target, o) end
  local logp = input:log_softmax(input:dim() == 1 and 1 or 2)
  return nll(who, logp, target, o, s)
end

return L
