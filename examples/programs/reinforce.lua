-- pytorch/examples reinforcement_learning/reinforce.py: REINFORCE on CartPole (a Lua
-- version of gym's environment, cartpole.lua next to this file).
--   dplua examples/programs/reinforce.lua [episodes]
local F = nn.functional
local Categorical = torch.distributions.Categorical
local dir = (arg and arg[0] or ''):match('^(.*/)') or './'
local CartPole = dofile(dir .. 'cartpole.lua')
local episodes = tonumber(arg and arg[1]) or 20
local gamma, log_interval = 0.99, 10

local env = CartPole.new(543)
torch.manual_seed(543)

local Policy, parent = torch.class('Policy', 'nn.Module')
function Policy:__init()
  parent.__init(self)
  self.affine1 = nn.Linear(4, 128)
  self.dropout = nn.Dropout(0.6)
  self.affine2 = nn.Linear(128, 2)
  self.saved_log_probs = {}
  self.rewards = {}
end
function Policy:forward(x)
  x = self.affine1(x)
  x = self.dropout(x)
  x = F.relu(x)
  local action_scores = self.affine2(x)
  return F.softmax(action_scores, 2)
end

local policy = Policy()
local optimizer = optim.Adam(policy:parameters(), { lr = 1e-2 })
local eps = torch.finfo('float32').eps

local function select_action(state)
  state = torch.tensor(state):float():unsqueeze(1)
  local probs = policy(state)
  local m = Categorical(probs)
  local action = m:sample()
  table.insert(policy.saved_log_probs, m:log_prob(action))
  return action:item()
end

local function finish_episode()
  local R = 0
  local policy_loss, returns = {}, {}
  for i = #policy.rewards, 1, -1 do
    R = policy.rewards[i] + gamma * R
    table.insert(returns, 1, R)
  end
  returns = torch.tensor(returns)
  returns = (returns - returns:mean()) / (returns:std() + eps)
  for i, log_prob in ipairs(policy.saved_log_probs) do
    policy_loss[i] = -log_prob * returns[i]
  end
  optimizer:zero_grad()
  local loss = torch.cat(policy_loss):sum()
  loss:backward()
  optimizer:step()
  policy.rewards, policy.saved_log_probs = {}, {}
end

local running_reward = 10
for i_episode = 1, episodes do
  local state, ep_reward = env:reset(), 0
  for _ = 1, 9999 do   -- Don't infinite loop while learning
    local action = select_action(state)
    local reward, done, truncated
    state, reward, done, truncated = env:step(action)
    table.insert(policy.rewards, reward)
    ep_reward = ep_reward + reward
    if done or truncated then break end
  end
  running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
  finish_episode()
  if i_episode % log_interval == 0 then
    print(('Episode %d\tLast reward: %.2f\tAverage reward: %.2f'):format(i_episode, ep_reward, running_reward))
  end
  if running_reward > CartPole.reward_threshold then
    print(('Solved! Running reward is now %s and the last episode runs to %d time steps!')
      :format(running_reward, ep_reward))
    break
  end
end
