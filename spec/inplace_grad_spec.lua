-- In-place writes that autograd records, as PyTorch records them: t[idx] = v, index_put_,
-- scatter_(add_), index_add_/copy_/fill_ and masked_fill_ on a non-leaf (IndexPutBackward0,
-- ScatterBackward0, ...), and t[key] = v with numbers and ranges (CopySlices), into plain
-- tensors and into non-leaves.  Values, grad_fn and gradients against PyTorch 1.13
-- (spec/fixtures/inplace_grad.lua, written by spec/fixtures/make_inplace_grad.py; indices
-- shifted by one here), float64 gradchecks, the seq2seq attention tutorial's pattern end
-- to end, and the writes that stay refused.
local torch = require 'torch'
local autograd = require 'torch.autograd'
local check = dofile('spec/helpers/check.lua')
local close, expect_error = check.close, check.expect_error

local ref = dofile('spec/fixtures/inplace_grad.lua')

local D = 'float64'
local function T(v) return torch.tensor(v, { dtype = D }) end
local function leaf(v) return T(v):requires_grad_() end
local C23 = T({ { 1, -2, 3 }, { 0.5, 5, -1 } })
local function base()
  local w2 = leaf({ { 1, 2, 3 }, { 4, 5, 6 } })
  return w2, w2 * 2
end

-- the Lua twin of each of make_inplace_grad.py's cases: the destination, c, the leaves
local cases = {
  put_plain = function()
    local w = leaf({ 1.5 })
    local y = torch.zeros(3, { dtype = D })
    y[torch.tensor({ 1 })] = w * 2
    return y, T({ 1, 2, 3 }), { w = w }
  end,
  select_plain = function()
    local w = leaf({ 1.5 })
    local z = torch.zeros(2, 3, { dtype = D })
    z[1] = w:expand(3) * 4
    return z, torch.arange(1, 7, { dtype = D }):reshape(2, 3), { w = w }
  end,
  range_plain = function()
    local w = leaf({ 1.5 })
    local u = torch.zeros(4, { dtype = D })
    u[{ { 2, 3 } }] = w:expand(2)
    return u, T({ 1, 2, 3, 4 }), { w = w }
  end,
  step_broadcast = function()
    local w = leaf({ { 1.5 }, { 2.5 } })
    local z = torch.zeros(2, 5, { dtype = D })
    z[{ {}, { 1, 5, 2 } }] = w * w
    return z, torch.arange(1, 11, { dtype = D }):reshape(2, 5), { w = w }
  end,
  number_and_index = function()
    local w2, y = base()
    local v = leaf({ 10, 20 })
    y[{ 1, torch.tensor({ 3, 1 }) }] = v
    return y, C23, { w2 = w2, v = v }
  end,
  put_nonleaf = function()
    local w2, y = base()
    local v = leaf({ { 10, 20, 30 } })
    y[torch.tensor({ 2 })] = v
    return y, C23, { w2 = w2, v = v }
  end,
  index_put_accumulate = function()
    local w2, y = base()
    local v = leaf({ 10, 20 })
    y:index_put_({ torch.tensor({ 1, 1 }), torch.tensor({ 2, 2 }) }, v, { accumulate = true })
    return y, C23, { w2 = w2, v = v }
  end,
  scatter = function()
    local w2, y = base()
    local s = leaf({ { 10, 20, 30 } })
    y:scatter_(1, torch.tensor({ { 2, 1, 2 } }), s)
    return y, C23, { w2 = w2, s = s }
  end,
  scatter_add = function()
    local w2, y = base()
    local s = leaf({ { 10, 20, 30 }, { 40, 50, 60 } })
    y:scatter_add_(1, torch.tensor({ { 2, 1, 2 }, { 2, 2, 1 } }), s)
    return y, C23, { w2 = w2, s = s }
  end,
  index_add = function()
    local w2, y = base()
    local s = leaf({ { 10, 20 }, { 30, 40 } })
    y:index_add_(2, torch.tensor({ 3, 1 }), s, { alpha = 2 })
    return y, C23, { w2 = w2, s = s }
  end,
  index_copy = function()
    local w2, y = base()
    local s = leaf({ { 10, 20 }, { 30, 40 } })
    y:index_copy_(2, torch.tensor({ 3, 1 }), s)
    return y, C23, { w2 = w2, s = s }
  end,
  index_fill = function()
    local w2, y = base()
    local val = leaf(7)
    y:index_fill_(2, torch.tensor({ 3, 1 }), val)
    return y, C23, { w2 = w2, val = val }
  end,
  masked_fill = function()
    local w2, y = base()
    local val = leaf(7)
    y:masked_fill_(torch.tensor({ { true, false, true }, { false, false, true } }), val)
    return y, C23, { w2 = w2, val = val }
  end,
  slices_nonleaf = function()
    local w2, y = base()
    local v = leaf({ 10, 20 })
    y[{ 2, { 1, 2 } }] = v
    y[{ 1, 1 }] = 5
    return y, C23, { w2 = w2, v = v }
  end,
  not_contiguous = function()
    local w = leaf({ 1, 2, 3 })
    local z
    do z = torch.zeros(3, 2, { dtype = D }):t() end
    collectgarbage()   -- the transposed tensor's base, dropped, must not count as sharing its memory
    assert.is_false(z:is_contiguous())
    z[2] = w * 3
    return z, T({ { 1, 2, 3 }, { 4, 5, 6 } }), { w = w }
  end,
}

-- PyTorch names these after the op; here they are index_put_ (or copy_) underneath
local same_node = { put_plain = true, select_plain = true, range_plain = true, step_broadcast = true,
  number_and_index = true, put_nonleaf = true, index_put_accumulate = true, scatter = true, scatter_add = true,
  slices_nonleaf = true }

describe('in-place writes autograd records', function()
  for name, want in pairs(ref.cases) do
    it(name .. ': values, grad_fn and gradients as PyTorch', function()
      local dest, c, leaves = cases[name]()
      close(dest:detach(), want.value, 1e-12, name .. ' value')
      assert.is_true(dest.requires_grad, name)
      if same_node[name] then assert.are.equal(want.grad_fn, dest.grad_fn.name, name) end
      ;(dest * c):sum():backward()
      for k, g in pairs(want.grads) do close(leaves[k].grad, g, 1e-12, name .. ' grad ' .. k) end
    end)
  end

  it('the reported silent losses: the destination now carries the history', function()
    local w = torch.ones(1, { requires_grad = true })
    local y = torch.zeros(3)
    y[torch.tensor({ 1 })] = w * 2
    assert.are.equal('IndexPutBackward0', y.grad_fn.name)
    local z = torch.zeros(2, 3)
    z[1] = w:expand(3) * 4
    assert.are.equal('CopySlices', z.grad_fn.name)
    local u = torch.zeros(4)
    u[{ { 2, 3 } }] = w:expand(2)
    assert.are.equal('CopySlices', u.grad_fn.name)
    ;(y:sum() + z:sum() + u:sum()):backward()
    assert.are.same({ 2 + 12 + 2 }, w.grad:tolist())
  end)

  it('a float32 write into a float64 destination passes the gradient back in float32', function()
    local w = torch.tensor({ 1.5, 2 }, { requires_grad = true })
    local y = torch.zeros(2, 2, { dtype = D })
    y[2] = w * 3
    assert.are.equal('float64', y.dtype)
    ;(y * T({ { 1, 1 }, { 2, 5 } })):sum():backward()
    assert.are.equal('float32', w.grad.dtype)
    assert.are.same({ 6, 15 }, w.grad:tolist())
  end)

  it('writes without grad mode, or of values that need none, record nothing', function()
    local w = leaf({ 1, 2 })
    local y = torch.zeros(2, 2, { dtype = D })
    torch.no_grad(function() y[1] = w * 2 end)
    assert.is_false(y.requires_grad)
    assert.are.same({ { 2, 4 }, { 0, 0 } }, y:tolist())
    y[{ 2, { 1, 2 } }] = T({ 7, 8 })
    y[torch.tensor({ 1 })] = 3
    assert.is_false(y.requires_grad)
    assert.are.same({ { 3, 3 }, { 7, 8 } }, y:tolist())
  end)
end)

describe('float64 gradchecks of recorded writes', function()
  it('slices and an index on a region of a non-leaf', function()
    assert.is_true(autograd.gradcheck(function(w2, v, s)
      local y = w2 * w2
      y[{ 2, { 1, 3, 2 } }] = v
      y[{ 1, torch.tensor({ 3, 2 }) }] = s * s
      return y * 3
    end, { T({ { 1, 2, 3 }, { 4, 5, 6 } }):requires_grad_(), leaf({ 0.5, -1 }), leaf({ 2, 0.3 }) }))
  end)

  it('scatter_add_ and index_put_ with accumulate on a non-leaf, a broadcast slice into a plain tensor', function()
    assert.is_true(autograd.gradcheck(function(w2, s)
      local y = w2:sin()
      y:scatter_add_(1, torch.tensor({ { 2, 1, 2 } }), s:narrow(1, 1, 1))
      y:index_put_({ torch.tensor({ 1, 1 }), torch.tensor({ 3, 3 }) }, s[2]:narrow(1, 1, 2), { accumulate = true })
      local z = torch.zeros(3, 3, { dtype = D })
      z[{ { 1, 2 }, {} }] = y * y
      z[3] = s[2]:narrow(1, 3, 1)
      return z
    end, { leaf({ { 1, 2, 3 }, { 4, 5, 6 } }), leaf({ { 0.1, 0.2, 0.3 }, { 0.4, 0.5, 0.6 } }) }))
  end)
end)

describe("the seq2seq attention tutorial's pattern", function()
  -- encoder_outputs = torch.zeros(max_length, hidden); encoder_outputs[ei] = output; the
  -- attention decoder then reads it (fixed weights, as make_inplace_grad.py sets them)
  local V, H, L = 6, 4, 5
  local SOURCE, TARGET = { 3, 6, 2 }, { 4, 1, 5 }
  local names = { 'emb_enc', 'w_ih', 'w_hh', 'b_h', 'emb_dec', 'w_attn', 'b_attn', 'w_comb', 'w_dec', 'w_out' }
  local function weights()
    local function w(n, shape, k)
      return ((torch.arange(0, n, { dtype = D }) * k + k):sin() * 0.5):reshape(shape):requires_grad_()
    end
    return {
      emb_enc = w(V * H, { V, H }, 0.7), w_ih = w(H * H, { H, H }, 1.1), w_hh = w(H * H, { H, H }, 1.3),
      b_h = w(H, { H }, 1.7), emb_dec = w(V * H, { V, H }, 1.9), w_attn = w(L * 2 * H, { L, 2 * H }, 2.3),
      b_attn = w(L, { L }, 2.9), w_comb = w(H * 2 * H, { H, 2 * H }, 3.1), w_dec = w(H * H, { H, H }, 3.7),
      w_out = w(V * H, { V, H }, 4.1),
    }
  end
  local function seq2seq(p)
    local hidden = torch.zeros(1, H, { dtype = D })
    local encoder_outputs = torch.zeros(L, H, { dtype = D })
    for ei, tok in ipairs(SOURCE) do
      local x = p.emb_enc[tok]:view(1, -1)
      hidden = torch.tanh(x:matmul(p.w_ih:t()) + hidden:matmul(p.w_hh:t()) + p.b_h)
      encoder_outputs[ei] = hidden[1]
    end
    local loss, dec_in = torch.tensor(0, { dtype = D }), 1   -- a tensor even where logp[{1, tok}] reads a number (no grad)
    for _, tok in ipairs(TARGET) do
      local embedded = p.emb_dec[dec_in]:view(1, -1)
      local attn_weights = torch.softmax(torch.cat({ embedded, hidden }, 2):matmul(p.w_attn:t()) + p.b_attn, 2)
      local attn_applied = torch.bmm(attn_weights:unsqueeze(1), encoder_outputs:unsqueeze(1))
      local output = torch.relu(torch.cat({ embedded, attn_applied[1] }, 2):matmul(p.w_comb:t()))
      hidden = torch.tanh(output:matmul(p.w_dec:t()) + hidden:matmul(p.w_hh:t()))
      local logp = torch.log_softmax(hidden:matmul(p.w_out:t()), 2)
      loss = loss - logp[{ 1, tok }]
      dec_in = tok
    end
    return loss, encoder_outputs
  end

  it('gives every weight, the encoder\'s included, PyTorch\'s gradient', function()
    local p = weights()
    local loss, enc = seq2seq(p)
    close(loss:item(), ref.seq2seq.loss, 1e-12, 'loss')
    close(enc:detach(), ref.seq2seq.encoder_outputs, 1e-12, 'encoder_outputs')
    assert.are.equal(ref.seq2seq.grad_fn, enc.grad_fn.name)
    loss:backward()
    for _, k in ipairs(names) do close(p[k].grad, ref.seq2seq.grads[k], 1e-10, 'grad ' .. k) end
    assert.is_true(p.emb_enc.grad:abs():sum():item() > 0)
  end)

  it('agrees with finite differences on the encoder weights', function()
    local p = weights()
    assert.is_true(autograd.gradcheck(function(emb_enc, w_ih)
      p.emb_enc, p.w_ih = emb_enc, w_ih
      return (seq2seq(p))
    end, { p.emb_enc, p.w_ih }))
  end)
end)

describe('recorded writes that stay refused', function()
  it('a leaf that requires grad, as in PyTorch', function()
    local w = torch.ones(3, { requires_grad = true })
    expect_error(function() w[1] = 5 end, 'a leaf tensor that requires grad', 'copy_')
    expect_error(function() w[torch.tensor({ 1 })] = 5 end, 'a leaf tensor that requires grad', 'index_put_')
    expect_error(function() w:scatter_(1, torch.tensor({ 1 }), 2) end, 'a leaf tensor that requires grad', 'scatter_')
    torch.no_grad(function() w[1] = 5 end)
    assert.are.same({ 5, 1, 1 }, w:tolist())
  end)

  it('a tensor with a view autograd recorded', function()
    local _, y = base()
    local row = y[1]
    expect_error(function() y[{ 2, 1 }] = 0 end, 'shares its memory with a view autograd recorded')
    expect_error(function() y[torch.tensor({ 2 })] = 0 end, 'shares its memory with a view autograd recorded')
    assert.are.same({ 2, 4, 6 }, row:tolist())
  end)

  it('a view of another tensor, whose history would miss the write (PyTorch records it on the base)', function()
    local w = leaf({ 1.5 })
    local a = torch.zeros(2, 3, { dtype = D })
    local b = a[1]
    expect_error(function() b[2] = w[1] end, 'shares its memory with another tensor', 'base[{i, ...}] = v')
    expect_error(function() b[torch.tensor({ 2 })] = w end, 'shares its memory with another tensor')
    expect_error(function() a[{ 1, 2 }] = w[1] end, 'shares its memory with another tensor')   -- b views a
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, a:tolist())
    b = nil
    collectgarbage()
    a[{ 1, 2 }] = w[1] * 2   -- through the base: recorded
    a:sum():backward()
    assert.are.same({ 2 }, w.grad:tolist())
  end)

  it('a backward through a value the write overwrote, as in PyTorch', function()
    local w2, y = base()
    local s = y:sin()   -- saves y
    y[{ 1, 1 }] = 0
    expect_error(function() (s:sum() + y:sum()):backward() end, 'modified by an inplace operation')
    assert.is_not_nil(w2)
  end)
end)
