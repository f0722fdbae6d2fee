-- gym's CartPole-v1 in plain Lua (the same physics, reward 1 per step, the episode ends
-- when the pole falls past 12 degrees, the cart leaves [-2.4, 2.4] or after 500 steps), for
-- the reinforcement learning examples.  reset() and step(action) return the state as a
-- table of four numbers; actions are 1 (push left) and 2 (push right).
local CartPole = {}
CartPole.__index = CartPole
CartPole.reward_threshold = 475

function CartPole.new(seed)
  local self = setmetatable({}, CartPole)
  math.randomseed(seed or 0)
  return self
end

function CartPole:reset()
  self.s = {}
  for i = 1, 4 do self.s[i] = math.random() * 0.1 - 0.05 end
  self.t = 0
  return { table.unpack(self.s) }
end

function CartPole:step(action)
  local x, x_dot, theta, theta_dot = table.unpack(self.s)
  local gravity, masscart, masspole, length, tau = 9.8, 1.0, 0.1, 0.5, 0.02
  local total_mass, polemass_length = masscart + masspole, masspole * length
  local force = action == 2 and 10.0 or -10.0
  local costheta, sintheta = math.cos(theta), math.sin(theta)
  local temp = (force + polemass_length * theta_dot ^ 2 * sintheta) / total_mass
  local thetaacc = (gravity * sintheta - costheta * temp)
    / (length * (4.0 / 3.0 - masspole * costheta ^ 2 / total_mass))
  local xacc = temp - polemass_length * thetaacc * costheta / total_mass
  x, x_dot = x + tau * x_dot, x_dot + tau * xacc
  theta, theta_dot = theta + tau * theta_dot, theta_dot + tau * thetaacc
  self.s = { x, x_dot, theta, theta_dot }
  self.t = self.t + 1
  local done = x < -2.4 or x > 2.4 or theta < -12 * 2 * math.pi / 360 or theta > 12 * 2 * math.pi / 360
  local truncated = self.t >= 500
  return { table.unpack(self.s) }, 1.0, done, truncated
end

return CartPole
