-- nn.functional.affine_grid and grid_sample: the sampling grid of an affine transform and
-- the bilinear or nearest sampling of an image at a grid (the spatial transformer
-- network's two steps), 4-D (images) only.  PyTorch 1.13's results; both are compositions
-- of the engine's ops (gather over the flattened plane), so autograd differentiates them
-- on every device, with respect to the image and to the grid.
local torch = require 'torch'
local utils = require 'nn.utils'

local check = utils.check_tensor

local M = {}

local function is_float(t) return t.dtype == 'float32' or t.dtype == 'float64' end

-- the n pixel centres' normalised coordinates in [-1, 1]
local function base_coords(n, align_corners, like)
  local o = { dtype = like.dtype, device = like.device }
  if n == 1 then return torch.zeros(1, o) end
  local r = torch.linspace(-1, 1, n, o)
  if not align_corners then r = r * ((n - 1) / n) end
  return r
end

-- affine_grid(theta [N, 2, 3], size {N, C, H, W} [, align_corners=false]) -> grid [N, H, W, 2],
-- grid[n][h][w] = theta[n] (x_w, y_h, 1): (x, y) normalised to [-1, 1], x along the width
function M.affine_grid(theta, size, align_corners)
  local who = 'affine_grid'
  check(who, theta, 'theta')
  if type(align_corners) == 'table' then align_corners = utils.options(who, align_corners, { align_corners = false }).align_corners end
  if not is_float(theta) then
    utils.error(('%s: expected theta to be a float32 or float64 tensor, got %s'):format(who, theta.dtype))
  end
  if type(size) ~= 'table' and not (getmetatable(size) and size.numel) then
    utils.error(('%s: size must be a table {N, C, H, W}, got %s'):format(who, tostring(size)))
  end
  local sz = {}
  for i = 1, #size do sz[i] = size[i] end
  if #sz == 5 then
    utils.error(('%s: 3-D (5-D size) grids are not supported, got size {%s}'):format(who, table.concat(sz, ', ')))
  end
  if #sz ~= 4 then
    utils.error(('%s: size must hold 4 numbers {N, C, H, W}, got %d'):format(who, #sz))
  end
  local N, H, W = sz[1], sz[3], sz[4]
  for i = 1, 4 do
    if math.type(sz[i]) ~= 'integer' or sz[i] < 1 then
      utils.error(('%s: size must hold positive integers, got {%s}'):format(who, table.concat(sz, ', ')))
    end
  end
  if theta:dim() ~= 3 or theta:size(1) ~= N or theta:size(2) ~= 2 or theta:size(3) ~= 3 then
    utils.error(('%s: expected a batch of 2-D affine matrices of shape [%d, 2, 3] for size {%s}, got theta of shape %s')
      :format(who, N, table.concat(sz, ', '), utils.shape(theta)))
  end
  local align = align_corners and true or false
  local xs = base_coords(W, align, theta):view(1, W):expand(H, W)
  local ys = base_coords(H, align, theta):view(H, 1):expand(H, W)
  local base = torch.stack({ xs, ys, torch.ones_like(xs) }, 3):reshape(1, H * W, 3)
  return base:matmul(theta:transpose(2, 3)):view(N, H, W, 2)
end

-- PyTorch's reflect_coordinates: x reflected into [lo2 / 2, hi2 / 2]
local function reflect(x, lo2, hi2)
  if lo2 == hi2 then return x * 0 end
  local min, span = lo2 / 2, (hi2 - lo2) / 2
  local a = (x - min):abs()
  local extra = torch.fmod(a, span)
  local flips = (a / span):floor()
  local even = torch.fmod(flips, 2):eq(0)
  return torch.where(even, extra + min, (extra * -1) + (span + min))
end

-- a normalised coordinate -> pixel coordinate (from 0) under the padding mode
local function source_index(coord, n, align, padding_mode)
  local x
  if align then x = (coord + 1) * ((n - 1) / 2) else x = ((coord + 1) * n - 1) / 2 end
  if padding_mode == 'border' then
    x = x:clamp(0, n - 1)
  elseif padding_mode == 'reflection' then
    x = align and reflect(x, 0, 2 * (n - 1)) or reflect(x, -1, 2 * n - 1)
    x = x:clamp(0, n - 1)
  end
  return x
end

-- the values of flat [N, C, H*W] at pixels (ix, iy) [N, P] (float, whole numbers), zero where
-- outside the image
local function pick(flat, ix, iy, W, H)
  local inside = ix:ge(0):logical_and(ix:le(W - 1)):logical_and(iy:ge(0)):logical_and(iy:le(H - 1))
  local idx = (iy:clamp(0, H - 1) * W + ix:clamp(0, W - 1)):long() + 1
  local N, Cn, P = flat:size(1), flat:size(2), idx:size(2)
  local v = flat:gather(3, idx:unsqueeze(2):expand(N, Cn, P))
  return v * inside:unsqueeze(2):to(flat.dtype)
end

-- grid_sample(input [N, C, H, W], grid [N, Ho, Wo, 2] [, {mode='bilinear', padding_mode='zeros',
-- align_corners=false}]) -> [N, C, Ho, Wo]: input sampled at grid's (x, y) in [-1, 1]
function M.grid_sample(input, grid, mode, padding_mode, align_corners)
  local who = 'grid_sample'
  check(who, input, 'input')
  check(who, grid, 'grid')
  if type(mode) == 'table' then
    local o = utils.options(who, mode, { mode = 'bilinear', padding_mode = 'zeros', align_corners = false })
    mode, padding_mode, align_corners = o.mode, o.padding_mode, o.align_corners
  end
  mode, padding_mode = mode or 'bilinear', padding_mode or 'zeros'
  if mode ~= 'bilinear' and mode ~= 'nearest' then
    utils.error(("%s: mode must be 'bilinear' or 'nearest', got %s"):format(who, tostring(mode)))
  end
  if padding_mode ~= 'zeros' and padding_mode ~= 'border' and padding_mode ~= 'reflection' then
    utils.error(("%s: padding_mode must be 'zeros', 'border' or 'reflection', got %s"):format(who, tostring(padding_mode)))
  end
  if input:dim() == 5 then
    utils.error(('%s: 5-D (volumetric) input is not supported, got shape %s'):format(who, utils.shape(input)))
  end
  if input:dim() ~= 4 or grid:dim() ~= 4 or grid:size(4) ~= 2 or grid:size(1) ~= input:size(1) then
    utils.error(('%s: expected input [N, C, H, W] and grid [N, Ho, Wo, 2] with the same N, got input %s and grid %s')
      :format(who, utils.shape(input), utils.shape(grid)))
  end
  if not is_float(input) or input.dtype ~= grid.dtype then
    utils.error(('%s: expected input and grid of one floating point dtype, got %s and %s'):format(who, input.dtype, grid.dtype))
  end
  if input.device ~= grid.device then
    utils.error(('%s: expected input and grid on one device, got %s and %s'):format(who, tostring(input.device), tostring(grid.device)))
  end
  local N, Cn, H, W = input:size(1), input:size(2), input:size(3), input:size(4)
  local Ho, Wo = grid:size(2), grid:size(3)
  local align = align_corners and true or false
  local g = grid:reshape(N, Ho * Wo, 2)
  local ix = source_index(g:select(3, 1), W, align, padding_mode)
  local iy = source_index(g:select(3, 2), H, align, padding_mode)
  local flat = input:reshape(N, Cn, H * W)
  local out
  if mode == 'nearest' then
    out = pick(flat, ix:detach():round(), iy:detach():round(), W, H)
  else
    local x0, y0 = ix:detach():floor(), iy:detach():floor()
    local x1, y1 = x0 + 1, y0 + 1
    local wx1, wy1 = (ix - x0):unsqueeze(2), (iy - y0):unsqueeze(2)
    local wx0, wy0 = 1 - wx1, 1 - wy1
    out = pick(flat, x0, y0, W, H) * (wx0 * wy0) + pick(flat, x1, y0, W, H) * (wx1 * wy0)
        + pick(flat, x0, y1, W, H) * (wx0 * wy1) + pick(flat, x1, y1, W, H) * (wx1 * wy1)
  end
  return out:view(N, Cn, Ho, Wo)
end

function M.install(F)
  F.affine_grid = M.affine_grid
  F.grid_sample = M.grid_sample
end

return M
