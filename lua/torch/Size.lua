-- torch.Size: the shape of a tensor, as t:size() and t.shape return it.
-- A sequence of integers (s[1], #s, ipairs) that compares with == (also against a plain
-- table), prints as PyTorch does (torch.Size([30, 5])) and knows its numel().
local Size = {}
Size.__index = Size
Size.__name = 'torch.Size'

local function check_entry(v, i)
  if math.type(v) ~= 'integer' or v < 0 then
    error(('torch.Size: entry %d must be a non-negative integer, got %s'):format(i, tostring(v)), 3)
  end
  return v
end

-- torch.Size{30, 5}, torch.Size(30, 5) or torch.Size() (0-d)
local function new(_, first, ...)
  local src = type(first) == 'table' and first or { first, ... }
  local s = {}
  for i = 1, #src do s[i] = check_entry(src[i], i) end
  return setmetatable(s, Size)
end

function Size.__eq(a, b)
  if type(a) ~= 'table' or type(b) ~= 'table' or #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

function Size.__tostring(s)
  return 'torch.Size([' .. table.concat(s, ', ') .. '])'
end

function Size.__concat(a, b)
  return tostring(a) .. tostring(b)
end

-- the number of elements of a tensor of this shape
function Size:numel()
  local n = 1
  for i = 1, #self do n = n * self[i] end
  return n
end

-- a plain table copy
function Size:totable()
  return { table.unpack(self) }
end

return setmetatable(Size, { __call = new })
