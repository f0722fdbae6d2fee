-- The PyTorch tutorials' "Defining new autograd functions": y = a + b P3(c + d x), with P3
-- the Legendre polynomial of degree 3 as a torch.autograd.Function, fitted to sin(x) by
-- gradient descent with manual updates.
local steps = tonumber(arg and arg[1]) or 2000

local LegendrePolynomial3 = torch.autograd.Function:extend('LegendrePolynomial3')
function LegendrePolynomial3.forward(ctx, input)
  ctx:save_for_backward(input)
  return 0.5 * (5 * input ^ 3 - 3 * input)
end
function LegendrePolynomial3.backward(ctx, grad_output)
  local input = table.unpack(ctx.saved_tensors)
  return grad_output * 1.5 * (5 * input ^ 2 - 1)
end

local dtype, device = torch.float, torch.device('cpu')
-- Create Tensors to hold input and outputs.
local x = torch.linspace(-math.pi, math.pi, 2000, { device = device, dtype = dtype })
local y = torch.sin(x)

-- Create random Tensors for weights. For this example, we need
-- 4 weights: y = a + b * P3(c + d * x), these weights need to be initialized
-- not too far from the correct result to ensure convergence.
local a = torch.full({}, 0.0, { device = device, dtype = dtype, requires_grad = true })
local b = torch.full({}, -1.0, { device = device, dtype = dtype, requires_grad = true })
local c = torch.full({}, 0.0, { device = device, dtype = dtype, requires_grad = true })
local d = torch.full({}, 0.3, { device = device, dtype = dtype, requires_grad = true })

local learning_rate = 5e-6
for t = 0, steps - 1 do
  -- To apply our Function, we use Function.apply method. We alias this as 'P3'.
  local P3 = LegendrePolynomial3.apply
  -- Forward pass: compute predicted y using operations; we compute P3 using our custom
  -- autograd operation.
  local y_pred = a + b * P3(c + d * x)
  -- Compute and print loss
  local loss = (y_pred - y):pow(2):sum()
  if t % 100 == 99 then print(t, loss:item()) end
  -- Use autograd to compute the backward pass.
  loss:backward()
  -- Update weights using gradient descent
  torch.no_grad(function()
    a:sub_(learning_rate * a.grad)
    b:sub_(learning_rate * b.grad)
    c:sub_(learning_rate * c.grad)
    d:sub_(learning_rate * d.grad)
    -- Manually zero the gradients after updating weights
    a.grad = nil
    b.grad = nil
    c.grad = nil
    d.grad = nil
  end)
end
print(('Result: y = %s + %s * P3(%s + %s x)'):format(a:item(), b:item(), c:item(), d:item()))
