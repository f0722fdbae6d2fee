-- ddp_reference.lua: the small model and the one-process reference run that the CUDA DDP
-- specs (cuda/ddp.lua over mpi, cuda/nccl.lua over nccl) compare their ranks against.
local M = {}

function M.net(dtype)
  return nn.Sequential(nn.Linear(5, 8, { dtype = dtype }), nn.Tanh(), nn.Linear(8, 6, { dtype = dtype }),
                       nn.Tanh(), nn.Linear(6, 3, { dtype = dtype }))
end

-- The data of `steps` global batches of world * B rows, the initial state, and the model
-- trained on the full batches by one process on the CPU (SGD with momentum, MSE).
function M.reference(dtype, world, B, steps)
  torch.manual_seed(1234)
  local X, Y = torch.randn(world * B * steps, 5, { dtype = dtype }), torch.randn(world * B * steps, 3, { dtype = dtype })
  torch.manual_seed(7)
  local state = {}
  for k, v in pairs(M.net(dtype):state_dict()) do state[k] = v:clone() end
  local ref = M.net(dtype)
  ref:load_state_dict(state)
  local ropt, crit = optim.SGD(ref:parameters(), { lr = 0.05, momentum = 0.9 }), nn.MSELoss()
  for s = 0, steps - 1 do
    ropt:zero_grad()
    crit(ref(X:narrow(1, s * world * B + 1, world * B)), Y:narrow(1, s * world * B + 1, world * B)):backward()
    ropt:step()
  end
  return X, Y, state, ref
end

return M
