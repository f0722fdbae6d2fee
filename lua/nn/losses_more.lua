-- The margin, embedding and likelihood losses of PyTorch 1.13 beyond lua/nn/losses.lua, as
-- compositions of tensor ops (so they run on every device and autograd differentiates
-- them): margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
-- multilabel_soft_margin_loss, multilabel_margin_loss, cosine_embedding_loss,
-- multi_margin_loss, triplet_margin_loss, poisson_nll_loss, gaussian_nll_loss, ctc_loss; and their
-- modules (nn.MarginRankingLoss ...), whose constructors take the options table.
--
-- Each function takes its tensors then opts: a reduction ('mean' | 'sum' | 'none') or a
-- table {reduction=, ...}.  Class indices count from 1, as in cross_entropy and nll_loss:
-- multi_margin_loss's targets are 1..C, and multilabel_margin_loss's target rows list
-- classes 1..C ended by the first 0 (PyTorch's -1, shifted by one as every index).
local torch = require 'torch'
local utils = require 'nn.utils'
local options = require 'torch.options'
local L = require 'nn.losses'
local FM = require 'nn.functional_more'

local M = {}

local check = utils.check_tensor
local shape = utils.shape
local loss_options = L.options
local function fail(fmt, ...) utils.error(fmt:format(...)) end

-- a bad value as an error shows it: numbers and strings as they are, tensors by shape
local function show(v)
  if torch.is_tensor(v) then return 'a tensor of shape ' .. utils.shape(v) end
  if type(v) == 'table' then return 'a table' end
  return tostring(v)
end

local reduce = L.reduce

local function float_input(who, x, what)
  check(who, x, what)
  if x.dtype ~= 'float32' and x.dtype ~= 'float64' then
    fail('%s: expected a floating point %s, got %s', who, what or 'input', x.dtype)
  end
end

local function same_shape(who, a, b, an, bn)
  local sa, sb = a:size(), b:size()
  local ok = #sa == #sb
  for i = 1, #sa do ok = ok and sa[i] == sb[i] end
  if not ok then fail('%s: %s has shape %s but %s has shape %s (they must match)', who, an, shape(a), bn, shape(b)) end
end

local function number(who, what, v)
  if type(v) ~= 'number' then fail('%s: %s must be a number, got %s', who, what, show(v)) end
  return v
end

-- broadcast the target's values to the input's shape (the +-1 labels)
local function broadcastable(who, a, b, an, bn)
  local ok = pcall(function() return a + b end)
  if not ok then fail('%s: %s %s and %s %s do not broadcast', who, an, shape(a), bn, shape(b)) end
end

-- margin_ranking_loss(x1, x2, y [, {margin=0}]): max(0, -y (x1 - x2) + margin)
function M.margin_ranking_loss(x1, x2, y, opts)
  local who = 'margin_ranking_loss'
  local o = loss_options(who, opts, { margin = 0.0 })
  float_input(who, x1, 'input1'); float_input(who, x2, 'input2'); check(who, y, 'target')
  if x1:dim() ~= x2:dim() or x1:dim() ~= y:dim() then
    fail('%s: margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: %s, input2: %s, target: %s ',
      who, shape(x1), shape(x2), shape(y))
  end
  broadcastable(who, x1 - x2, y, 'the inputs', 'target')
  return reduce((-y * (x1 - x2) + number(who, 'margin', o.margin)):clamp(0), o.reduction)
end

-- hinge_embedding_loss(x, y [, {margin=1}]): x where y = 1, max(0, margin - x) where y = -1
function M.hinge_embedding_loss(x, y, opts)
  local who = 'hinge_embedding_loss'
  local o = loss_options(who, opts, { margin = 1.0 })
  float_input(who, x); check(who, y, 'target')
  broadcastable(who, x, y, 'input', 'target')
  local margin = number(who, 'margin', o.margin)
  local l = torch.where(y:ne(1), (-x + margin):clamp(0), 0) + torch.where(y:ne(-1), x, 0)
  return reduce(l, o.reduction)
end

-- soft_margin_loss(x, y): log(1 + e^(-y x))
function M.soft_margin_loss(x, y, opts)
  local who = 'soft_margin_loss'
  local o = loss_options(who, opts)
  float_input(who, x); check(who, y, 'target')
  same_shape(who, x, y, 'the input', 'the target')
  return reduce(-FM.logsigmoid(y * x), o.reduction)
end

-- [N, C] or [C] as [N, C], and whether it was unbatched
local function rows_of(who, x)
  if x:dim() == 1 then return x:reshape(1, -1), true end
  if x:dim() ~= 2 then fail('%s: expected an input [N, C] or [C], got shape %s', who, shape(x)) end
  return x, false
end

local function per_sample(l, reduction, unbatched)
  if reduction == 'none' and unbatched then return l:reshape({}) end
  return reduce(l, reduction)
end

-- multilabel_soft_margin_loss(x, y [, {weight=}]): per sample the mean over classes of
-- -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), weighted per class
function M.multilabel_soft_margin_loss(x, y, opts)
  local who = 'multilabel_soft_margin_loss'
  local o = loss_options(who, opts, { weight = options.none })
  float_input(who, x); check(who, y, 'target')
  same_shape(who, x, y, 'the input', 'the target')
  local l = -(y * FM.logsigmoid(x) + (1 - y) * FM.logsigmoid(-x))
  if o.weight ~= nil then
    check(who, o.weight, 'weight')
    broadcastable(who, l, o.weight, 'input', 'weight')
    l = l * o.weight
  end
  local c = x:size(x:dim())
  l = l:sum(x:dim()) / c
  return reduce(l, o.reduction)
end

-- multilabel_margin_loss(x, y): x [N, C] (or [C]); y the same shape, int64, each row the
-- target classes (1-based) up to the first 0.  Per sample
--   sum over targets j and non-targets i of max(0, 1 - (x[j] - x[i])) / C
function M.multilabel_margin_loss(x, y, opts)
  local who = 'multilabel_margin_loss'
  local o = loss_options(who, opts)
  float_input(who, x); check(who, y, 'target')
  if y.dtype ~= 'int64' then fail('%s: target must be an int64 tensor of 1-based class indices, got %s', who, y.dtype) end
  local rows, unbatched = rows_of(who, x)
  same_shape(who, x, y, 'the input', 'the target')
  local n, c = rows:size(1), rows:size(2)
  -- per row: how often each class is listed (count) and whether it is a target (is)
  local count, is = {}, {}
  for r, list in ipairs(y:reshape(n, c):tolist()) do
    local cr, ir = {}, {}
    for k = 1, c do cr[k], ir[k] = 0, 0 end
    for k, v in ipairs(list) do
      if v == 0 then break end
      if v < 1 or v > c then
        fail('%s: target %d at row %d, position %d is out of range: classes run from 1 to %d, a 0 ends the list (dplua counts classes from 1)',
          who, v, r, k, c)
      end
      cr[v], ir[v] = cr[v] + 1, 1
    end
    count[r], is[r] = cr, ir
  end
  local topts = { dtype = x.dtype, device = x.device }
  local cnt = torch.tensor(count, topts):reshape(n, c, 1)
  local other = (1 - torch.tensor(is, topts)):reshape(n, 1, c)
  local margins = (-rows:unsqueeze(3) + rows:unsqueeze(2) + 1):clamp(0)   -- [n, j, i]
  local l = (margins * cnt * other):sum(3):sum(2) / c
  return per_sample(l, o.reduction, unbatched)
end

-- cosine_embedding_loss(x1, x2, y [, {margin=0}]): 1 - cos(x1, x2) where y = 1,
-- max(0, cos(x1, x2) - margin) where y = -1; cos over the last dim
function M.cosine_embedding_loss(x1, x2, y, opts)
  local who = 'cosine_embedding_loss'
  local o = loss_options(who, opts, { margin = 0.0 })
  float_input(who, x1, 'input1'); float_input(who, x2, 'input2'); check(who, y, 'target')
  same_shape(who, x1, x2, 'input1', 'input2')
  if x1:dim() < 1 or x1:dim() > 2 or y:dim() ~= x1:dim() - 1 or (y:dim() == 1 and y:size(1) ~= x1:size(1)) then
    fail('%s: expected inputs [N, D] with target [N] (or [D] with a 0-dim target), got %s and target %s', who, shape(x1), shape(y))
  end
  local d = x1:dim()
  local EPS = 1e-12
  local prod = (x1 * x2):sum(d)
  local m1, m2 = (x1 * x1):sum(d) + EPS, (x2 * x2):sum(d) + EPS
  local cos = prod / (m1 * m2):sqrt()
  local margin = number(who, 'margin', o.margin)
  local l = torch.where(y:eq(1), 1 - cos, 0) + torch.where(y:eq(-1), (cos - margin):clamp(0), 0)
  return reduce(l, o.reduction)
end

-- multi_margin_loss(x, y [, {p=1, margin=1, weight=}]): x [N, C] (or [C]), y int64 [N]
-- (or []) classes 1..C.  Per sample sum over i ~= y of w[y] max(0, margin - x[y] + x[i])^p / C
function M.multi_margin_loss(x, y, opts)
  local who = 'multi_margin_loss'
  local o = loss_options(who, opts, { p = 1, margin = 1.0, weight = options.none })
  float_input(who, x); check(who, y, 'target')
  if o.p ~= 1 and o.p ~= 2 then fail('%s: only p == 1 and p == 2 supported, got %s', who, show(o.p)) end
  if y.dtype ~= 'int64' then fail('%s: target must be an int64 tensor of 1-based class indices, got %s', who, y.dtype) end
  local rows, unbatched = rows_of(who, x)
  local n, c = rows:size(1), rows:size(2)
  if y:numel() ~= n or y:dim() > 1 or (unbatched and y:dim() ~= 0 and y:numel() ~= 1) then
    fail('%s: inconsistent target size: %s for input of size: %s', who, shape(y), shape(x))
  end
  local t = y:reshape(n)
  if n > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 or hi > c then
      fail('%s: target %d is out of range: class indices must be between 1 and %d (dplua counts classes from 1)', who,
        lo < 1 and lo or hi, c)
    end
  end
  if t.device ~= x.device then t = t:to(x.device) end
  local at = rows:gather(2, t:reshape(n, 1))   -- x[y], [n, 1]
  local z = (-at + rows + number(who, 'margin', o.margin)):clamp(0)
  if o.p == 2 then z = z * z end
  if o.weight ~= nil then
    check(who, o.weight, 'weight')
    if o.weight:dim() ~= 1 or o.weight:size(1) ~= c then fail('%s: weight must have shape [%d], got %s', who, c, shape(o.weight)) end
    z = z * o.weight:index_select(1, t):reshape(n, 1)
  end
  local others = torch.ones(n, c, { dtype = x.dtype, device = x.device }):scatter(2, t:reshape(n, 1), 0.0)
  local l = (z * others):sum(2) / c
  return per_sample(l, o.reduction, unbatched)
end

-- triplet_margin_loss(anchor, positive, negative [, {margin=1, p=2, eps=1e-6, swap=false}]):
-- max(0, d(a, p) - d(a, n) + margin) with d the pairwise distance over the last dim;
-- swap takes min(d(a, n), d(p, n))
function M.triplet_margin_loss(a, p, n, opts)
  local who = 'triplet_margin_loss'
  local o = loss_options(who, opts, { margin = 1.0, p = 2.0, eps = 1e-6, swap = false })
  float_input(who, a, 'anchor'); float_input(who, p, 'positive'); float_input(who, n, 'negative')
  if a:dim() ~= p:dim() or a:dim() ~= n:dim() then
    fail('%s: The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: anchor %dD, positive %dD, and negative %dD inputs',
      who, a:dim(), p:dim(), n:dim())
  end
  local d_ap = FM.pairwise_distance(a, p, o.p, o.eps)
  local d_an = FM.pairwise_distance(a, n, o.p, o.eps)
  if o.swap then d_an = torch.minimum(d_an, FM.pairwise_distance(p, n, o.p, o.eps)) end
  local l = (d_ap - d_an + number(who, 'margin', o.margin)):clamp(0)
  return reduce(l, o.reduction)
end

-- poisson_nll_loss(input, target [, {log_input=true, full=false, eps=1e-8}]):
-- e^input - target input (log_input), or input - target log(input + eps); full adds
-- Stirling's approximation of log(target!) where target > 1
function M.poisson_nll_loss(input, target, opts)
  local who = 'poisson_nll_loss'
  local o = loss_options(who, opts, { log_input = true, full = false, eps = 1e-8 })
  float_input(who, input); check(who, target, 'target')
  broadcastable(who, input, target, 'input', 'target')
  local l
  if o.log_input then l = input:exp() - target * input
  else l = input - target * (input + number(who, 'eps', o.eps)):log() end
  if o.full then
    local big = target:gt(1)
    local t = torch.where(big, target, 2)
    local stirling = t * t:log() - t + (t * (2 * math.pi)):log() * 0.5
    l = l + torch.where(big, stirling, 0)
  end
  return reduce(l, o.reduction)
end

-- gaussian_nll_loss(input, target, var [, {full=false, eps=1e-6}]):
-- 0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with full);
-- var has input's shape, or it without the last dim, or with the last dim 1.  The clamp
-- passes var's gradient through unchanged, as PyTorch's in-place clamp under no_grad.
function M.gaussian_nll_loss(input, target, var, opts)
  local who = 'gaussian_nll_loss'
  local o = loss_options(who, opts, { full = false, eps = 1e-6 })
  float_input(who, input); check(who, target, 'target'); check(who, var, 'var')
  local si, sv = input:size(), var:size()
  local same = #si == #sv
  for i = 1, #si do same = same and si[i] == sv[i] end
  if not same then
    local lead = #sv == #si - 1
    for i = 1, #sv do lead = lead and sv[i] == si[i] end
    local last1 = #sv == #si and sv[#sv] == 1
    for i = 1, #sv - 1 do last1 = last1 and sv[i] == si[i] end
    if lead then var = var:unsqueeze(-1)
    elseif not last1 then fail('%s: var is of incorrect size: %s for input %s', who, shape(var), shape(input)) end
  end
  broadcastable(who, input, target, 'input', 'target')
  local eps = number(who, 'eps', o.eps)
  if var:numel() > 0 and var:detach():lt(0):any():item() then fail('%s: var has negative entry/entries', who) end
  var = var + (var:detach():clamp(eps) - var:detach())
  local d = input - target
  local l = (var:log() + d * d / var) * 0.5
  if o.full then l = l + 0.5 * math.log(2 * math.pi) end
  return reduce(l, o.reduction)
end

-- ---------------------------------------------------------------- CTC

-- a table of non-negative integers from a table or a 1-D integer tensor
local function int_list(who, what, v, n)
  local list
  if torch.is_tensor(v) then
    if v:dim() > 1 or (v.dtype ~= 'int64' and v.dtype ~= 'int32') then
      fail('%s: %s must be a 1-D integer tensor or a table of integers, got %s %s', who, what, v.dtype, shape(v))
    end
    list = v:dim() == 0 and { v:item() } or v:tolist()
  elseif type(v) == 'table' then
    list = v
  elseif math.type(v) == 'integer' then
    list = { v }
  else
    fail('%s: %s must be a 1-D integer tensor or a table of integers, got %s', who, what, type(v))
  end
  if n and #list ~= n then fail('%s: %s must have %d entries (one per batch element), got %d', who, what, n, #list) end
  for i, x in ipairs(list) do
    if math.type(x) ~= 'integer' or x < 0 then fail('%s: %s[%d] must be a non-negative integer, got %s', who, what, i, show(x)) end
  end
  return list
end

-- log(e^a + e^b + e^c) elementwise, written without -inf: every "impossible" entry holds
-- NEG, a large finite negative number, so the gradients stay finite (0 where a path has no
-- weight) instead of 0 * inf = NaN
local NEG = -1e30

local function logsumexp3(a, b, c)
  local m = torch.maximum(torch.maximum(a, b), c):detach()
  return ((a - m):exp() + (b - m):exp() + (c - m):exp()):log() + m
end

-- ctc_loss(log_probs, targets, input_lengths, target_lengths [, {blank=1, reduction='mean',
-- zero_infinity=false}]): the connectionist temporal classification loss (Graves et al.
-- 2006), the negative log of the total probability of the alignments of each target.
-- log_probs [T, N, C] (or unbatched [T, C]) are log-probabilities (log_softmax over C);
-- targets [N, S] padded or 1-D, all targets one after the other; the lengths are tables
-- or integer tensors.  Classes and blank count from 1 (PyTorch's blank=0 is blank=1 here).
-- 'mean' divides each loss by its target length, then averages over the batch.  An
-- impossible alignment (input too short) is inf, or 0 with zero_infinity (and no gradient).
-- The forward (alpha) recursion runs over the time steps in log space with tensor ops over
-- the batch and the extended label positions; autograd gives the backward.
function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
  local who = 'ctc_loss'
  local o = loss_options(who, opts, { blank = 1, zero_infinity = false })
  float_input(who, log_probs, 'log_probs'); check(who, targets, 'targets')
  local unbatched = log_probs:dim() == 2
  if unbatched then log_probs = log_probs:unsqueeze(2) end
  if log_probs:dim() ~= 3 then fail('%s: log_probs must be [T, N, C] or [T, C], got %s', who, shape(log_probs)) end
  local T, N, C = log_probs:size(1), log_probs:size(2), log_probs:size(3)
  local blank = o.blank
  if math.type(blank) ~= 'integer' or blank < 1 or blank > C then
    fail('%s: blank must be in 1..%d (dplua counts classes from 1), got %s', who, C, show(blank))
  end
  if targets.dtype ~= 'int64' and targets.dtype ~= 'int32' then fail('%s: targets must be an integer tensor, got %s', who, targets.dtype) end
  local in_len = int_list(who, 'input_lengths', input_lengths, N)
  local tg_len = int_list(who, 'target_lengths', target_lengths, N)
  -- each batch element's target as a list
  local seqs = {}
  local flat = targets:tolist()
  if unbatched and targets:dim() == 1 then flat = { flat } end
  if targets:dim() == 2 or (unbatched and targets:dim() == 1) then
    if #flat ~= N then fail('%s: targets has %d rows for a batch of %d', who, #flat, N) end
    for n = 1, N do
      if tg_len[n] > #flat[n] then fail('%s: target_lengths[%d] = %d is longer than the targets\' %d columns', who, n, tg_len[n], #flat[n]) end
      seqs[n] = { table.unpack(flat[n], 1, tg_len[n]) }
    end
  elseif targets:dim() == 1 then
    local at, total = 1, 0
    for n = 1, N do total = total + tg_len[n] end
    if total ~= #flat then fail('%s: the target_lengths add up to %d but the 1-D targets hold %d', who, total, #flat) end
    for n = 1, N do
      seqs[n] = { table.unpack(flat, at, at + tg_len[n] - 1) }
      at = at + tg_len[n]
    end
  else
    fail('%s: targets must be [N, S] or 1-D (concatenated), got %s', who, shape(targets))
  end
  local S = 0
  for n = 1, N do
    if in_len[n] > T then fail('%s: input_lengths[%d] = %d is longer than the %d time steps of log_probs', who, n, in_len[n], T) end
    for k, c in ipairs(seqs[n]) do
      if c < 1 or c > C or c == blank then
        fail('%s: target %d of sequence %d is %d: classes must be in 1..%d and not the blank (%d) (dplua counts classes from 1)',
          who, k, n, c, C, blank)
      end
    end
    S = math.max(S, #seqs[n])
  end
  local L = 2 * S + 1
  -- the extended labels (blank, l1, blank, l2, ..., blank) padded with blanks, and where
  -- the skip from s - 2 is allowed (a label differing from the one two back)
  local ext, skip = {}, {}
  for n = 1, N do
    local e, k = {}, {}
    for s = 1, L do
      local lab = s % 2 == 0 and seqs[n][s // 2] or nil
      e[s] = lab or blank
      k[s] = (lab ~= nil and s >= 3 and seqs[n][s // 2 - 1] ~= lab) and 1 or 0
    end
    ext[n], skip[n] = e, k
  end
  local device = log_probs.device
  local idx = torch.tensor(ext, { dtype = 'int64', device = device })           -- [N, L]
  local can_skip = torch.tensor(skip, { dtype = 'bool', device = device })       -- [N, L]
  local lp = log_probs:gather(3, idx:unsqueeze(1):expand(T, N, L))              -- [T, N, L]
  local topts = { dtype = log_probs.dtype, device = device }
  local neg1 = torch.full({ N, 1 }, NEG, topts)
  local neg2 = torch.full({ N, math.min(2, L) }, NEG, topts)
  -- alpha at t = 1: the first blank and the first label
  local start = {}
  for s = 1, L do start[s] = s <= 2 and 1 or 0 end
  local first = torch.tensor(start, { dtype = 'bool', device = device }):reshape(1, L)
  local alpha = torch.where(first, lp[1], NEG)
  local active = {}
  for t = 2, T do
    local a1 = torch.cat({ neg1, alpha:narrow(2, 1, L - 1) }, 2)
    local a2 = L > 2 and torch.where(can_skip, torch.cat({ neg2, alpha:narrow(2, 1, L - 2) }, 2), NEG) or alpha * 0 + NEG
    local nxt = logsumexp3(alpha, a1, a2) + lp[t]
    for n = 1, N do active[n] = t <= in_len[n] and 1 or 0 end
    alpha = torch.where(torch.tensor(active, { dtype = 'bool', device = device }):reshape(N, 1), nxt, alpha)
  end
  -- the end: the last label or the final blank of each target, at each input's last step
  local last, before, has_label = {}, {}, {}
  for n = 1, N do
    local ln = 2 * #seqs[n] + 1
    last[n], before[n], has_label[n] = { ln }, { math.max(ln - 1, 1) }, #seqs[n] > 0
  end
  local a_last = alpha:gather(2, torch.tensor(last, { dtype = 'int64', device = device }))
  local a_before = alpha:gather(2, torch.tensor(before, { dtype = 'int64', device = device }))
  a_before = torch.where(torch.tensor(has_label, { dtype = 'bool', device = device }):reshape(N, 1), a_before, NEG)
  local m = torch.maximum(a_last, a_before):detach()
  local nll = -(((a_last - m):exp() + (a_before - m):exp()):log() + m):reshape(N)
  -- impossible alignments (an input of length 0 among them) give about -NEG: inf as PyTorch
  local zero_len = {}
  for n = 1, N do zero_len[n] = in_len[n] == 0 and 1 or 0 end
  local bad = (nll:detach():gt(-NEG / 2):long() + torch.tensor(zero_len, { dtype = 'int64', device = device })):gt(0)
  nll = torch.where(bad, o.zero_infinity and 0 or math.huge, nll)
  if o.reduction == 'none' then return unbatched and nll:reshape({}) or nll end
  if o.reduction == 'sum' then return nll:sum() end
  local div = {}
  for n = 1, N do div[n] = math.max(tg_len[n], 1) end
  return (nll / torch.tensor(div, topts)):mean()
end

-- ---------------------------------------------------------------- the modules

-- nn.NAME([{reduction='mean', ...}]): forward(inputs...) is fn(inputs..., opts); tensor
-- options (weight) are buffers, so they move with the module
local function loss(name, fn, defaults, nargs)
  local class, parent = torch.class('nn.' .. name, 'nn.Module')
  defaults = defaults or {}
  function class:__init(opts)
    parent.__init(self)
    local o = loss_options('nn.' .. name, opts, defaults)
    self.reduction = o.reduction
    for k in pairs(defaults) do
      local v = o[k]
      if torch.is_tensor(v) then self:register_buffer(k, v) elseif v ~= nil then self[k] = v end
    end
  end
  function class:forward(...)
    local given = { ... }
    if select('#', ...) ~= nargs then
      fail('nn.%s: expected %d tensors, got %d', name, nargs, select('#', ...))
    end
    local o = { reduction = self.reduction }
    for k in pairs(defaults) do o[k] = self[k] end
    given[nargs + 1] = o
    return fn(table.unpack(given, 1, nargs + 1))
  end
  M[name] = class
end

local none = options.none
loss('MarginRankingLoss', M.margin_ranking_loss, { margin = 0.0 }, 3)
loss('HingeEmbeddingLoss', M.hinge_embedding_loss, { margin = 1.0 }, 2)
loss('SoftMarginLoss', M.soft_margin_loss, {}, 2)
loss('MultiLabelSoftMarginLoss', M.multilabel_soft_margin_loss, { weight = none }, 2)
loss('MultiLabelMarginLoss', M.multilabel_margin_loss, {}, 2)
loss('CosineEmbeddingLoss', M.cosine_embedding_loss, { margin = 0.0 }, 3)
loss('MultiMarginLoss', M.multi_margin_loss, { p = 1, margin = 1.0, weight = none }, 2)
loss('TripletMarginLoss', M.triplet_margin_loss, { margin = 1.0, p = 2.0, eps = 1e-6, swap = false }, 3)
loss('PoissonNLLLoss', M.poisson_nll_loss, { log_input = true, full = false, eps = 1e-8 }, 2)
loss('GaussianNLLLoss', M.gaussian_nll_loss, { full = false, eps = 1e-6 }, 3)
-- nn.CTCLoss([{blank=1, reduction='mean', zero_infinity=false}])(log_probs, targets, input_lengths, target_lengths)
loss('CTCLoss', M.ctc_loss, { blank = 1, zero_infinity = false }, 4)

function M.install(F)
  for _, name in ipairs { 'margin_ranking_loss', 'hinge_embedding_loss', 'soft_margin_loss', 'multilabel_soft_margin_loss',
                          'multilabel_margin_loss', 'cosine_embedding_loss', 'multi_margin_loss', 'triplet_margin_loss',
                          'poisson_nll_loss', 'gaussian_nll_loss', 'ctc_loss' } do
    F[name] = M[name]
  end
end

return M
