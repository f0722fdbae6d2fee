-- Embedding, the normalization layers, the transformer activations and the containers:
-- values and gradients against PyTorch 1.13 (spec/fixtures/layers.lua, written by
-- spec/fixtures/make_layers.py), float64 gradchecks, container behaviour, reprs and errors.
local torch = require 'torch'
local check = dofile('spec/helpers/check.lua')
local close = check.close
local nn = require 'nn'
local F = nn.functional

local ref = dofile('spec/fixtures/layers.lua')


local function f64(v, rg) return torch.tensor(v, { dtype = 'float64', requires_grad = rg or nil }) end

-- the gradient of sum(out * gout) for each input, after fn(inputs)
local function grads_of(fn, inputs, gout)
  local out = fn(table.unpack(inputs))
  local loss = (out * f64(gout)):sum()
  loss:backward()
  return out
end

local function error_matches(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok, 'expected an error matching ' .. pattern)
  assert(tostring(err):find(pattern), ('error "%s" does not match "%s"'):format(tostring(err), pattern))
end

describe('activations', function()
  local functional = {
    gelu = function(x) return F.gelu(x) end,
    gelu_tanh = function(x) return F.gelu(x, 'tanh') end,
    silu = F.silu,
    leaky_relu = function(x) return F.leaky_relu(x, 0.2) end,
    leaky_relu_default = F.leaky_relu,
    elu = function(x) return F.elu(x, 1.5) end,
    softplus = F.softplus,
    softplus_beta = function(x) return F.softplus(x, 2.0, 5.0) end,
    mish = F.mish,
    hardtanh = function(x) return F.hardtanh(x, -0.5, 0.7) end,
    hardtanh_default = F.hardtanh,
    relu6 = F.relu6,
    softmax = function(x) return F.softmax(x, 2) end,
    log_softmax = function(x) return F.log_softmax(x, 2) end,
  }
  local modules = {
    gelu = nn.GELU(), gelu_tanh = nn.GELU('tanh'), silu = nn.SiLU(), leaky_relu = nn.LeakyReLU(0.2),
    leaky_relu_default = nn.LeakyReLU(), elu = nn.ELU { alpha = 1.5 }, softplus = nn.Softplus(),
    softplus_beta = nn.Softplus(2.0, 5.0), mish = nn.Mish(), hardtanh = nn.Hardtanh(-0.5, 0.7),
    hardtanh_default = nn.Hardtanh(), relu6 = nn.ReLU6(), softmax = nn.Softmax(2), log_softmax = nn.LogSoftmax { dim = 2 },
  }

  it('match PyTorch in value and gradient, functional and module forms (also where exp overflows)', function()
    for name, case in pairs(ref.activations) do
      for form, fn in pairs { functional = functional[name], module = modules[name] } do
        local x = f64(case.x, true)
        local out = grads_of(fn, { x }, case.gout)
        close(out, case.out, 1e-12, name .. ' (' .. form .. ') value')
        close(x.grad, case.grad, 1e-12, name .. ' (' .. form .. ') gradient')
      end
    end
  end)

  it('float32 agrees with PyTorch to float rounding', function()
    for _, name in ipairs { 'gelu', 'gelu_tanh', 'silu', 'elu', 'softplus', 'mish' } do
      local case = ref.activations[name]
      close(functional[name](torch.tensor(case.x, { dtype = 'float32' })), case.out, 1e-5, name)
    end
  end)

  it('pass float64 gradchecks away from their kinks', function()
    local x = torch.tensor({ -2.3, -1.1, -0.4, 0.35, 0.9, 1.7, 3.2, 6.5 }, { dtype = 'float64', requires_grad = true })
    for name, fn in pairs(functional) do
      if name ~= 'softmax' and name ~= 'log_softmax' then
        assert.is_true(torch.autograd.gradcheck(fn, { x }), name)
      end
    end
    local m = torch.randn(3, 5, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(functional.softmax, { m }))
    assert.is_true(torch.autograd.gradcheck(functional.log_softmax, { m }))
  end)

  it("print as PyTorch's", function()
    assert.are.equal("GELU(approximate='none')", tostring(nn.GELU()))
    assert.are.equal("GELU(approximate='tanh')", tostring(nn.GELU { approximate = 'tanh' }))
    assert.are.equal('SiLU()', tostring(nn.SiLU()))
    assert.are.equal('Mish()', tostring(nn.Mish()))
    assert.are.equal('LeakyReLU(negative_slope=0.01)', tostring(nn.LeakyReLU()))
    assert.are.equal('LeakyReLU(negative_slope=0.2)', tostring(nn.LeakyReLU(0.2)))
    assert.are.equal('ELU(alpha=1.0)', tostring(nn.ELU()))
    assert.are.equal('Softplus(beta=1, threshold=20)', tostring(nn.Softplus()))
    assert.are.equal('Hardtanh(min_val=-1.0, max_val=1.0)', tostring(nn.Hardtanh()))
    assert.are.equal('ReLU6()', tostring(nn.ReLU6()))
    assert.are.equal('Softmax(dim=2)', tostring(nn.Softmax(2)))
    assert.are.equal('LogSoftmax(dim=1)', tostring(nn.LogSoftmax(1)))
    assert.are.equal('Tanh()', tostring(nn.Tanh()))
    assert.are.equal('Sigmoid()', tostring(nn.Sigmoid()))
  end)

  it('refuse bad options with messages that name them', function()
    error_matches(function() nn.GELU('fast') end, "approximate must be 'none' or 'tanh', got fast")
    error_matches(function() F.gelu(torch.randn(2), 'fast') end, "approximate must be 'none' or 'tanh'")
    error_matches(function() nn.Softmax() end, 'nn.Softmax: dim must be an integer %(1%-based%), got nil')
    error_matches(function() nn.LeakyReLU('a') end, 'negative_slope must be a number, got a')
    error_matches(function() nn.ELU { alfa = 1 } end, 'unknown option alfa')
    -- PyTorch's F.hardtanh(x, 1., -1.) computes (every element -1, as clamp gives); only
    -- nn.Hardtanh(1., -1.) refuses (its assertion max_val > min_val)
    assert.are.same({ -1, -1, -1 }, F.hardtanh(torch.tensor({ -3.0, 0.0, 3.0 }), 1, -1):totable())
    error_matches(function() nn.Hardtanh(1, -1) end, 'max_val %(%-1.0%) must be greater than min_val %(1.0%)')
    error_matches(function() F.silu(3) end, 'silu: expected the input to be a tensor, got number')
  end)
end)

describe('nn.Embedding', function()
  local E = ref.embedding

  it('looks up rows for indices of any shape, with gradients as PyTorch (1-based indices)', function()
    local w = f64(E.plain.weight, true)
    local out = grads_of(function(t) return F.embedding(torch.tensor(E.plain.idx), t) end, { w }, E.plain.gout)
    assert.are.same({ 2, 3, 3 }, out:size():totable())
    close(out, E.plain.out, 0, 'embedding value')
    close(w.grad, E.plain.grad, 1e-12, 'embedding gradient')
    assert.are.same({ 3 }, F.embedding(torch.tensor(2), w):size():totable())
    assert.are.same({ 0, 3 }, F.embedding(torch.tensor({}, { dtype = 'int64' }), w):size():totable())
  end)

  it('takes indices from another device (the padding mask moves with them)', function()
    local w = torch.randn(4, 2, { requires_grad = true })
    local idx = torch.tensor({ 1, 3, 3 }, { device = 'cpu' })
    local out = F.embedding(idx, w, { padding_idx = 1 })
    assert.are.same(w[3]:tolist(), out[2]:tolist())
    out:sum():backward()
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 2, 2 }, { 0, 0 } }, w.grad:tolist())
  end)

  it('gives the padding_idx row no gradient', function()
    local w = f64(E.padding.weight, true)
    local out = grads_of(function(t) return F.embedding(torch.tensor(E.padding.idx), t, { padding_idx = E.padding.padding_idx }) end,
      { w }, E.padding.gout)
    close(out, E.padding.out, 0, 'value')
    close(w.grad, E.padding.grad, 1e-12, 'gradient')
    assert.are.same({ 0, 0, 0 }, w.grad[5]:tolist())
  end)

  -- (padding_idx and scale_grad_by_freq change the gradient on purpose: PyTorch's values above)
  it('passes a float64 gradcheck, repeated indices summing', function()
    local w = torch.randn(5, 3, { dtype = 'float64', requires_grad = true })
    local idx = torch.tensor({ { 1, 2, 2 }, { 5, 1, 2 } })
    assert.is_true(torch.autograd.gradcheck(function(t) return F.embedding(idx, t) end, { w }))
  end)

  it('scales gradients by the inverse frequency with scale_grad_by_freq', function()
    local w = f64(E.freq.weight, true)
    grads_of(function(t) return F.embedding(torch.tensor(E.freq.idx), t, { scale_grad_by_freq = true }) end, { w }, E.freq.gout)
    close(w.grad, E.freq.grad, 1e-12, 'gradient')
  end)

  it('renormalizes the rows it looks up to max_norm, in place, as PyTorch', function()
    for _, case in ipairs { E.max_norm, E.max_norm_l1 } do
      local w = f64(case.weight)
      local out = F.embedding(torch.tensor(case.idx), w, { max_norm = case.max_norm, norm_type = case.norm_type or 2 })
      close(out, case.out, 1e-12, 'value')
      close(w, case.weight_after, 1e-12, 'weight after')
    end
    local m = nn.Embedding(6, 3, { max_norm = 1.0 })
    m(torch.tensor({ 1, 2 }))
    assert(m.weight[1]:norm():item() <= 1 + 1e-6)
    assert.is_nil(m.weight.grad)
  end)

  it('initialises N(0, 1) with a zero padding row; from_pretrained shares and freezes', function()
    torch.manual_seed(1)
    local m = nn.Embedding(2000, 8, { padding_idx = 3 })
    assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0 }, m.weight[3]:tolist())
    assert(math.abs(m.weight:mean():item()) < 0.02 and math.abs(m.weight:std():item() - 1) < 0.02)
    assert.is_true(m.weight.requires_grad)
    local w = torch.randn(4, 2)
    local p = nn.Embedding.from_pretrained(w)
    assert.is_false(p.weight.requires_grad)
    assert.are.same(w[3]:tolist(), p(torch.tensor({ 3 }))[1]:tolist())
    local q = nn.Embedding.from_pretrained(w, { freeze = false, padding_idx = 2 })
    assert.is_true(q.weight.requires_grad)
    assert.are.same(w[2]:tolist(), q.weight[2]:tolist())   -- PyTorch leaves a given row as it is
    assert.are.equal(1, #q:parameters())
  end)

  it("prints as PyTorch's (padding_idx 1-based) and refuses bad input", function()
    assert.are.equal('Embedding(10, 3)', tostring(nn.Embedding(10, 3)))
    assert.are.equal('Embedding(10, 3, padding_idx=10, max_norm=1.0)', tostring(nn.Embedding(10, 3, { padding_idx = -1, max_norm = 1.0 })))
    local m = nn.Embedding(4, 2)
    if dofile('spec/helpers/device.lua').is_cuda then   -- checked on the GPU, reported at the next synchronisation
      error_matches(function() m(torch.tensor({ 1, 0 })):tolist() end, 'index 0 %(at position 2%) is out of range for dimension 1 with size 4')
      error_matches(function() m(torch.tensor({ 5 })):tolist() end, 'index 5 %(at position 1%) is out of range')
    else
      error_matches(function() m(torch.tensor({ 1, 0 })) end, 'index 0 is out of range for an embedding of 4 rows %(dplua counts from 1')
      error_matches(function() m(torch.tensor({ 5 })) end, 'index 5 is out of range for an embedding of 4 rows')
    end
    error_matches(function() m(torch.tensor({ 1.0 })) end, 'indices must be an int64 tensor of 1%-based indices, got float32')
    error_matches(function() nn.Embedding(4, 2, { padding_idx = 0 }) end, 'padding_idx 0 is out of range for an embedding of 4 rows %(dplua counts from 1%)')
    error_matches(function() nn.Embedding(4, 2, { sparse = true }) end, 'sparse gradients are not supported')
    error_matches(function() nn.Embedding(-1, 2) end, 'num_embeddings must be a non%-negative integer, got %-1')
    error_matches(function() F.embedding(torch.tensor({ 1 }), torch.randn(3)) end, 'weight must be 2%-D')
  end)
end)

describe('layer_norm', function()
  local N = ref.norms

  it('matches PyTorch over one and two trailing dims, with and without affine', function()
    for _, name in ipairs { 'ln_last', 'ln_last_plain', 'ln_two', 'ln_two_plain' } do
      local case = N[name]
      local x = f64(case.x, true)
      local w = case.weight and f64(case.weight, true)
      local b = case.bias and f64(case.bias, true)
      local out = grads_of(function(t) return F.layer_norm(t, case.shape, w, b, case.eps) end, { x }, case.gout)
      assert.are.equal('NativeLayerNormBackward0', out.grad_fn.name)
      close(out, case.out, 1e-12, name .. ' value')
      close(x.grad, case.grads[1], 1e-10, name .. ' grad x')
      if w then close(w.grad, case.grads[2], 1e-10, name .. ' grad weight') end
      if b then close(b.grad, case.grads[3], 1e-10, name .. ' grad bias') end
    end
  end)

  it('float32 agrees with PyTorch to float rounding, also with a large mean', function()
    local case = N.ln_two
    local out = F.layer_norm(torch.tensor(case.x, { dtype = 'float32' }) , case.shape,
      torch.tensor(case.weight, { dtype = 'float32' }), torch.tensor(case.bias, { dtype = 'float32' }), case.eps)
    close(out, case.out, 1e-5, 'float32')
    local shifted = F.layer_norm(torch.tensor(N.ln_last_plain.x, { dtype = 'float32' }) + 1000, { 4 })
    close(shifted, N.ln_last_plain.out, 2e-3, 'shifted by 1000')
  end)

  it('passes float64 gradchecks (x, weight and bias; non-contiguous input)', function()
    local x = torch.randn(3, 2, 5, { dtype = 'float64', requires_grad = true })
    local w = torch.randn(5, { dtype = 'float64', requires_grad = true })
    local b = torch.randn(5, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(a, ww, bb) return F.layer_norm(a, { 5 }, ww, bb) end, { x, w, b }))
    assert.is_true(torch.autograd.gradcheck(function(a) return F.layer_norm(a:transpose(1, 3), { 3 }) end, { x }))
    -- a non-contiguous incoming gradient
    assert.is_true(torch.autograd.gradcheck(function(a) return F.layer_norm(a, { 5 }):transpose(1, 3) end, { x }))
    local w2 = torch.randn(2, 5, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(a, ww) return F.layer_norm(a, { 2, 5 }, ww) end, { x, w2 }))
  end)

  it('matches PyTorch on a tall batch (the CUDA kernels sum the rows in chunks)', function()
    local case = N.ln_tall
    local i = torch.arange(1, 151, { dtype = 'float64' }):reshape(150, 1)
    local j = torch.arange(1, 41, { dtype = 'float64' }):reshape(1, 40)
    local x = ((i * 0.37 + j * 1.3):sin() * 2 + 3):requires_grad_(true)
    local g = (i * 0.11 - j * 0.7):cos()
    local w = (j[1] * 0.5):cos():requires_grad_(true)
    local b = (j[1] * 0.9):sin():requires_grad_(true)
    local y = F.layer_norm(x, 40, w, b, 1e-5)
    local loss = (y * g):sum()
    loss:backward()
    local rows = torch.tensor(case.rows)
    close(y:index_select(1, rows), case.out, 1e-12, 'value')
    close(x.grad:index_select(1, rows), case.grad_x, 1e-10, 'grad x')
    close(w.grad, case.grad_weight, 1e-10, 'grad weight')
    close(b.grad, case.grad_bias, 1e-10, 'grad bias')
  end)

  it('nn.LayerNorm: ones and zeros, options, repr, empty batches', function()
    local m = nn.LayerNorm(4)
    assert.are.same({ 1, 1, 1, 1 }, m.weight:tolist())
    assert.are.same({ 0, 0, 0, 0 }, m.bias:tolist())
    assert.are.equal('LayerNorm({4}, eps=1e-05, elementwise_affine=true)', tostring(m))
    assert.are.equal('LayerNorm({3, 4}, eps=0.001, elementwise_affine=false)',
      tostring(nn.LayerNorm({ 3, 4 }, { eps = 1e-3, elementwise_affine = false })))
    assert.are.equal(0, #nn.LayerNorm(4, { elementwise_affine = false }):parameters())
    local nb = nn.LayerNorm(4, { bias = false })
    assert.are.equal(1, #nb:parameters())
    assert.is_nil(nb.bias)
    local x = torch.randn(5, 4)
    close(m(x), F.layer_norm(x, 4), 1e-6, 'module')
    local e = torch.randn(0, 4, { requires_grad = true })
    local y = m(e)
    assert.are.same({ 0, 4 }, y:size():totable())
    y:sum():backward()
    assert.are.same({ 0, 0, 0, 0 }, m.weight.grad:tolist())
  end)

  it('refuses shapes that do not fit, with PyTorch-like messages', function()
    local m = nn.LayerNorm(4)
    error_matches(function() m(torch.randn(2, 3)) end,
      'given normalized_shape=%[4%], expected input with shape %[%*, 4%], but got input of size %[2, 3%]')
    error_matches(function() F.layer_norm(torch.randn(2, 4), 4, torch.randn(3)) end,
      'layer_norm: weight has shape %[3%] but the normalized shape is %[4%]')
    error_matches(function() F.layer_norm(torch.tensor({ { 1, 2 } }), 2) end, 'expected a floating point input, got int64')
    error_matches(function() F.layer_norm(torch.randn(2, 4), 4, torch.randn(4, { dtype = 'float64' })) end,
      'weight is float64 but the input is float32')
    error_matches(function() nn.LayerNorm(2.5) end, 'normalized_shape must be an integer or a table')
  end)
end)

describe('group_norm and rms_norm', function()
  local N = ref.norms

  it('group_norm matches PyTorch with and without affine', function()
    for _, name in ipairs { 'gn', 'gn_plain' } do
      local case = N[name]
      local x = f64(case.x, true)
      local w = case.weight and f64(case.weight, true)
      local b = case.bias and f64(case.bias, true)
      local out = grads_of(function(t) return F.group_norm(t, case.groups, w, b, case.eps) end, { x }, case.gout)
      close(out, case.out, 1e-12, name .. ' value')
      close(x.grad, case.grads[1], 1e-10, name .. ' grad x')
      if w then close(w.grad, case.grads[2], 1e-10, name .. ' grad weight') end
      if b then close(b.grad, case.grads[3], 1e-10, name .. ' grad bias') end
    end
    local x = torch.randn(2, 6, 3, { dtype = 'float64', requires_grad = true })
    local w = torch.randn(6, { dtype = 'float64', requires_grad = true })
    assert.is_true(torch.autograd.gradcheck(function(a, ww) return F.group_norm(a, 3, ww, nil) end, { x, w }))
  end)

  it('nn.GroupNorm: parameters, repr, errors', function()
    local m = nn.GroupNorm(2, 4)
    assert.are.equal('GroupNorm(2, 4, eps=1e-05, affine=true)', tostring(m))
    assert.are.equal(2, #m:parameters())
    assert.are.same({ 2, 4, 3 }, m(torch.randn(2, 4, 3)):size():totable())
    error_matches(function() nn.GroupNorm(3, 4) end, 'num_channels %(4%) must be divisible by num_groups %(3%)')
    error_matches(function() F.group_norm(torch.randn(2, 6), 4) end, 'channels 6 to be divisible by num_groups 4')
    error_matches(function() m(torch.randn(4)) end, 'expected an input %[N, C, %*%] with at least 2 dims')
  end)

  it('rms_norm matches the PyTorch 2.4 formula; eps defaults to the dtype epsilon', function()
    local case = N.rms
    local x, w = f64(case.x, true), f64(case.weight, true)
    local out = grads_of(function(t) return F.rms_norm(t, case.shape, w, case.eps) end, { x }, case.gout)
    close(out, case.out, 1e-12, 'value')
    close(x.grad, case.grads[1], 1e-10, 'grad x')
    close(w.grad, case.grads[2], 1e-10, 'grad weight')
    assert.is_true(torch.autograd.gradcheck(function(a, ww) return F.rms_norm(a, { 3, 4 }, ww) end,
      { torch.randn(2, 3, 4, { dtype = 'float64', requires_grad = true }), torch.randn(3, 4, { dtype = 'float64', requires_grad = true }) }))
    -- a zero row: the default eps keeps it finite (x / sqrt(eps) = 0)
    assert.are.same({ { 0, 0 } }, F.rms_norm(torch.zeros(1, 2), 2):tolist())
    local m = nn.RMSNorm({ 3, 4 })
    assert.are.equal('RMSNorm({3, 4}, eps=nil, elementwise_affine=true)', tostring(m))
    close(m(f64(case.x)):detach(), F.rms_norm(f64(case.x), { 3, 4 }, nil, 2.220446049250313e-16), 1e-12, 'module')
    error_matches(function() m(torch.randn(3, 5)) end, 'expected input with shape %[%*, 3, 4%]')
  end)
end)

describe('containers', function()
  it('nn.ModuleList: 1-based indexing, #, ipairs, append, extend, insert, 1-based state-dict keys', function()
    local a, b, c = nn.Linear(2, 3), nn.Linear(3, 3), nn.ReLU()
    local list = nn.ModuleList { a, b }
    assert.are.equal(2, #list)
    assert.are.equal(a, list[1])
    list:append(c)
    list:insert(1, nn.Identity())
    list:extend { nn.Tanh() }
    assert.are.equal(5, #list)
    local kinds = {}
    for i, m in ipairs(list) do kinds[i] = torch.typename(m) end
    assert.are.same({ 'nn.Identity', 'nn.Linear', 'nn.Linear', 'nn.ReLU', 'nn.Tanh' }, kinds)
    local Model, parent = torch.class('LayersSpecModel', 'nn.Module')
    function Model:__init()
      parent.__init(self)
      self.layers = nn.ModuleList { nn.Linear(2, 2), nn.Linear(2, 1) }
    end
    local model = Model()
    local names = {}
    for name in model:named_parameters() do names[#names + 1] = name end
    assert.are.same({ 'layers.1.weight', 'layers.1.bias', 'layers.2.weight', 'layers.2.bias' }, names)
    local sd = model:state_dict()
    local other = Model()
    other:load_state_dict(sd)
    assert.are.same(sd['layers.2.weight']:tolist(), other.layers[2].weight:tolist())
    assert.are.equal('LayersSpecModel(\n  (layers): ModuleList(\n    (1): Linear(in_features=2, out_features=2, bias=true)\n'
      .. '    (2): Linear(in_features=2, out_features=1, bias=true)\n  )\n)', tostring(model))
    error_matches(function() list(torch.randn(2)) end, 'nn.ModuleList has no forward')
    error_matches(function() list:append(5) end, 'nn.ModuleList: entry 6 is not a module %(got number%)')
    error_matches(function() list:insert(8, nn.ReLU()) end, 'index 8 is out of range %(expected 1 to 6; dplua counts from 1%)')
  end)

  it('nn.ModuleDict keeps insertion order and refuses names that hide methods', function()
    local d = nn.ModuleDict { b = nn.ReLU(), a = nn.Linear(1, 1) }
    d:set('z', nn.Tanh())
    d.y = nn.Sigmoid()
    assert.are.same({ 'a', 'b', 'z', 'y' }, d:keys())
    assert.are.equal(4, #d)
    assert.is_true(d:contains('z'))
    local seen = {}
    for k, m in d:items() do seen[#seen + 1] = k .. '=' .. torch.typename(m) end
    assert.are.same({ 'a=nn.Linear', 'b=nn.ReLU', 'z=nn.Tanh', 'y=nn.Sigmoid' }, seen)
    assert.are.equal('nn.Tanh', torch.typename(d:pop('z')))
    assert.is_false(d:contains('z'))
    assert.are.same({ 'a.weight', 'a.bias' }, (function()
      local n = {}
      for name in d:named_parameters() do n[#n + 1] = name end
      return n
    end)())
    assert.are.equal('ModuleDict(\n  (a): Linear(in_features=1, out_features=1, bias=true)\n  (b): ReLU()\n  (y): Sigmoid()\n)', tostring(d))
    error_matches(function() d:set('forward', nn.ReLU()) end, 'key "forward" would hide the method or field of that name')
    error_matches(function() d:set('a.b', nn.ReLU()) end, 'keys must be non%-empty strings without dots')
    error_matches(function() d:pop('nope') end, 'no entry "nope"')
  end)

  it('nn.ParameterList and nn.ParameterDict register their tensors as parameters', function()
    local pl = nn.ParameterList { torch.randn(3), torch.randn(2, 4) }
    pl:append(torch.zeros(1))
    assert.are.equal(3, #pl)
    assert.are.equal(3, #pl:parameters())
    assert.is_true(pl[2].requires_grad)
    local dev = require('spec.helpers.device')
    local gpu = dev.is_cuda and ' (GPU 0)' or ''
    assert.are.equal('ParameterList(\n    (1): Parameter containing: [torch.float32 of size 3' .. gpu .. ']\n'
      .. '    (2): Parameter containing: [torch.float32 of size 2x4' .. gpu .. ']\n'
      .. '    (3): Parameter containing: [torch.float32 of size 1' .. gpu .. ']\n)', tostring(pl))
    local pd = nn.ParameterDict { w = torch.randn(2) }
    pd:set('v', torch.randn(1, { dtype = 'float64' }))
    local names = {}
    for name in pd:named_parameters() do names[#names + 1] = name end
    assert.are.same({ 'w', 'v' }, names)
    assert.are.equal('ParameterDict(\n    (w): Parameter containing: [torch.float32 of size 2' .. gpu .. ']\n'
      .. '    (v): Parameter containing: [torch.float64 of size 1' .. gpu .. ']\n)', tostring(pd))
    error_matches(function() nn.ParameterList { 3 } end, 'entry 1 is not a tensor')
  end)

  it('Sequential indexing, #, add/append/extend/insert', function()
    local s = nn.Sequential(nn.Linear(2, 2))
    s:append(nn.ReLU()):extend { nn.Linear(2, 1) }
    s:insert(2, nn.Tanh())
    assert.are.equal(4, #s)
    assert.are.equal('nn.Tanh', torch.typename(s[2]))
    assert.are.equal('nn.ReLU', torch.typename(s[3]))
    assert.are.same({ 3, 1 }, s(torch.randn(3, 2)):size():totable())
    local names = {}
    for name in s:named_parameters() do names[#names + 1] = name end
    assert.are.same({ '1.weight', '1.bias', '4.weight', '4.bias' }, names)
  end)

  it('module methods: named_modules, children, apply, requires_grad_, zero_grad, double', function()
    local net = nn.Sequential(nn.Linear(2, 3), nn.ModuleList { nn.LayerNorm(3), nn.GELU() })
    local names = {}
    for name, m in net:named_modules() do names[#names + 1] = name .. ':' .. torch.typename(m) end
    assert.are.same({ ':nn.Sequential', '1:nn.Linear', '2:nn.ModuleList', '2.1:nn.LayerNorm', '2.2:nn.GELU' }, names)
    assert.are.equal(2, #net:children())
    local cn = {}
    for name in net:named_children() do cn[#cn + 1] = name end
    assert.are.same({ '1', '2' }, cn)
    local visited = 0
    net:apply(function() visited = visited + 1 end)
    assert.are.equal(5, #net:modules())
    assert.are.equal(5, visited)
    assert.are.equal(net, net:requires_grad_(false))
    for _, p in ipairs(net:parameters()) do assert.is_false(p.requires_grad) end
    net:requires_grad_()
    net[1](torch.randn(1, 2)):sum():backward()
    net:zero_grad()
    assert.are.same({ 0, 0, 0 }, net[1].bias.grad:tolist())
    net:zero_grad { set_to_none = true }
    assert.is_nil(net[1].bias.grad)
    net:double()
    assert.are.equal('float64', net[2][1].weight.dtype)
    assert.are.equal('float64', net[2][1](net[1](torch.randn(2, 2, { dtype = 'float64' }))).dtype)
  end)
end)
