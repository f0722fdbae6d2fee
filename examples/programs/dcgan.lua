-- pytorch/examples dcgan/main.py: a deep convolutional GAN, at 32x32 (ngf = ndf = 16) on
-- synthetic images (random coloured discs) instead of a download.
--   dplua examples/programs/dcgan.lua [iterations]
local iters = tonumber(arg and arg[1]) or 4
local nz, ngf, ndf, nc, batch_size = 16, 16, 16, 3, 16
torch.manual_seed(999)

-- custom weights initialization called on netG and netD
local function weights_init(m)
  local classname = torch.typename(m)
  if classname:find('Conv') then
    nn.init.normal_(m.weight, 0.0, 0.02)
  elseif classname:find('BatchNorm') then
    nn.init.normal_(m.weight, 1.0, 0.02)
    nn.init.zeros_(m.bias)
  end
end

local Generator, G = torch.class('Generator', 'nn.Module')
function Generator:__init()
  G.__init(self)
  self.main = nn.Sequential(
    nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, { bias = false }),
    nn.BatchNorm2d(ngf * 4),
    nn.ReLU(true),
    nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, { bias = false }),
    nn.BatchNorm2d(ngf * 2),
    nn.ReLU(true),
    nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, { bias = false }),
    nn.BatchNorm2d(ngf),
    nn.ReLU(true),
    nn.ConvTranspose2d(ngf, nc, 4, 2, 1, { bias = false }),
    nn.Tanh())
end
function Generator:forward(input) return self.main(input) end

local Discriminator, D = torch.class('Discriminator', 'nn.Module')
function Discriminator:__init()
  D.__init(self)
  self.main = nn.Sequential(
    nn.Conv2d(nc, ndf, 4, 2, 1, { bias = false }),
    nn.LeakyReLU(0.2, true),
    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, { bias = false }),
    nn.BatchNorm2d(ndf * 2),
    nn.LeakyReLU(0.2, true),
    nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, { bias = false }),
    nn.BatchNorm2d(ndf * 4),
    nn.LeakyReLU(0.2, true),
    nn.Conv2d(ndf * 4, 1, 4, 1, 0, { bias = false }),
    nn.Sigmoid())
end
function Discriminator:forward(input) return self.main(input):view(-1, 1):squeeze(2) end

local netG = Generator()
netG:apply(weights_init)
print(netG)
local netD = Discriminator()
netD:apply(weights_init)

local criterion = nn.BCELoss()
local fixed_noise = torch.randn(batch_size, nz, 1, 1)
local real_label, fake_label = 1, 0
local optimizerD = optim.Adam(netD:parameters(), { lr = 0.0002, betas = { 0.5, 0.999 } })
local optimizerG = optim.Adam(netG:parameters(), { lr = 0.0002, betas = { 0.5, 0.999 } })

local function real_batch(n)
  local yy, xx = torch.meshgrid(torch.linspace(-1, 1, 32), torch.linspace(-1, 1, 32), { indexing = 'ij' })
  local c = torch.rand(n, 2, 1, 1) - 0.5
  local r = (yy - c[{ {}, { 1 } }]) ^ 2 + (xx - c[{ {}, { 2 } }]) ^ 2
  local disc = r:lt(0.25):float()                                   -- [n, 1, 32, 32]
  return (disc * (torch.rand(n, nc, 1, 1) * 2 - 1)):clamp(-1, 1)
end

for i = 1, iters do
  -- (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
  netD:zero_grad()
  local real_cpu = real_batch(batch_size)
  local label = torch.full({ batch_size }, real_label, { dtype = real_cpu.dtype })
  local output = netD(real_cpu)
  local errD_real = criterion(output, label)
  errD_real:backward()
  local D_x = output:mean():item()

  local noise = torch.randn(batch_size, nz, 1, 1)
  local fake = netG(noise)
  label:fill_(fake_label)
  output = netD(fake:detach())
  local errD_fake = criterion(output, label)
  errD_fake:backward()
  local D_G_z1 = output:mean():item()
  local errD = errD_real + errD_fake
  optimizerD:step()

  -- (2) Update G network: maximize log(D(G(z)))
  netG:zero_grad()
  label:fill_(real_label)
  output = netD(fake)
  local errG = criterion(output, label)
  errG:backward()
  local D_G_z2 = output:mean():item()
  optimizerG:step()

  print(('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f')
    :format(1, 1, i, iters, errD:item(), errG:item(), D_x, D_G_z1, D_G_z2))
end
local fake = torch.no_grad(function() return netG(fixed_noise) end)
print(fake:size())
