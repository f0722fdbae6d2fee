-- optim.ConfusionMatrix: Torch7's confusion matrix of a classifier.
--
--   local confusion = optim.ConfusionMatrix({'cat', 'dog', 'bird'})   -- or a class count
--   confusion:add(scores, target)        -- scores of one sample (or its class), a class 1..n
--   confusion:batchAdd(scores, targets)  -- [N, n] scores (or [N] classes), [N] classes
--   print(confusion)                     -- the matrix, each row's accuracy, the totals
--   confusion.totalValid                 -- the global accuracy, after print or updateValids()
--   confusion:zero()
--
-- mat[t][p] counts the samples of class t predicted as p (an int64 tensor).  A prediction
-- given as scores is their argmax; a target given as a one-hot vector is its argmax.
local torch = require 'torch'

local ConfusionMatrix = {}
-- mat is made from the counts when read, so that it is current after every add
function ConfusionMatrix.__index(self, k)
  if k == 'mat' then return torch.tensor(rawget(self, 'counts'), { dtype = 'int64' }) end
  return ConfusionMatrix[k]
end

local function new(_, nclasses, classes)
  if type(nclasses) == 'table' then nclasses, classes = #nclasses, nclasses end
  if math.type(nclasses) ~= 'integer' or nclasses < 1 then
    error(('optim.ConfusionMatrix: expected a class count or a list of class names, got %s'):format(tostring(nclasses)), 2)
  end
  local self = setmetatable({ nclasses = nclasses, classes = classes or {} }, ConfusionMatrix)
  self.counts = {}
  for t = 1, nclasses do
    self.counts[t] = {}
    for p = 1, nclasses do self.counts[t][p] = 0 end
  end
  self.valids = torch.zeros(nclasses)
  self.unionvalids = torch.zeros(nclasses)
  self.totalValid, self.averageValid, self.averageUnionValid = 0, 0, 0
  return self
end
setmetatable(ConfusionMatrix, { __call = new })

-- a class number from a number, a 0-dim or one-element tensor, or a vector of scores
local function class_of(self, v, what)
  if torch.is_tensor(v) then
    if v:numel() == 1 then
      v = v:item()
    else
      if v:numel() ~= self.nclasses then
        error(('ConfusionMatrix:add: %s has %d values, expected %d (one per class) or one class number')
          :format(what, v:numel(), self.nclasses), 3)
      end
      return v:reshape(-1):argmax(1):item()
    end
  end
  if type(v) ~= 'number' or v ~= math.floor(v) or v < 1 or v > self.nclasses then
    error(('ConfusionMatrix:add: %s must be a class between 1 and %d, got %s'):format(what, self.nclasses, tostring(v)), 3)
  end
  return math.tointeger(v)
end

function ConfusionMatrix:_count(t, p)
  self.counts[t][p] = self.counts[t][p] + 1
end

function ConfusionMatrix:add(prediction, target)
  local p = class_of(self, prediction, 'the prediction')
  local t = class_of(self, target, 'the target')
  self:_count(t, p)
  return self
end

function ConfusionMatrix:batchAdd(predictions, targets)
  local preds = predictions
  if torch.is_tensor(preds) and preds:dim() == 2 then preds = preds:argmax(2) end
  local tg = targets
  if torch.is_tensor(tg) and tg:dim() == 2 then tg = tg:argmax(2) end
  preds = torch.is_tensor(preds) and preds:reshape(-1):tolist() or preds
  tg = torch.is_tensor(tg) and tg:reshape(-1):tolist() or tg
  if #preds ~= #tg then
    error(('ConfusionMatrix:batchAdd: %d predictions but %d targets'):format(#preds, #tg), 2)
  end
  for i = 1, #preds do self:_count(class_of(self, tg[i], 'a target'), class_of(self, preds[i], 'a prediction')) end
  return self
end

function ConfusionMatrix:zero()
  for t = 1, self.nclasses do
    for p = 1, self.nclasses do self.counts[t][p] = 0 end
  end
  self:updateValids()
  return self
end

-- mat, valids (each class's accuracy), unionvalids (the VOC measure), totalValid,
-- averageValid and averageUnionValid from the counts
function ConfusionMatrix:updateValids()
  local n, total, correct = self.nclasses, 0, 0
  local rows, cols = {}, {}
  for t = 1, n do rows[t], cols[t] = 0, 0 end
  for t = 1, n do
    for p = 1, n do
      local c = self.counts[t][p]
      rows[t], cols[p], total = rows[t] + c, cols[p] + c, total + c
    end
    correct = correct + self.counts[t][t]
  end
  local valids, unions, vsum, usum, counted = {}, {}, 0, 0, 0
  for t = 1, n do
    local d = self.counts[t][t]
    valids[t] = rows[t] > 0 and d / rows[t] or 0
    local u = rows[t] + cols[t] - d
    unions[t] = u > 0 and d / u or 0
    if rows[t] > 0 then vsum, usum, counted = vsum + valids[t], usum + unions[t], counted + 1 end
  end
  self.valids, self.unionvalids = torch.tensor(valids, { dtype = 'float32' }), torch.tensor(unions, { dtype = 'float32' })
  self.totalValid = total > 0 and correct / total or 0
  self.averageValid = counted > 0 and vsum / counted or 0
  self.averageUnionValid = counted > 0 and usum / counted or 0
  return self
end

function ConfusionMatrix:__tostring()
  self:updateValids()
  local n, width = self.nclasses, 1
  for t = 1, n do
    for p = 1, n do width = math.max(width, #tostring(self.counts[t][p])) end
  end
  local valids = self.valids:tolist()
  local lines = { 'ConfusionMatrix:' }
  for t = 1, n do
    local cells = {}
    for p = 1, n do cells[p] = ('%' .. width .. 'd'):format(self.counts[t][p]) end
    local open, close = t == 1 and '[[' or ' [', t == n and ']]' or ']'
    local name = self.classes[t] and ('\t[class: %s]'):format(self.classes[t]) or ''
    lines[#lines + 1] = ('%s%s%s   %.3f%%%s'):format(open, table.concat(cells, ' '), close, valids[t] * 100, name)
  end
  lines[#lines + 1] = (' + average row correct: %s%%'):format(('%.3f'):format(self.averageValid * 100))
  lines[#lines + 1] = (' + average rowUcol correct (VOC measure): %s%%'):format(('%.3f'):format(self.averageUnionValid * 100))
  lines[#lines + 1] = (' + global correct: %s%%'):format(('%.3f'):format(self.totalValid * 100))
  return table.concat(lines, '\n')
end

return ConfusionMatrix
