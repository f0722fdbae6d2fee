-- pytorch/examples reinforcement_learning/actor_critic.py: an actor-critic on CartPole (a
-- Lua version of gym's environment, cartpole.lua next to this file).
--   dplua examples/programs/actor_critic.lua [episodes]
local F = nn.functional
local Categorical = torch.distributions.Categorical
local dir = (arg and arg[0] or ''):match('^(.*/)') or './'
local CartPole = dofile(dir .. 'cartpole.lua')
local episodes = tonumber(arg and arg[1]) or 20
local gamma, log_interval = 0.99, 10

local env = CartPole.new(543)
torch.manual_seed(543)

-- implements both actor and critic in one model
local Policy, parent = torch.class('Policy', 'nn.Module')
function Policy:__init()
  parent.__init(self)
  self.affine1 = nn.Linear(4, 128)
  -- actor's layer
  self.action_head = nn.Linear(128, 2)
  -- critic's layer
  self.value_head = nn.Linear(128, 1)
  -- action & reward buffer
  self.saved_actions = {}
  self.rewards = {}
end
function Policy:forward(x)
  x = F.relu(self.affine1(x))
  -- actor: choses action to take from state s_t by returning probability of each action
  local action_prob = F.softmax(self.action_head(x), -1)
  -- critic: evaluates being in the state s_t
  local state_values = self.value_head(x)
  return action_prob, state_values
end

local model = Policy()
local optimizer = optim.Adam(model:parameters(), { lr = 3e-2 })
local eps = torch.finfo(torch.float32).eps

local function select_action(state)
  state = torch.tensor(state):float()
  local probs, state_value = model(state)
  -- create a categorical distribution over the list of probabilities of actions
  local m = Categorical(probs)
  -- and sample an action using the distribution
  local action = m:sample()
  -- save to action buffer
  table.insert(model.saved_actions, { log_prob = m:log_prob(action), value = state_value })
  -- the action to take (left or right)
  return action:item()
end

-- Training code. Calculates actor and critic loss and performs backprop.
local function finish_episode()
  local R = 0
  local saved_actions = model.saved_actions
  local policy_losses, value_losses, returns = {}, {}, {}
  -- calculate the true value using rewards returned from the environment
  for i = #model.rewards, 1, -1 do
    R = model.rewards[i] + gamma * R
    table.insert(returns, 1, R)
  end
  returns = torch.tensor(returns)
  returns = (returns - returns:mean()) / (returns:std() + eps)
  for i, sa in ipairs(saved_actions) do
    local Ri = returns[i]
    local advantage = Ri - sa.value:item()
    -- calculate actor (policy) loss
    policy_losses[#policy_losses + 1] = -sa.log_prob * advantage
    -- calculate critic (value) loss using L1 smooth loss
    value_losses[#value_losses + 1] = F.smooth_l1_loss(sa.value, torch.tensor({ Ri }))
  end
  optimizer:zero_grad()
  -- sum up all the values of policy_losses and value_losses
  local loss = torch.stack(policy_losses):sum() + torch.stack(value_losses):sum()
  loss:backward()
  optimizer:step()
  model.rewards, model.saved_actions = {}, {}
end

local running_reward = 10
for i_episode = 1, episodes do
  local state, ep_reward = env:reset(), 0
  for _ = 1, 9999 do
    local action = select_action(state)
    local reward, done, truncated
    state, reward, done, truncated = env:step(action)
    table.insert(model.rewards, reward)
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
