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
