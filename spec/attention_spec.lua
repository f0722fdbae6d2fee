-- Attention and Transformers: F.scaled_dot_product_attention, nn.MultiheadAttention,
-- nn.TransformerEncoderLayer and nn.TransformerEncoder, in value and gradient (inputs and
-- parameters) against PyTorch 1.13 (spec/fixtures/attention.lua, written by
-- spec/fixtures/make_attention.py, with every parameter set from the fixture and dropout 0),
-- a float64 gradcheck, the modules' structure and init, and errors for bad shapes.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local close = check.close
local nn = require 'nn'
local F = nn.functional

local ref = dofile('spec/fixtures/attention.lua')


local function f64(v, rg) return torch.tensor(v, { dtype = 'float64', requires_grad = rg or nil }) end
local function bool(v) return torch.tensor(v, { dtype = 'bool' }) end

local function error_matches(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert(tostring(err):find(pattern, 1, true), ('error "%s" does not contain "%s"'):format(tostring(err), pattern))
end

-- PyTorch's name of a dplua parameter ("layers.1.x" is PyTorch's "layers.0.x")
local function torch_name(name)
  return (name:gsub('layers%.(%d+)', function(n) return 'layers.' .. (tonumber(n) - 1) end))
end

-- m in float64 with every parameter set from params (PyTorch's names)
local function load(m, params)
  m:double()
  local n = 0
  for name, p in m:named_parameters() do
    local v = params[torch_name(name)]
    assert(v ~= nil, 'no fixture value for parameter ' .. name)
    torch.no_grad(function() p:copy_(f64(v)) end)
    n = n + 1
  end
  local want = 0
  for _ in pairs(params) do want = want + 1 end
  assert.are.equal(want, n, 'parameter count')
  return m
end

local function check_param_grads(m, grads, tol, what)
  for name, p in m:named_parameters() do
    close(p.grad, grads[torch_name(name)], tol, what .. ' grad ' .. name)
  end
end

describe('F.scaled_dot_product_attention', function()
  it('matches PyTorch 2.x semantics in value and gradient (no mask, causal, bool, float, broadcast masks)', function()
    local n = 0
    for name, case in pairs(ref.sdpa) do
      local q, k, v = f64(case.q, true), f64(case.k, true), f64(case.v, true)
      local opts = { is_causal = case.is_causal }
      if case.mask then opts.attn_mask = case.mask_bool and bool(case.mask) or f64(case.mask) end
      local out = F.scaled_dot_product_attention(q, k, v, opts)
      close(out, case.out, 1e-12, name .. ' value');
      (out * f64(case.gout)):sum():backward()
      close(q.grad, case.grads[1], 1e-10, name .. ' grad q')
      close(k.grad, case.grads[2], 1e-10, name .. ' grad k')
      close(v.grad, case.grads[3], 1e-10, name .. ' grad v')
      n = n + 1
    end
    assert.are.equal(5, n)
  end)

  it('passes a float64 gradcheck', function()
    local q, k, v = torch.randn(2, 3, 4, { dtype = 'float64', requires_grad = true }),
      torch.randn(2, 5, 4, { dtype = 'float64', requires_grad = true }),
      torch.randn(2, 5, 3, { dtype = 'float64', requires_grad = true })
    local mask = torch.randn(3, 5, { dtype = 'float64' })
    assert.is_true(torch.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { attn_mask = mask })
    end, { q, k, v }))
  end)

  it('drops attention with dropout_p = 1 and rejects bad shapes and options', function()
    local q = torch.randn(2, 3, 4)
    assert.are.equal(0, F.scaled_dot_product_attention(q, q, q, { dropout_p = 1 }):abs():sum():item())
    error_matches(function() F.scaled_dot_product_attention(q, torch.randn(2, 3, 5), q) end,
      'the last dimension of key (5) must match that of query (4)')
    error_matches(function() F.scaled_dot_product_attention(q, q, torch.randn(2, 4, 4)) end,
      'key and value must have the same sequence length, got 3 and 4')
    error_matches(function() F.scaled_dot_product_attention(torch.randn(4), q, q) end, 'at least 2 dimensions')
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { attn_mask = torch.zeros(3, 3), is_causal = true }) end,
      'not both')
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { attn_mask = torch.zeros(2, 2) }) end,
      'does not broadcast')
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { dropout_p = 2 }) end, 'dropout_p must be')
  end)
end)

describe('nn.MultiheadAttention', function()
  it('has PyTorch\'s parameters, shapes and init', function()
    local m = nn.MultiheadAttention(8, 2)
    local names = {}
    for name, p in m:named_parameters() do names[#names + 1] = name .. ' ' .. tostring(p:size()) end
    assert.are.same({ 'in_proj_weight torch.Size([24, 8])', 'in_proj_bias torch.Size([24])',
                      'out_proj.weight torch.Size([8, 8])', 'out_proj.bias torch.Size([8])' }, names)
    assert.are.equal(0, m.in_proj_bias:abs():sum():item())
    assert.are.equal(0, m.out_proj.bias:abs():sum():item())
    -- xavier_uniform_: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 32)
    local a = math.sqrt(6 / 32)
    assert.is_true(m.in_proj_weight:abs():max():item() <= a)
    assert.is_true(m.in_proj_weight:abs():max():item() > a / 2)
    local nb = nn.MultiheadAttention(8, 2, { bias = false })
    assert.is_nil(nb.in_proj_bias)
    assert.is_nil(nb.out_proj.bias)
  end)

  it('matches PyTorch in output, weights and gradients (masks, batch_first, per head, no bias, unbatched)', function()
    local n = 0
    for name, case in pairs(ref.mha) do
      local m = load(nn.MultiheadAttention(8, 2, { batch_first = case.batch_first, bias = case.bias }), case.params)
      local inputs = {}
      for i, x in ipairs(case.inputs) do inputs[i] = f64(x, true) end
      local opts = { average_attn_weights = case.average_attn_weights }
      for _, key in ipairs { 'attn_mask', 'key_padding_mask' } do
        if case[key] ~= nil then opts[key] = case[key .. '_bool'] and bool(case[key]) or f64(case[key]) end
      end
      local out, weights = m(inputs[1], inputs[2], inputs[3], opts)
      close(out, case.out, 1e-12, name .. ' output')
      close(weights, case.weights, 1e-12, name .. ' weights');
      ((out * f64(case.gout)):sum() + (weights * f64(case.gweights)):sum()):backward()
      for i = 1, 3 do close(inputs[i].grad, case.grads[i], 1e-10, name .. ' grad input ' .. i) end
      check_param_grads(m, case.param_grads, 1e-10, name)
      n = n + 1
    end
    assert.are.equal(10, n)
  end)

  it('returns no weights with need_weights = false', function()
    local m = nn.MultiheadAttention(4, 2)
    local x = torch.randn(3, 2, 4)
    local out, w = m(x, x, x, { need_weights = false })
    assert.are.same({ 3, 2, 4 }, out:size():totable())
    assert.is_nil(w)
  end)

  it('rejects bad arguments and shapes with clear errors', function()
    error_matches(function() nn.MultiheadAttention(10, 3) end, 'embed_dim (10) must be divisible by num_heads (3)')
    error_matches(function() nn.MultiheadAttention(0, 1) end, 'embed_dim must be a positive integer')
    local m = nn.MultiheadAttention(4, 2)
    local x = torch.randn(3, 2, 4)
    error_matches(function() m(torch.randn(3, 2, 5), x, x) end, 'query must be [L, N, 4]')
    error_matches(function() m(x, torch.randn(3, 1, 4), torch.randn(3, 1, 4)) end, 'the same batch size, got 2, 1 and 1')
    error_matches(function() m(x, x, torch.randn(4, 2, 4)) end, 'the same sequence length, got 3 and 4')
    error_matches(function() m(x, x, x, { attn_mask = torch.zeros(3, 4) }) end, 'attn_mask must be [3, 3] or [4, 3, 3]')
    error_matches(function() m(x, x, x, { key_padding_mask = bool { { true, false } } }) end,
      'key_padding_mask must be [2, 3] (N, S), got shape')
    error_matches(function() m(x, torch.randn(3, 4), x) end, 'all be batched (3-D) or all unbatched')
  end)
end)

describe('nn.TransformerEncoderLayer', function()
  it('has PyTorch\'s submodules', function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local names = {}
    for name in layer:named_children() do names[#names + 1] = name end
    assert.are.same({ 'self_attn', 'linear1', 'dropout', 'linear2', 'norm1', 'norm2', 'dropout1', 'dropout2' }, names)
    assert.are.equal(0.1, layer.dropout.p)
  end)

  it('matches PyTorch in value and gradients (post/pre norm, relu/gelu, batch_first, causal, masks)', function()
    local n = 0
    for name, case in pairs(ref.encoder) do
      local opts = { dim_feedforward = 16, dropout = 0 }
      for k, v in pairs(case.opts) do opts[k] = v end
      local layer = load(nn.TransformerEncoderLayer(8, 2, opts), case.params)
      local x = f64(case.x, true)
      local fopts = { is_causal = case.causal }
      if case.src_mask then fopts.src_mask = f64(case.src_mask) end
      if case.src_key_padding_mask then fopts.src_key_padding_mask = bool(case.src_key_padding_mask) end
      local out = layer(x, fopts)
      close(out, case.out, 1e-11, name .. ' value');
      (out * f64(case.gout)):sum():backward()
      close(x.grad, case.grad_x, 1e-9, name .. ' grad x')
      check_param_grads(layer, case.param_grads, 1e-9, name)
      n = n + 1
    end
    assert.are.equal(6, n)
  end)

  it('rejects a bad activation and a bad input', function()
    error_matches(function() nn.TransformerEncoderLayer(8, 2, { activation = 'tanh' }) end,
      "activation must be 'relu', 'gelu' or a function, got tanh")
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    error_matches(function() layer(torch.randn(3, 2, 6)) end, 'query must be [L, N, 8]')
  end)
end)

describe('nn.TransformerEncoder', function()
  it('deep-copies the layer into an nn.ModuleList and matches PyTorch with a final norm', function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    local enc = nn.TransformerEncoder(layer, 2, { norm = nn.LayerNorm(8) })
    assert.are.equal('nn.ModuleList', torch.typename(enc.layers))
    assert.are.equal(2, #enc.layers)
    assert.are_not.equal(enc.layers[1], enc.layers[2])
    assert.are_not.equal(rawequal(enc.layers[1].linear1.weight, layer.linear1.weight), true)
    -- copies start equal and share nothing
    assert.are.equal(0, (enc.layers[1].linear1.weight - layer.linear1.weight):abs():sum():item())
    torch.no_grad(function() enc.layers[1].linear1.weight:zero_() end)
    assert.is_true(layer.linear1.weight:abs():sum():item() > 0)
    assert.is_true(enc.layers[2].linear1.weight:abs():sum():item() > 0)

    load(enc, ref.stack.params)
    local x = f64(ref.stack.x, true)
    local out = enc(x)
    close(out, ref.stack.out, 1e-11, 'stack value');
    (out * f64(ref.stack.gout)):sum():backward()
    close(x.grad, ref.stack.grad_x, 1e-9, 'stack grad x')
    check_param_grads(enc, ref.stack.param_grads, 1e-9, 'stack')
  end)

  it('rejects bad arguments', function()
    error_matches(function() nn.TransformerEncoder({}, 2) end, 'encoder_layer must be a module')
    error_matches(function() nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2), 0) end,
      'num_layers must be a positive integer, got 0')
  end)
end)

describe('nn.TransformerDecoderLayer and nn.TransformerDecoder', function()
  it('have PyTorch\'s submodules', function()
    local layer = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16 })
    local names = {}
    for name in layer:named_children() do names[#names + 1] = name end
    assert.are.same({ 'self_attn', 'multihead_attn', 'linear1', 'dropout', 'linear2', 'norm1', 'norm2', 'norm3',
                      'dropout1', 'dropout2', 'dropout3' }, names)
  end)

  it('match PyTorch in value and gradients (post/pre norm, gelu, batch_first, all four masks)', function()
    local n = 0
    for name, case in pairs(ref.decoder) do
      local opts = { dim_feedforward = 16, dropout = 0 }
      for k, v in pairs(case.opts) do opts[k] = v end
      local dec = load(nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, opts), 2), case.params)
      local tgt, mem = f64(case.tgt, true), f64(case.memory, true)
      local fopts = { tgt_is_causal = case.causal }
      if case.memory_mask then fopts.memory_mask = f64(case.memory_mask) end
      for _, key in ipairs { 'tgt_key_padding_mask', 'memory_key_padding_mask' } do
        if case[key] then fopts[key] = bool(case[key]) end
      end
      local out = dec(tgt, mem, fopts)
      close(out, case.out, 1e-11, name .. ' value');
      (out * f64(case.gout)):sum():backward()
      close(tgt.grad, case.grad_tgt, 1e-9, name .. ' grad tgt')
      close(mem.grad, case.grad_memory, 1e-9, name .. ' grad memory')
      check_param_grads(dec, case.param_grads, 1e-9, name)
      n = n + 1
    end
    assert.are.equal(2, n)
  end)

  it('reject a bad memory', function()
    local layer = nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16 })
    error_matches(function() layer(torch.randn(3, 2, 8), torch.randn(4, 2, 6)) end, 'key must be [L, N, 8]')
    error_matches(function() nn.TransformerDecoder(layer, 1.5) end, 'num_layers must be a positive integer, got 1.5')
  end)
end)

-- The fused op behind F.scaled_dot_product_attention (src/attention.c): values and
-- gradients against PyTorch 1.13's math formula (spec/fixtures/sdpa_fused.lua, written by
-- spec/fixtures/make_sdpa_fused.py) for shapes with L ~= S and E ~= Ev, broadcast masks of
-- both kinds, causal masks, a fully masked row and sizes around the CPU kernel's 64-row
-- tiles, in float64 and float32; non-contiguous inputs, gradchecks, dropout, errors.
describe('the fused scaled_dot_product_attention', function()
  local fused = dofile('spec/fixtures/sdpa_fused.lua')
  local device = dofile('spec/helpers/device.lua')

  local function run_case(c, dtype, rg)
    local function t(v) return torch.tensor(v, { dtype = dtype, requires_grad = rg or nil }) end
    local q, k, v = t(c.q), t(c.k), t(c.v)
    local opts = { is_causal = c.is_causal, scale = c.scale }
    if c.mask then
      opts.attn_mask = c.mask_bool and bool(c.mask) or torch.tensor(c.mask, { dtype = dtype })
      opts.attn_mask = opts.attn_mask:reshape(table.unpack(c.mask_shape))
    end
    local out = F.scaled_dot_product_attention(q, k, v, opts)
    return out, q, k, v
  end

  it('matches PyTorch in value and gradient (float64): masks, broadcasting, causal, tiles, NaN rows', function()
    local n = 0
    for name, c in pairs(fused) do
      local out, q, k, v = run_case(c, 'float64', true)
      assert.are.equal('ScaledDotProductFlashAttentionBackward0', out.grad_fn.name)
      close(out, c.out, 1e-12, name .. ' value');
      (out * f64(c.gout)):sum():backward()
      close(q.grad, c.grads[1], 1e-10, name .. ' grad q')
      close(k.grad, c.grads[2], 1e-10, name .. ' grad k')
      close(v.grad, c.grads[3], 1e-10, name .. ' grad v')
      n = n + 1
    end
    assert.are.equal(21, n)
  end)

  it('matches PyTorch in float32 to float32 rounding', function()
    for name, c in pairs(fused) do
      local out, q, k, v = run_case(c, 'float32', true)
      assert.are.equal('float32', out.dtype)
      close(out, c.out, 2e-5, name .. ' value');
      (out * torch.tensor(c.gout, { dtype = 'float32' })):sum():backward()
      close(q.grad, c.grads[1], 2e-4, name .. ' grad q')
      close(k.grad, c.grads[2], 2e-4, name .. ' grad k')
      close(v.grad, c.grads[3], 2e-4, name .. ' grad v')
    end
  end)

  it('reads non-contiguous inputs and masks', function()
    local c = fused.float_mask_4d
    -- the same values laid out [L, B, H, E] and viewed as [B, H, L, E]
    local function strided(v, rg)
      local x = f64(v):permute(3, 1, 2, 4):contiguous():permute(2, 3, 1, 4)
      assert.is_false(x:is_contiguous())
      if rg then x = x:detach():requires_grad_(true) end
      return x
    end
    local q, k, v = strided(c.q, true), strided(c.k, true), strided(c.v, true)
    local mask = f64(c.mask):transpose(3, 4):contiguous():transpose(3, 4)
    local out = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask })
    close(out, c.out, 1e-12, 'value');
    (out * f64(c.gout)):sum():backward()
    close(q.grad, c.grads[1], 1e-10, 'grad q')
    close(k.grad, c.grads[2], 1e-10, 'grad k')
    close(v.grad, c.grads[3], 1e-10, 'grad v')
  end)

  it('broadcasts leading dims of query, key and value as matmul does', function()
    local c = fused.plain_3d   -- q [3, 6, 5]; k and v given once for the three
    local q = f64(c.q, true)
    local k = torch.tensor({ c.k[1] }, { dtype = 'float64' })
    local v = torch.tensor({ c.v[1] }, { dtype = 'float64' })
    local out = F.scaled_dot_product_attention(q, k, v)
    local want = F.scaled_dot_product_attention(q, k:expand(3, 4, 5):contiguous(), v:expand(3, 4, 3):contiguous())
    assert.are.same({ 3, 6, 3 }, out:size():totable())
    close(out[1], c.out[1], 1e-12, 'first batch entry')
    close(out, want, 0, 'expanded inputs')
  end)

  it('passes float64 gradchecks (bool broadcast mask, causal, L ~= S, E ~= Ev, scale)', function()
    local function rg(...) return torch.randn({ ... }, { dtype = 'float64', requires_grad = true }) end
    local q, k, v = rg(2, 2, 3, 4), rg(2, 2, 5, 4), rg(2, 2, 5, 3)
    local mask = torch.tensor({ { true, false, true, true, true } }, { dtype = 'bool' })
    assert.is_true(torch.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { attn_mask = mask })
    end, { q, k, v }))
    assert.is_true(torch.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { is_causal = true, scale = 0.3 })
    end, { q, k, v }))
  end)

  it('drops probabilities with a draw that the backward repeats', function()
    -- q = k = 0 gives probabilities 1/S and v = I puts them in the output: out * S * (1 - p)
    -- is the keep mask
    local S, p = 40, 0.3
    local z = torch.zeros(2, 30, 8, { dtype = 'float64' })
    local eye = torch.eye(S, { dtype = 'float64' }):expand(2, S, S)
    torch.manual_seed(3)
    local keep = F.scaled_dot_product_attention(z, torch.zeros(2, S, 8, { dtype = 'float64' }), eye,
      { dropout_p = p }) * (S * (1 - p))
    local ones = keep:eq(1):sum():item()
    assert.are.equal(keep:numel(), ones + keep:eq(0):sum():item())
    assert.is_true(math.abs(ones / keep:numel() - (1 - p)) < 0.05, 'kept fraction ' .. ones / keep:numel())
    -- one seed, one draw
    torch.manual_seed(3)
    local again = F.scaled_dot_product_attention(z, torch.zeros(2, S, 8, { dtype = 'float64' }), eye,
      { dropout_p = p }) * (S * (1 - p))
    assert.are.equal(0, (again - keep):abs():sum():item())
    -- the gradient uses the forward's mask: a gradcheck that redraws it from the same seed
    local function rg(...) return torch.randn({ ... }, { dtype = 'float64', requires_grad = true }) end
    assert.is_true(torch.autograd.gradcheck(function(a, b, c)
      torch.manual_seed(11)
      return F.scaled_dot_product_attention(a, b, c, { dropout_p = 0.4, is_causal = true })
    end, { rg(2, 5, 3), rg(2, 6, 3), rg(2, 6, 2) }))
  end)

  it('gives zeros for empty keys and empty outputs for empty queries', function()
    local out = F.scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 5))
    assert.are.same({ 2, 3, 5 }, out:size():totable())
    assert.are.equal(0, out:abs():sum():item())
    out = F.scaled_dot_product_attention(torch.randn(2, 0, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 5))
    assert.are.same({ 2, 0, 5 }, out:size():totable())
  end)

  it('rejects masks of the wrong dtype or shape and mixed dtypes', function()
    local q = torch.randn(2, 3, 4)
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { attn_mask = torch.zeros(3, 3, { dtype = 'int64' }) }) end,
      "attn_mask must be bool or of the query's dtype float32, got int64")
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { attn_mask = torch.zeros(4, 3, 3) }) end,
      'attn_mask of shape [4, 3, 3] does not broadcast')
    error_matches(function() F.scaled_dot_product_attention(q, q:double(), q) end, 'must have one dtype')
    error_matches(function() F.scaled_dot_product_attention(q, q, q, { scale = -1 }) end, 'scale must be a positive')
    error_matches(function() torch._C.sdpa(q, q, q, torch.zeros(3, 3), true, 0) end, 'not both')
    if device.is_cuda then   -- the CUDA kernels keep a row of up to 128 in registers
      local wide = torch.randn(1, 2, 130)
      error_matches(function() F.scaled_dot_product_attention(wide, wide, wide) end,
        'supports head dims up to 128, got E = 130 and Ev = 130')
    end
  end)

  it('keeps O(L) memory on the device for forward and backward', function()
    if not device.is_cuda then return pending('needs a CUDA device (the emulated one will do)') end
    local L = 1024
    local q = torch.randn(1, 2, L, 16, { requires_grad = true })
    local k, v = torch.randn(1, 2, L, 16, { requires_grad = true }), torch.randn(1, 2, L, 16, { requires_grad = true })
    torch.cuda.synchronize()
    local base = torch.cuda.memory_allocated()
    local peak0 = torch.cuda.max_memory_allocated()
    local out = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    out:sum():backward()
    torch.cuda.synchronize()
    local grown = torch.cuda.max_memory_allocated() - math.max(base, peak0)
    -- one head's L x S scores alone would be 4 MiB; inputs, output, grads and lse are ~0.9 MiB
    assert.is_true(grown < 2 * 1024 * 1024, 'peak grew by ' .. grown .. ' bytes')
  end)

  it('gives on cuda:0 the CPU kernel\'s numbers (float32, float64, masks, dropout)', function()
    if not device.is_cuda then return pending('needs a CUDA device (the emulated one will do)') end
    for _, dtype in ipairs { 'float32', 'float64' } do
      for _, case in ipairs {
        { L = 70, S = 45, E = 24, Ev = 40, opts = { is_causal = true } },
        { L = 33, S = 130, E = 64, Ev = 64, mask = 'bool' },
        { L = 17, S = 65, E = 100, Ev = 8, mask = 'float', opts = { dropout_p = 0.25 } },
      } do
        local cpu = torch.device('cpu')
        local q = torch.randn(2, 3, case.L, case.E, { dtype = dtype, device = cpu })
        local k = torch.randn(2, 3, case.S, case.E, { dtype = dtype, device = cpu })
        local v = torch.randn(2, 3, case.S, case.Ev, { dtype = dtype, device = cpu })
        local g = torch.randn(2, 3, case.L, case.Ev, { dtype = dtype, device = cpu })
        local mask
        if case.mask == 'bool' then mask = torch.rand(2, 1, case.L, case.S, { device = cpu }):gt(0.2) end
        if case.mask == 'float' then mask = torch.randn(case.S, { dtype = dtype, device = cpu }) end
        local results = {}
        for _, dev in ipairs { 'cpu', device.name } do
          local function on(x) return x and x:to(dev):detach() or nil end
          local a, b, c = on(q):requires_grad_(true), on(k):requires_grad_(true), on(v):requires_grad_(true)
          local opts = { attn_mask = on(mask) }
          for key, val in pairs(case.opts or {}) do opts[key] = val end
          torch.manual_seed(5)
          local out = F.scaled_dot_product_attention(a, b, c, opts)
          out:backward(on(g))
          results[#results + 1] = { out:cpu(), a.grad:cpu(), b.grad:cpu(), c.grad:cpu() }
        end
        local tol = dtype == 'float32' and 1e-4 or 1e-12
        for i, what in ipairs { 'value', 'grad q', 'grad k', 'grad v' } do
          close(results[2][i], results[1][i], tol, dtype .. ' ' .. what)
        end
      end
    end
  end)
end)
