-- torch.linalg: inv, solve, det, slogdet, cholesky, qr, svd, svdvals, eigh, eigvalsh,
-- lstsq, pinv, matrix_rank, matrix_power, norm, vector_norm, matrix_norm, cross,
-- solve_triangular, and the older torch.* names (inverse, det, logdet, slogdet, svd, qr,
-- cholesky, cholesky_solve, triangular_solve).  See doc/tensor.md.
--
-- The factorizations run LAPACK (OpenBLAS) on the CPU in float64, batched over the leading
-- dims; float32 inputs get float32 results, and a CUDA tensor is copied to the host,
-- computed there and copied back (cuSOLVER is not used yet).  Autograd: inv, solve, det,
-- slogdet, logdet, cholesky, eigh / eigvalsh, svd's singular values (svdvals, the nuclear
-- and spectral norms), solve_triangular, and whatever is composed of them; qr, lstsq and
-- pinv give results without gradients.
local torch = require 'torch'
local C = require 'torch._C'

local linalg = {}

local options = require 'torch.options'
-- errors point at the caller's line outside the library
local function fail(fmt, ...) options.error(fmt:format(...)) end
local function is_float(t) return t.dtype == 'float32' or t.dtype == 'float64' end

local function check_matrix(who, A, name)
  name = name or 'A'
  if not torch.is_tensor(A) then fail('%s: %s must be a tensor, got %s', who, name, type(A)) end
  if A:dim() < 2 then
    fail('%s: %s must have at least 2 dimensions (batches of matrices), but it has %d', who, name, A:dim())
  end
  if not is_float(A) then fail('%s: expected a floating point tensor, got %s', who, A.dtype) end
end
local function check_square(who, A, name)
  check_matrix(who, A, name)
  if A:size(-1) ~= A:size(-2) then
    fail('%s: %s must be batches of square matrices, but they are %d by %d matrices', who, name or 'A', A:size(-2), A:size(-1))
  end
end

-- the host float64 copy LAPACK reads, and a result put back on t's device and dtype
local function host(t) return t:detach():to { device = 'cpu', dtype = 'float64' }:contiguous() end
local function back(r, like) return r:to { device = like.device, dtype = like.dtype } end

local function mT(t) return t:transpose(-1, -2) end
local function batch_of(t, k)
  local s = t:size():totable()
  for _ = 1, k do table.remove(s) end
  return s
end
local function same_shape(a, b) return tostring(torch.Size(a)) == tostring(torch.Size(b)) end
local function concat(a, b)
  local r = { table.unpack(a) }
  for _, v in ipairs(b) do r[#r + 1] = v end
  return r
end

-- A and B with their batch dims broadcast (B's last two dims kept)
local function broadcast_pair(who, A, B)
  local ok, batch = pcall(torch.broadcast_shapes, batch_of(A, 2), batch_of(B, 2))
  if not ok then
    fail('%s: the batch dims of A %s and B %s do not broadcast', who, tostring(A:size()), tostring(B:size()))
  end
  batch = batch:totable()
  return A:expand(concat(batch, { A:size(-2), A:size(-1) })), B:expand(concat(batch, { B:size(-2), B:size(-1) }))
end

local Function = torch.autograd.Function

-- ------------------------------------------------------------------ inv

local Inv = Function:extend('LinalgInvExBackward0')
function Inv.forward(ctx, A)
  local Y = back(C._lapack_inv(host(A)), A)
  ctx:save_for_backward(Y)
  return Y
end
function Inv.backward(ctx, g)
  local Y = ctx.saved_tensors[1]
  return -mT(Y):matmul(g):matmul(mT(Y))
end

function linalg.inv(A)
  check_square('linalg.inv', A)
  return Inv.apply(A)
end

-- ------------------------------------------------------------------ slogdet, det

local Slogdet = Function:extend('LinalgSlogdetBackward0')
function Slogdet.forward(ctx, A)
  local s, l = C._lapack_slogdet(host(A))
  ctx:save_for_backward(A)
  return back(s, A), back(l, A)
end
function Slogdet.backward(ctx, _, glog)
  local A = ctx.saved_tensors[1]
  return glog:unsqueeze(-1):unsqueeze(-1) * mT(linalg.inv(A))
end

-- slogdet(A): sign, log|det A| (the gradient flows through the second)
function linalg.slogdet(A)
  check_square('linalg.slogdet', A)
  return Slogdet.apply(A)
end

-- the determinant of empty matrices, 1: PyTorch's gradient of it is None (no tensor)
local DetEmpty = Function:extend('LinalgDetBackward0')
function DetEmpty.forward(_, A)
  return torch.ones(batch_of(A, 2), { dtype = A.dtype, device = A.device })
end
function DetEmpty.backward() return nil end

-- det(A) = sign * exp(logabsdet): its gradient det * A^-T needs an invertible A
function linalg.det(A)
  check_square('linalg.det', A)
  if A:numel() == 0 then return DetEmpty.apply(A) end
  local s, l = linalg.slogdet(A)
  return s * l:exp()
end

-- ------------------------------------------------------------------ solve

-- the gradient of a broadcast input, summed back to its own shape
local function unbroadcast(g, shape)
  for _ = 1, g:dim() - #shape do g = g:sum(1) end
  for d = 1, #shape do
    if shape[d] == 1 and g:size(d) ~= 1 then g = g:sum(d, true) end
  end
  return g
end

-- A X = B with A (..., n, n) and B (..., n, k), the batch dims broadcast; the gradients
-- are summed back to A's and B's own shapes
local Solve = Function:extend('LinalgSolveExBackward0')
function Solve.forward(ctx, A, B)
  local Ab, Bb = broadcast_pair('linalg.solve', A, B)
  local X = back(C._lapack_solve(host(Ab), host(Bb)), B)
  ctx:save_for_backward(Ab, X)
  ctx.ashape, ctx.bshape = A:size():totable(), B:size():totable()
  return X
end
function Solve.backward(ctx, g)
  local A, X = table.unpack(ctx.saved_tensors)
  local gB = linalg.solve(mT(A), g)
  return unbroadcast(-gB:matmul(mT(X)), ctx.ashape), unbroadcast(gB, ctx.bshape)
end

-- solve(A, B [, {left=true}]): X with A X = B (B a vector or batches of matrices), or
-- X A = B with left=false
function linalg.solve(A, B, opts)
  check_square('linalg.solve', A)
  if not torch.is_tensor(B) then fail('linalg.solve: B must be a tensor, got %s', type(B)) end
  if opts and opts.left == false then return mT(linalg.solve(mT(A), mT(B))) end
  local vector = B:dim() == 1 or (B:dim() == A:dim() - 1 and same_shape(B:size():totable(), batch_of(A, 1)))
  local Bm = vector and B:unsqueeze(-1) or B
  if Bm:size(-2) ~= A:size(-1) then
    fail('linalg.solve: incompatible shapes of A %s and B %s (A is %d by %d, B has %d rows)',
      tostring(A:size()), tostring(B:size()), A:size(-2), A:size(-1), Bm:size(-2))
  end
  local dt = (A.dtype == 'float64' or B.dtype == 'float64') and 'float64' or 'float32'
  local X = Solve.apply(A:to(dt), Bm:to(dt))
  return vector and X:squeeze(-1) or X
end

-- ------------------------------------------------------------------ triangular solves

local Trsolve = Function:extend('LinalgSolveTriangularBackward0')
function Trsolve.forward(ctx, A, B, upper, unit)
  local X = back(C._lapack_trsolve(host(A), host(B), upper, unit), B)
  ctx:save_for_backward(A, X)
  ctx.upper, ctx.unit = upper, unit
  return X
end
function Trsolve.backward(ctx, g)
  local A, X = table.unpack(ctx.saved_tensors)
  local gB = back(C._lapack_trsolve(host(mT(A)), host(g), not ctx.upper, ctx.unit), g)
  local gA = -gB:matmul(mT(X))
  gA = ctx.upper and gA:triu(ctx.unit and 1 or 0) or gA:tril(ctx.unit and -1 or 0)
  return gA, gB
end

-- solve_triangular(A, B, {upper=, left=true, unitriangular=false}): X with A X = B for a
-- triangular A (only its upper or lower triangle is read), or X A = B with left=false
function linalg.solve_triangular(A, B, opts)
  opts = opts or {}
  check_square('linalg.solve_triangular', A)
  check_matrix('linalg.solve_triangular', B, 'B')
  if type(opts.upper) ~= 'boolean' then
    fail('linalg.solve_triangular: option upper (true or false) is required, got %s', tostring(opts.upper))
  end
  local upper, unit = opts.upper, opts.unitriangular or false
  if opts.left == false then
    return mT(linalg.solve_triangular(mT(A), mT(B), { upper = not upper, unitriangular = unit }))
  end
  if B:size(-2) ~= A:size(-1) then
    fail('linalg.solve_triangular: incompatible shapes of A %s and B %s', tostring(A:size()), tostring(B:size()))
  end
  local dt = (A.dtype == 'float64' or B.dtype == 'float64') and 'float64' or 'float32'
  local Ab, Bb = broadcast_pair('linalg.solve_triangular', A:to(dt), B:to(dt))
  if not same_shape(Ab:size():totable(), A:size():totable()) or not same_shape(Bb:size():totable(), B:size():totable()) then
    Ab, Bb = Ab:contiguous(), Bb:contiguous()   -- the expanded copies carry the gradient back
  end
  return Trsolve.apply(Ab, Bb, upper, unit)
end

-- ------------------------------------------------------------------ cholesky

local Cholesky = Function:extend('LinalgCholeskyExBackward0')
function Cholesky.forward(ctx, A)
  local L = back(C._lapack_cholesky(host(A), false), A)
  ctx:save_for_backward(L)
  return L
end
function Cholesky.backward(ctx, gL)
  local L = ctx.saved_tensors[1]
  local gA = mT(L):matmul(gL):tril()
  gA = (gA + mT(gA:tril(-1))) * 0.5
  gA = linalg.solve_triangular(mT(L), gA, { upper = true })
  return linalg.solve_triangular(L, gA, { upper = false, left = false })
end

-- cholesky(A [, {upper=false}]): L with A = L L^T (from A's lower triangle), or U = L^T
function linalg.cholesky(A, opts)
  check_square('linalg.cholesky', A)
  local L = Cholesky.apply(A)
  if opts and opts.upper then return mT(L) end
  return L
end

-- ------------------------------------------------------------------ eigh

local Eigh = Function:extend('LinalgEighBackward0')
function Eigh.forward(ctx, A, upper)
  local w, V = C._lapack_eigh(host(A), upper)
  w, V = back(w, A), back(V, A)
  ctx:save_for_backward(w, V)
  return w, V
end
function Eigh.backward(ctx, gw, gV)
  local w, V = table.unpack(ctx.saved_tensors)
  local n = w:size(-1)
  local inner = torch.zeros_like(V)
  if gV ~= nil and gV:ne(0):any():item() then
    local E = w:unsqueeze(-2) - w:unsqueeze(-1)   -- E[i][j] = w[j] - w[i]
    local eye = torch.eye(n, { dtype = 'bool', device = w.device })
    E = torch.where(eye, torch.ones_like(E), E)
    inner = torch.where(eye, torch.zeros_like(E), mT(V):matmul(gV) / E)
  end
  if gw ~= nil then inner = inner + torch.diag_embed(gw) end
  return V:matmul(inner):matmul(mT(V))
end

-- eigh(A [, UPLO='L']): the eigenvalues (ascending) and eigenvectors (columns) of a
-- symmetric matrix, from its lower (or 'U': upper) triangle
function linalg.eigh(A, uplo)
  check_square('linalg.eigh', A)
  if type(uplo) == 'table' then uplo = uplo.UPLO end
  uplo = uplo or 'L'
  if uplo ~= 'L' and uplo ~= 'U' then fail("linalg.eigh: UPLO must be 'L' or 'U', got %s", tostring(uplo)) end
  return Eigh.apply(A, uplo == 'U')
end
function linalg.eigvalsh(A, uplo)
  local w = linalg.eigh(A, uplo)
  return w
end

-- ------------------------------------------------------------------ svd

local Svd = Function:extend('LinalgSvdBackward0')
function Svd.forward(ctx, A, full)
  local U, S, Vh = C._lapack_svd(host(A), full)
  U, S, Vh = back(U, A), back(S, A), back(Vh, A)
  ctx:save_for_backward(U, Vh)
  ctx.k = S:size(-1)
  return U, S, Vh
end
function Svd.backward(ctx, gU, gS, gVh)
  local U, Vh = table.unpack(ctx.saved_tensors)
  if (gU ~= nil and gU:ne(0):any():item()) or (gVh ~= nil and gVh:ne(0):any():item()) then
    error('linalg.svd: the gradient through U and Vh is not implemented; only the singular values (S, svdvals) are differentiable', 0)
  end
  local k = ctx.k
  local Uk, Vk = U:narrow(-1, 1, k), Vh:narrow(-2, 1, k)
  return (Uk * gS:unsqueeze(-2)):matmul(Vk)
end

-- svd(A [, {full_matrices=true}]): U, S, Vh with A = U diag(S) Vh
function linalg.svd(A, opts)
  check_matrix('linalg.svd', A)
  local full = true
  if type(opts) == 'table' and opts.full_matrices ~= nil then full = opts.full_matrices
  elseif type(opts) == 'boolean' then full = opts end
  return Svd.apply(A, full)
end
function linalg.svdvals(A)
  check_matrix('linalg.svdvals', A)
  local _, S = Svd.apply(A, false)
  return S
end

-- ------------------------------------------------------------------ qr, lstsq, pinv, rank

-- qr(A [, mode='reduced' | 'complete' | 'r']): Q, R (no gradient)
function linalg.qr(A, mode)
  check_matrix('linalg.qr', A)
  if type(mode) == 'table' then mode = mode.mode end
  mode = mode or 'reduced'
  if mode ~= 'reduced' and mode ~= 'complete' and mode ~= 'r' then
    fail("linalg.qr: mode must be 'reduced', 'complete' or 'r', got %s", tostring(mode))
  end
  local Q, R = C._lapack_qr(host(A), mode == 'complete')
  if mode == 'r' then return torch.zeros({ 0 }, { dtype = A.dtype, device = A.device }), back(R, A) end
  return back(Q, A), back(R, A)
end

local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }

local DRIVERS = { gels = true, gelsy = true, gelsd = true, gelss = true }

-- lstsq(A, B [, rcond] [, {rcond=, driver=}]): the least squares solution X of A X = B (the
-- minimum norm one where A is rank deficient) as a table with PyTorch's fields: solution;
-- residuals, the squared residual norms of each column of B (A tall, full rank and driver
-- not 'gelsy'; else empty); rank (not with 'gels': empty); singular_values (with 'gelsd'
-- and 'gelss'; else empty).  driver defaults to 'gelsy' on the CPU and 'gels' elsewhere, as
-- PyTorch; every driver is computed by LAPACK's gelsd in float64 (no gradient).
function linalg.lstsq(A, B, rcond, opts)
  if type(rcond) == 'table' then rcond, opts = nil, rcond end
  opts = opts or {}
  if rcond == nil then rcond = opts.rcond end
  check_matrix('linalg.lstsq', A)
  if not torch.is_tensor(B) then fail('linalg.lstsq: B must be a tensor, got %s', type(B)) end
  if rcond ~= nil and type(rcond) ~= 'number' then fail('linalg.lstsq: rcond must be a number, got %s', tostring(rcond)) end
  local cpu = tostring(A.device):match('^cpu') ~= nil
  local driver = opts.driver or (cpu and 'gelsy' or 'gels')
  if not DRIVERS[driver] then
    fail('linalg.lstsq: driver should be one of gels, gelsy, gelsd, gelss, got %s', tostring(driver))
  end
  if not cpu and driver ~= 'gels' then
    fail("linalg.lstsq: driver other than 'gels' is not supported on %s, got %s", tostring(A.device), driver)
  end
  local vector = B:dim() == A:dim() - 1
  local Bm = vector and B:unsqueeze(-1) or B
  if Bm:size(-2) ~= A:size(-2) then
    fail('linalg.lstsq: A has %d rows but B has %d', A:size(-2), Bm:size(-2))
  end
  local m, n = A:size(-2), A:size(-1)
  -- PyTorch's default: singular values below eps * max(m, n) times the largest count as 0
  local rc = rcond or EPS[A.dtype] * math.max(m, n)
  local Ab, Bb = broadcast_pair('linalg.lstsq', A, Bm)
  local hA, hB = host(Ab), host(Bb)
  local hX = C._lapack_lstsq(hA, hB, rc)
  local batch = batch_of(Ab, 2)
  local function empty(dtype) return torch.zeros({ 0 }, { dtype = dtype, device = A.device }) end
  local S, rank
  if driver ~= 'gels' then
    if Bm:size(-1) == 0 or m == 0 or n == 0 then
      S = torch.zeros(concat(batch, { math.min(m, n) }), { dtype = 'float64' })
      rank = torch.zeros(batch, { dtype = 'int64' })
    else
      S = linalg.svdvals(hA)
      rank = S:gt(S:narrow(-1, 1, 1) * rc):sum(-1)
    end
  end
  local residuals = empty(A.dtype)
  if m > n and driver ~= 'gelsy' and (rank == nil or rank:eq(n):all():item()) then
    residuals = back((hA:matmul(hX) - hB):pow(2):sum(-2), A)
  end
  local X = back(hX, A)
  if vector then X = X:squeeze(-1) end
  return {
    solution = X,
    residuals = residuals,
    rank = rank and rank:to(A.device) or empty('int64'),
    singular_values = (driver == 'gelsd' or driver == 'gelss') and back(S, A) or empty(A.dtype),
  }
end

-- the default tolerance of matrix_rank and pinv: max(m, n) * eps * largest singular value
local function tolerance(A, S, atol, rtol)
  local smax = S:numel() > 0 and S:amax(-1, true) or S
  if rtol == nil then
    rtol = (atol ~= nil and atol > 0) and 0 or math.max(A:size(-1), A:size(-2)) * EPS[A.dtype]
  end
  return torch.maximum(smax * rtol, torch.full({}, atol or 0, { dtype = S.dtype, device = S.device }))
end

-- pinv(A [, {atol=, rtol=, hermitian=false}]): the pseudo-inverse through the SVD, or with
-- hermitian = true through eigh, which reads only the lower triangle of A, as PyTorch's (no
-- gradient)
function linalg.pinv(A, opts)
  check_matrix('linalg.pinv', A)
  opts = opts or {}
  if opts.hermitian then
    check_square('linalg.pinv', A)
    return torch.no_grad(function()
      local L, U = linalg.eigh(host(A))   -- in float64, the result rounded once
      local tol = tolerance(A, L:abs(), opts.atol, opts.rtol)
      local Linv = torch.where(L:abs():gt(tol), L:reciprocal(), torch.zeros_like(L))
      return back((U * Linv:unsqueeze(-2)):matmul(mT(U)), A)
    end)
  end
  return torch.no_grad(function()
    local U, S, Vh = linalg.svd(A, { full_matrices = false })
    local tol = tolerance(A, S, opts.atol, opts.rtol)
    local Sinv = torch.where(S:gt(tol), S:reciprocal(), torch.zeros_like(S))
    return (mT(Vh) * Sinv:unsqueeze(-2)):matmul(mT(U))
  end)
end

-- matrix_rank(A [, {atol=, rtol=}]): the count of singular values above the tolerance
function linalg.matrix_rank(A, opts)
  check_matrix('linalg.matrix_rank', A)
  opts = opts or {}
  return torch.no_grad(function()
    local S = linalg.svdvals(A)
    return S:gt(tolerance(A, S, opts.atol, opts.rtol)):sum(-1)
  end)
end

-- matrix_power(A, n): A^n by repeated squaring (n < 0: of the inverse; n == 0: identity)
function linalg.matrix_power(A, n)
  check_square('linalg.matrix_power', A)
  if math.type(n) ~= 'integer' then fail('linalg.matrix_power: n must be an integer, got %s', tostring(n)) end
  local k = A:size(-1)
  if n == 0 then return torch.eye(k, { dtype = A.dtype, device = A.device }):expand(A:size():totable()):clone() end
  if n < 0 then A, n = linalg.inv(A), -n end
  local result, base = nil, A
  while n > 0 do
    if n % 2 == 1 then result = result and result:matmul(base) or base end
    n = n // 2
    if n > 0 then base = base:matmul(base) end
  end
  return result
end

-- cross(a, b [, {dim=-1}]): a and b of the same number of dims, broadcast, both of size 3
-- along dim (which does not broadcast), as PyTorch's
function linalg.cross(a, b, opts)
  local dim = type(opts) == 'table' and opts.dim or opts or -1
  if not torch.is_tensor(a) or not torch.is_tensor(b) then
    fail('linalg.cross: expected two tensors, got %s and %s', torch.typename(a) or type(a), torch.typename(b) or type(b))
  end
  if a:dim() ~= b:dim() then
    fail('linalg.cross: inputs must have the same number of dimensions, got %d and %d', a:dim(), b:dim())
  end
  if math.type(dim) ~= 'integer' or dim == 0 or dim > a:dim() or dim < -a:dim() then
    fail('linalg.cross: dim %s is out of range for tensors with %d dimensions (dplua counts dims from 1)', tostring(dim), a:dim())
  end
  if a:size(dim) ~= 3 or b:size(dim) ~= 3 then
    fail('linalg.cross: inputs dimension %d must have length 3, got %d and %d', dim, a:size(dim), b:size(dim))
  end
  local x, y = torch.broadcast_tensors(a, b)
  return torch.cross(x, y, dim)
end

-- ------------------------------------------------------------------ norms

-- the arguments (ord, dim, keepdim) of the norms, the options table being the last one
-- given, whatever its position (norm(A, nil, {keepdim = true}) as norm(A, {keepdim = true})):
-- its fields fill the arguments not given before it
local function norm_args(ord, dim, keepdim)
  local args, names = { ord, dim, keepdim }, { 'ord', 'dim', 'keepdim' }
  for i = 3, 1, -1 do
    local o = args[i]
    if type(o) == 'table' and not torch.is_tensor(o) then
      local named = i ~= 2 and next(o) == nil   -- {} in dim's place is an empty list of dims
      for k in pairs(o) do if type(k) == 'string' then named = true end end
      if named then
        args[i] = nil
        for j = i, 3 do args[j] = o[names[j]] end
        break
      end
    end
  end
  return args[1], args[2], args[3]
end

local function dims_list(dim)
  if dim == nil then return nil end
  return type(dim) == 'table' and dim or { dim }
end

-- the 0 "norm", a count: PyTorch's result requires grad, with no gradient (None)
local NormZero = Function:extend('LinalgVectorNormBackward0')
function NormZero.forward(_, _, count) return count() end
function NormZero.backward() return nil end

-- vector_norm(x [, ord=2 [, dim [, keepdim=false]]] | {ord=, dim=, keepdim=}): over all
-- elements, or over dim (a number or a table of dims)
function linalg.vector_norm(x, ord, dim, keepdim)
  ord, dim, keepdim = norm_args(ord, dim, keepdim)
  ord = ord or 2
  if not torch.is_tensor(x) or not is_float(x) then fail('linalg.vector_norm: expected a floating point tensor') end
  local dims = dims_list(dim)
  local a = x:abs()
  local function reduce(t, op)
    if dims == nil then
      local r = op == 'sum' and t:sum() or t:amax()
      if op == 'min' then r = t:amin() end
      if keepdim then
        local ones = {}
        for i = 1, x:dim() do ones[i] = 1 end
        r = r:reshape(ones)
      end
      return r
    end
    if op == 'sum' then
      local r = t
      local sorted = {}
      for i, d in ipairs(dims) do sorted[i] = d < 0 and d + x:dim() + 1 or d end
      table.sort(sorted)
      for i = #sorted, 1, -1 do r = r:sum(sorted[i], true) end
      if not keepdim then for i = #sorted, 1, -1 do r = r:squeeze(sorted[i]) end end
      return r
    end
    return op == 'max' and t:amax(dims, keepdim) or t:amin(dims, keepdim)
  end
  if ord == math.huge then return reduce(a, 'max') end
  if ord == -math.huge then return reduce(a, 'min') end
  if ord == 0 then return NormZero.apply(x, function() return reduce(a:ne(0):to(x.dtype), 'sum') end) end
  if ord == 1 then return reduce(a, 'sum') end
  -- the gradients at zero are PyTorch's subgradients, 0 (not NaN): the powers of zero and
  -- the roots of a zero sum are taken where they are 1 and then replaced
  local function zero_safe(t, z, f)
    return torch.where(z, torch.zeros_like(t), f(torch.where(z, torch.ones_like(t), t)))
  end
  local function root(sum, e) return zero_safe(sum, sum:eq(0), function(v) return v ^ e end) end
  if ord == 2 then return root(reduce(x * x, 'sum'), 0.5) end
  if ord > 0 then return root(reduce(zero_safe(a, a:eq(0), function(v) return v ^ ord end), 'sum'), 1 / ord) end
  -- ord < 0: a zero element makes the norm 0 (|0|^ord is infinite)
  local zeros = reduce(a:eq(0):to(x.dtype), 'sum'):gt(0)
  local n = reduce(zero_safe(a, a:eq(0), function(v) return v ^ ord end), 'sum') ^ (1 / ord)
  return torch.where(zeros, torch.zeros_like(n), n)
end

-- matrix_norm(A [, ord='fro' [, dim={-2, -1} [, keepdim=false]]]): 'fro', 'nuc', 2, -2,
-- 1, -1, math.huge, -math.huge
function linalg.matrix_norm(A, ord, dim, keepdim)
  ord, dim, keepdim = norm_args(ord, dim, keepdim)
  ord = ord or 'fro'
  check_matrix('linalg.matrix_norm', A)
  dim = dim or { -2, -1 }
  local d1, d2 = dim[1], dim[2]
  local n = A:dim()
  d1, d2 = d1 < 0 and d1 + n + 1 or d1, d2 < 0 and d2 + n + 1 or d2
  local function finish(r)
    if keepdim then
      local lo, hi = math.min(d1, d2), math.max(d1, d2)
      r = r:unsqueeze(lo):unsqueeze(hi)
    end
    return r
  end
  if ord == 'fro' then return linalg.vector_norm(A, 2, { d1, d2 }, keepdim) end
  if ord == 'nuc' or ord == 2 or ord == -2 then
    local perm = {}
    for d = 1, n do if d ~= d1 and d ~= d2 then perm[#perm + 1] = d end end
    perm[#perm + 1], perm[#perm + 2] = d1, d2
    local S = linalg.svdvals(A:permute(perm))
    local r = ord == 'nuc' and S:sum(-1) or (ord == 2 and S:amax(-1) or S:amin(-1))
    return finish(r)
  end
  local abs = A:abs()
  if ord == 1 or ord == -1 then
    local colsum = abs:sum(d1, true)
    local r = ord == 1 and colsum:amax(d2, true) or colsum:amin(d2, true)
    r = r:squeeze(math.max(d1, d2)):squeeze(math.min(d1, d2))
    return finish(r)
  end
  if ord == math.huge or ord == -math.huge then
    local rowsum = abs:sum(d2, true)
    local r = ord == math.huge and rowsum:amax(d1, true) or rowsum:amin(d1, true)
    r = r:squeeze(math.max(d1, d2)):squeeze(math.min(d1, d2))
    return finish(r)
  end
  fail("linalg.matrix_norm: ord must be 'fro', 'nuc', 2, -2, 1, -1, math.huge or -math.huge, got %s", tostring(ord))
end

-- norm(A [, ord [, dim [, keepdim]]]): a vector norm (ord a number, dim one dim or nil on
-- a 1-D input), or a matrix norm (ord a string, or dim two dims, or nil on a 2-D input)
function linalg.norm(A, ord, dim, keepdim)
  ord, dim, keepdim = norm_args(ord, dim, keepdim)
  if not torch.is_tensor(A) then fail('linalg.norm: expected a tensor, got %s', type(A)) end
  if dim == nil and ord == nil then
    return linalg.vector_norm(A, 2, nil, keepdim)
  end
  local matrix = type(ord) == 'string' or (type(dim) == 'table' and #dim == 2) or (dim == nil and A:dim() == 2)
  if matrix then return linalg.matrix_norm(A, ord or 'fro', dim, keepdim) end
  if dim == nil and A:dim() ~= 1 then
    fail('linalg.norm: a vector norm needs a 1-D input or dim, got a %d-D input', A:dim())
  end
  return linalg.vector_norm(A, ord or 2, dim, keepdim)
end

-- ------------------------------------------------------------------ the older torch.* names

function linalg.install_torch_names()
  torch.inverse = linalg.inv
  torch.Tensor.inverse = linalg.inv
  torch.det = linalg.det
  torch.Tensor.det = linalg.det
  torch.slogdet = linalg.slogdet
  torch.Tensor.slogdet = linalg.slogdet
  -- logdet: log(det), NaN for a negative determinant
  torch.logdet = function(A)
    local s, l = linalg.slogdet(A)
    return torch.where(s:lt(0), torch.full({}, 0 / 0, { dtype = l.dtype, device = l.device }), l)
  end
  torch.Tensor.logdet = torch.logdet
  -- svd(A [, some=true]): U, S, V (V, not Vh, as PyTorch's old torch.svd)
  torch.svd = function(A, some)
    if type(some) == 'table' then some = some.some end
    local U, S, Vh = linalg.svd(A, { full_matrices = some == false })
    return U, S, mT(Vh)
  end
  torch.Tensor.svd = torch.svd
  torch.qr = function(A, some)
    if type(some) == 'table' then some = some.some end
    return linalg.qr(A, some == false and 'complete' or 'reduced')
  end
  torch.Tensor.qr = torch.qr
  torch.cholesky = function(A, upper)
    if type(upper) == 'table' then upper = upper.upper end
    return linalg.cholesky(A, { upper = upper or false })
  end
  torch.Tensor.cholesky = torch.cholesky
  -- cholesky_solve(B, L [, upper=false]): X with (L L^T) X = B
  torch.cholesky_solve = function(B, L, upper)
    if type(upper) == 'table' then upper = upper.upper end
    if upper then L = mT(L) end
    local Y = linalg.solve_triangular(L, B, { upper = false })
    return linalg.solve_triangular(mT(L), Y, { upper = true })
  end
  torch.Tensor.cholesky_solve = torch.cholesky_solve
  -- triangular_solve(b, A [, upper=true [, transpose=false [, unitriangular=false]]]):
  -- solution, a copy of A (PyTorch's order of arguments and results)
  torch.triangular_solve = function(b, A, upper, transpose, unitriangular)
    if type(upper) == 'table' then upper, transpose, unitriangular = upper.upper, upper.transpose, upper.unitriangular end
    if upper == nil then upper = true end
    local M = A
    if transpose then M, upper = mT(A), not upper end
    return linalg.solve_triangular(M, b, { upper = upper, unitriangular = unitriangular or false }), A:clone()
  end
  torch.Tensor.triangular_solve = torch.triangular_solve
  torch.matrix_power = linalg.matrix_power
  torch.Tensor.matrix_power = linalg.matrix_power
  torch.pinverse = linalg.pinv
  torch.Tensor.pinverse = linalg.pinv
end

return linalg
