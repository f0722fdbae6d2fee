-- optim.LBFGS(params, {lr=1, max_iter=20, max_eval=max_iter*5//4, tolerance_grad=1e-7,
-- tolerance_change=1e-9, history_size=100, line_search_fn=nil | 'strong_wolfe'}):
-- PyTorch 1.13's L-BFGS, step for step.  step(closure) needs the closure (it zeroes the
-- gradients, computes the loss, calls backward and returns the loss) and runs up to
-- max_iter iterations:
--
--   local opt = optim.LBFGS(model:parameters(), {line_search_fn = 'strong_wolfe'})
--   opt:step(function()
--     opt:zero_grad()
--     local loss = crit(model(x), y)
--     loss:backward()
--     return loss
--   end)
--
-- All parameters form one flat vector (one parameter group only).  The scalars of the
-- algorithm (dot products, step lengths) are Lua numbers (float64); PyTorch keeps them as
-- tensors of the parameters' dtype, so float32 problems agree to float32 rounding.
local torch = require 'torch'
local utils = require 'nn.utils'
local options = require 'torch.options'

local LBFGS, parent = torch.class('optim.LBFGS', 'optim.Optimizer')

-- the settings in PyTorch's positional order (optim.LBFGS(params, 0.1)), or by name in a last table
function LBFGS:__init(params, ...)
  local opts = utils.positional('optim.LBFGS', { 'lr', 'max_iter', 'max_eval', 'tolerance_grad', 'tolerance_change', 'history_size', 'line_search_fn' }, ...)
  local defaults = utils.options('optim.LBFGS', opts, {
    lr = 1, max_iter = 20, max_eval = options.none, tolerance_grad = 1e-7, tolerance_change = 1e-9,
    history_size = 100, line_search_fn = options.none,
  })
  if defaults.max_eval == nil and math.type(defaults.max_iter) == 'integer' then
    defaults.max_eval = defaults.max_iter * 5 // 4
  end
  parent.__init(self, params, defaults, 'optim.LBFGS')
  if #self.param_groups ~= 1 then
    utils.error("optim.LBFGS: LBFGS doesn't support per-parameter options (parameter groups)")
  end
  self._params = self.param_groups[1].params
end

function LBFGS:check(g)
  parent.check_number(self, 'learning rate', g.lr, 0)
  for _, k in ipairs { 'max_iter', 'max_eval', 'history_size' } do
    if math.type(g[k]) ~= 'integer' or g[k] < 1 then
      utils.error(('%s: invalid %s: %s (expected a positive integer)'):format(self.name, k, tostring(g[k])))
    end
  end
  parent.check_number(self, 'tolerance_grad', g.tolerance_grad, 0)
  parent.check_number(self, 'tolerance_change', g.tolerance_change, 0)
  if g.line_search_fn ~= nil and g.line_search_fn ~= 'strong_wolfe' then
    utils.error(("%s: only 'strong_wolfe' is supported as line_search_fn, got %s"):format(self.name, options.show(g.line_search_fn)))
  end
end

function LBFGS:add_param_group(group)
  if #self.param_groups >= 1 then
    utils.error("optim.LBFGS: LBFGS doesn't support per-parameter options (parameter groups)")
  end
  parent.add_param_group(self, group)
end

-- the gradients as one vector (zeros for a parameter without one)
function LBFGS:_gather_flat_grad()
  local views = {}
  for i, p in ipairs(self._params) do
    views[i] = p.grad and p.grad:reshape(-1) or torch.zeros({ p:numel() }, { dtype = p.dtype, device = p.device })
  end
  return torch.cat(views, 1)
end

-- p += step_size * the piece of update that is p's
function LBFGS:_add_grad(step_size, update)
  local offset = 0
  for _, p in ipairs(self._params) do
    local n = p:numel()
    p:add_(update:narrow(1, offset + 1, n):view(p:size()), step_size)
    offset = offset + n
  end
end

function LBFGS:_clone_param()
  local r = {}
  for i, p in ipairs(self._params) do r[i] = p:clone() end
  return r
end

function LBFGS:_set_param(data)
  for i, p in ipairs(self._params) do p:copy_(data[i]) end
end

local function number(v)
  if torch.is_tensor(v) then return v:item() end
  if type(v) ~= 'number' then
    utils.error(('optim.LBFGS: the closure must return the loss (a number or a one-element tensor), got %s'):format(type(v)))
  end
  return v
end

-- the loss and flat gradient at x + t d (the parameters are put back to x afterwards)
function LBFGS:_directional_evaluate(closure, x, t, d)
  self:_add_grad(t, d)
  local loss = number(closure())
  local g = self:_gather_flat_grad()
  self:_set_param(x)
  return loss, g
end

local function dot(a, b) return a:dot(b):item() end
local function absmax(t) return t:abs():max():item() end

-- the minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), within bounds
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  if lo == nil then
    if x1 <= x2 then lo, hi = x1, x2 else lo, hi = x2, x1 end
  end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then
      min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else
      min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    end
    return math.min(math.max(min_pos, lo), hi)
  end
  return (lo + hi) / 2
end

-- the strong Wolfe line search (bracketing, then zoom), as PyTorch's _strong_wolfe
local function strong_wolfe(obj_func, x, t, d, f, g, gtd)
  local c1, c2, tolerance_change, max_ls = 1e-4, 0.9, 1e-9, 25
  local d_norm = absmax(d)
  g = g:clone()
  local f_new, g_new = obj_func(x, t, d)
  local ls_func_evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done = false
  local ls_iter = 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g = { t }, { f_new }, { g_new }
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f = { t_prev, t }, { f_prev, f_new }
      bracket_g, bracket_gtd = { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    local min_step = t + 0.01 * (t - t_prev)
    local max_step = t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g = { 0, t }, { f, f_new }, { g, g_new }
  end

  -- zoom: shrink the bracket to a point that satisfies the conditions
  local insuf_progress = false
  local low, high = 1, 2
  if not (bracket_f[1] <= bracket_f[#bracket_f]) then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = ls_func_evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > f + c1 * t * gtd or f_new >= bracket_f[low] then
      bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new:clone(), gtd_new
      if bracket_f[1] <= bracket_f[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
        bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
      end
      bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new:clone(), gtd_new
    end
  end
  if #bracket == 1 then low = 1 end
  return bracket_f[low], bracket_g[low], bracket[low], ls_func_evals
end

function LBFGS:step(closure)
  if type(closure) ~= 'function' then
    utils.error(('optim.LBFGS: step needs a closure that recomputes the loss (it calls backward and returns the loss), got %s')
      :format(type(closure)))
  end
  local function eval() return torch.enable_grad(closure) end
  return torch.no_grad(function() return self:_step(eval) end)
end

function LBFGS:_step(closure)
  local group = self.param_groups[1]
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local history_size = group.history_size

  -- the state is global, kept with the first parameter (as PyTorch, for state_dict)
  local p1 = self._params[1]
  local state = self.state[p1]
  if state == nil then state = {}; self.state[p1] = state end
  state.func_evals = state.func_evals or 0
  state.n_iter = state.n_iter or 0

  local orig_loss = closure()
  local loss = number(orig_loss)
  local current_evals = 1
  state.func_evals = state.func_evals + 1

  local flat_grad = self:_gather_flat_grad()
  local opt_cond = absmax(flat_grad) <= tolerance_grad
  if opt_cond then return orig_loss end

  local d, t = state.d, state.t
  -- the history lists are copied, so that a state_dict() taken earlier (or loaded into
  -- another optimizer) is not changed by this step
  local function copy(list) return list and { table.unpack(list) } end
  local old_dirs, old_stps, ro = copy(state.old_dirs), copy(state.old_stps), copy(state.ro)
  local H_diag, prev_flat_grad, prev_loss = state.H_diag, state.prev_flat_grad, state.prev_loss

  local n_iter = 0
  while n_iter < max_iter do
    n_iter = n_iter + 1
    state.n_iter = state.n_iter + 1

    -- the descent direction
    if state.n_iter == 1 then
      d = -flat_grad
      old_dirs, old_stps, ro = {}, {}, {}
      H_diag = 1
    else
      local y = flat_grad - prev_flat_grad
      local s = d * t
      local ys = dot(y, s)
      if ys > 1e-10 then
        if #old_dirs == history_size then
          table.remove(old_dirs, 1)
          table.remove(old_stps, 1)
          table.remove(ro, 1)
        end
        old_dirs[#old_dirs + 1] = y
        old_stps[#old_stps + 1] = s
        ro[#ro + 1] = 1 / ys
        H_diag = ys / dot(y, y)
      end
      local num_old = #old_dirs
      local al = {}
      local q = -flat_grad
      for i = num_old, 1, -1 do
        al[i] = dot(old_stps[i], q) * ro[i]
        q:add_(old_dirs[i], -al[i])
      end
      local r = q * H_diag
      for i = 1, num_old do
        local be_i = dot(old_dirs[i], r) * ro[i]
        r:add_(old_stps[i], al[i] - be_i)
      end
      d = r
    end
    if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone() else prev_flat_grad:copy_(flat_grad) end
    prev_loss = loss

    -- the step length
    if state.n_iter == 1 then
      t = math.min(1, 1 / flat_grad:abs():sum():item()) * lr
    else
      t = lr
    end
    local gtd = dot(flat_grad, d)
    if gtd > -tolerance_change then break end

    local ls_func_evals = 0
    if group.line_search_fn ~= nil then
      local x_init = self:_clone_param()
      local function obj_func(x, tt, dd) return self:_directional_evaluate(closure, x, tt, dd) end
      loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd)
      self:_add_grad(t, d)
      opt_cond = absmax(flat_grad) <= tolerance_grad
    else
      self:_add_grad(t, d)
      if n_iter ~= max_iter then
        loss = number(closure())
        flat_grad = self:_gather_flat_grad()
        opt_cond = absmax(flat_grad) <= tolerance_grad
        ls_func_evals = 1
      end
    end
    current_evals = current_evals + ls_func_evals
    state.func_evals = state.func_evals + ls_func_evals

    if n_iter == max_iter then break end
    if current_evals >= max_eval then break end
    if opt_cond then break end
    if absmax(d * t) <= tolerance_change then break end
    if math.abs(loss - prev_loss) < tolerance_change then break end
  end

  state.d, state.t = d, t
  state.old_dirs, state.old_stps, state.ro = old_dirs, old_stps, ro
  state.H_diag, state.prev_flat_grad, state.prev_loss = H_diag, prev_flat_grad, prev_loss
  return orig_loss
end

return LBFGS
