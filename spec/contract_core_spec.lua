-- contract_core_spec.lua: SPEC sections 1-4 and 9 clauses that the other specs leave out:
-- installing and linking, stock lua5.4, devices, dtype promotion, printing, memory that
-- must not grow, error positions, autograd node names and the embedding API.  Expected
-- values are hand-computed or were printed by PyTorch 1.13.
local torch = require 'torch'
local shell = dofile('spec/helpers/shell.lua')
local check = dofile('spec/helpers/check.lua')
local D = dofile('spec/helpers/device.lua')
local build, BIN, q = shell.build, shell.bin, shell.q
local err, assert_contains = check.err, check.assert_contains
local slurp, write, run = shell.slurp, shell.write, shell.run

local function script(src)
  local p = os.tmpname() .. '.lua'
  return write(p, src)
end

-- Under the sanitizer build (ASAN=1) the runtime is preloaded into every child, which
-- breaks compilers and make: the install and C-host checks run in the normal build.
local sanitized = os.getenv('ASAN') == '1'

describe('make install and linking (SPEC 1, 9)', function()
  if sanitized then pending('make install and C hosts are checked in the normal build, not under ASAN=1') return end
  local prefix
  setup(function()
    prefix = os.tmpname()
    os.remove(prefix)
    local _, e, code = run(('make -s BUILD=%s install PREFIX=%s'):format(q(build), q(prefix)))
    assert.are.equal(0, code, e)
  end)
  teardown(function()
    if prefix then os.execute('rm -rf ' .. q(prefix)) end
  end)

  it('installs dplua, dplua.h, libdplua.a, libdplua.so and dplua.pc', function()
    for _, f in ipairs({ '/bin/dplua', '/include/dplua.h', '/lib/libdplua.a', '/lib/libdplua.so',
                         '/lib/pkgconfig/dplua.pc' }) do
      assert.is_truthy(io.open(prefix .. f), f .. ' missing')
    end
  end)

  it('lets stock lua5.4 require every module, the same tables as torch.*', function()
    local env = ('LUA_CPATH=%s LUA_PATH=%s'):format(q(prefix .. '/lib/lua/5.4/?.so;;'),
      q(prefix .. '/share/lua/5.4/?.lua;;'))
    local out, e, code = run(env .. " lua5.4 -e " .. q([[
      local torch = require 'torch'
      local nn, optim = require 'nn', require 'optim'
      local data, dist = require 'torch.data', require 'torch.distributed'
      print(torch.nn == nn, torch.optim == optim, torch.data == data, torch.distributed == dist)
      print(nn.Linear(2, 3))
      print(torch.ones(2) * 2)]]))
    assert.are.equal(0, code, e)
    assert.are.equal('true\ttrue\ttrue\ttrue\nLinear(in_features=2, out_features=3, bias=true)\ntensor([2., 2.])\n', out)
  end)

  it('compiles and runs a C host with pkg-config', function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute('mkdir -p ' .. q(dir))
    write(dir .. '/h.c', [[
#include <dplua.h>
#include <lauxlib.h>
#include <stdio.h>
int main(void) {
  lua_State *L = dplua_newstate();
  if (luaL_dostring(L, "return torch.ones(2, 3) * 2 + 1")) { printf("error %s\n", lua_tostring(L, -1)); return 1; }
  dplua_tensor *t = dplua_checktensor(L, -1);
  float out[6];
  int rc = dplua_tensor_to_host(t, out, 6);
  printf("%d %g\n", rc, out[5]);
  printf("%d\n", dplua_tensor_to_host(t, out, 5) != 0 && dplua_last_error() != NULL);
  int64_t sz[2] = { 2, 2 };
  float d[4] = { 1, 2, 3, 4 };
  dplua_tensor *h = dplua_tensor_from_host(d, 2, sz);
  d[0] = 100;                                   /* copied: the tensor keeps 1 */
  dplua_pushtensor(L, h);
  dplua_tensor_release(h);
  lua_setglobal(L, "h");
  luaL_dostring(L, "return tostring(h:sum():item())");
  printf("%s\n", lua_tostring(L, -1));
  if (luaL_dostring(L, "return torch.ones(2) + torch.ones(3)")) printf("lua error ok\n");
  lua_close(L);
  return 0;
}
]])
    local pc = ('PKG_CONFIG_PATH=%s'):format(q(prefix .. '/lib/pkgconfig'))
    local _, e, code = run(('cc %s -o %s $(%s pkg-config --cflags --libs dplua)'):format(
      q(dir .. '/h.c'), q(dir .. '/h'), pc))
    assert.are.equal(0, code, e)
    local out, e2, code2 = run(('LD_LIBRARY_PATH=%s %s'):format(q(prefix .. '/lib'), q(dir .. '/h')))
    os.execute('rm -rf ' .. q(dir))
    assert.are.equal(0, code2, e2)
    assert.are.equal('0 3\n1\n10.0\nlua error ok\n', out)
    assert.are.equal('', e2)    -- the library prints nothing on its own
  end)

  it('make env prints paths that let lua5.4 require torch', function()
    local out, e, code = run(('make -s BUILD=%s env'):format(q(build)))
    assert.are.equal(0, code, e)
    local o2, e2, c2 = run(out:gsub('\n', '; ') .. " lua5.4 -e " .. q("print(require('torch').zeros(1))"))
    assert.are.equal(0, c2, e2)
    assert.are.equal('tensor([0.])\n', o2)
  end)
end)

describe('luaopen_dplua (SPEC 9)', function()
  if sanitized then pending('C hosts are checked in the normal build, not under ASAN=1') return end
  it('registers torch, nn, optim, torch.data, torch.distributed in package.loaded', function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute('mkdir -p ' .. q(dir))
    write(dir .. '/o.c', [[
#include <dplua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "dplua", luaopen_dplua, 0);
  lua_pop(L, 1);
  luaL_dostring(L, "local l = package.loaded; return tostring(l.torch ~= nil) .. tostring(l.nn ~= nil) .. "
                   "tostring(l.optim ~= nil) .. tostring(l['torch.data'] ~= nil) .. tostring(l['torch.distributed'] ~= nil)");
  printf("%s\n", lua_tostring(L, -1));
  lua_close(L);
  return 0;
}
]])
    local _, e, code = run(('cc -I lua $(pkg-config --cflags lua5.4) %s -o %s %s/libdplua.a -llua5.4 -lreadline -lopenblas ' ..
      '-L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi -lgomp -lpthread -ldl -lm'):format(q(dir .. '/o.c'), q(dir .. '/o'), q(build)))
    assert.are.equal(0, code, e)
    local out = run(q(dir .. '/o'))
    os.execute('rm -rf ' .. q(dir))
    assert.are.equal('truetruetruetruetrue\n', out)
  end)
end)

describe('devices (SPEC 2)', function()
  it('has numeric indices and prints cpu for cpu:0', function()
    local d = torch.device('cpu')
    assert.are.equal('cpu', d.type)
    assert.are.equal(0, d.index)
    assert.are.equal('integer', math.type(d.index))
    assert.are.equal('cpu', tostring(torch.device('cpu:0')))
    assert.are.equal('cuda:1', tostring(torch.device('cuda', 1)))
    assert.are.equal(torch.device('cuda:0'), torch.device(0))
    assert.are_not.equal(torch.device('cpu'), torch.device('cuda:0'))
  end)

  it('names both devices for cat, mm and a backward gradient on another device', function()
    local out, e, code = run('DPLUA_CPU_DEVICES=2 ' .. q(BIN) .. ' -e ' .. q([[
      local a, b = torch.ones(2, 2), torch.ones(2, 2, { device = 'cpu:1' })
      for _, f in ipairs({ function() return torch.cat({ a, b }) end, function() return a:mm(b) end,
                           function() local y = torch.ones(2, { requires_grad = true }) * 2
                                      y:backward(torch.ones(2, { device = 'cpu:1' })) end }) do
        local ok, m = pcall(f)
        print(ok, (tostring(m):gsub('^[^:]*:%d+: ', '')))
      end]]))
    assert.are.equal(0, code, e)
    local line = 'false\texpected all tensors to be on the same device, but found at least two devices, cpu and cpu:1\n'
    assert.are.equal(line:rep(3), out)
  end)

  it('raises CUDA is not available when a module or an option table names cuda', function()
    if torch.cuda.is_available() then return pending('a GPU is present') end
    local nn = require 'nn'
    assert_contains(err(function() return nn.Linear(2, 2):cuda() end), 'CUDA is not available')
    assert_contains(err(function() return torch.ones(1):to({ device = 'cuda:1' }) end), 'CUDA is not available')
    assert_contains(err(function() return torch.ones(1):cuda(1) end), 'CUDA is not available')
    assert.are.equal(0, torch.cuda.device_count())
  end)
end)

describe('dtype rules (SPEC 3, as PyTorch)', function()
  it('bool + bool and bool * bool stay bool', function()
    -- PyTorch 1.13: tensor([True]) and tensor([ True, False])
    assert.are.equal(D.printed('tensor([True])'), tostring(torch.tensor({ true }) + torch.tensor({ true })))
    assert.are.equal(D.printed('tensor([ True, False])'), tostring(torch.tensor({ true, false }) * torch.tensor({ true, true })))
  end)

  it('infers from nested tables at every depth', function()
    assert.are.equal('float32', torch.tensor({ { { 1 } }, { { 2.5 } } }).dtype)
    assert.are.equal('int64', torch.tensor({ { { 1 } }, { { 2 } } }).dtype)
    assert.are.equal('bool', torch.tensor({ { true }, { false } }).dtype)
    assert.are.equal('int64', torch.tensor({ true, 1 }).dtype)       -- torch.tensor([True, 1])
    assert.are.equal('float32', torch.tensor({ true, 1.5 }).dtype)
    assert.are.equal('bool', torch.full({ 2 }, true).dtype)
    assert.are.equal('float32', torch.arange(1, 2.5).dtype)
  end)

  it('int64 / int64 is float32, int64 ^ 2 stays int64', function()
    local i = torch.tensor({ 1, 2 })
    assert.are.equal(D.printed('tensor([0.5000, 1.0000])'), tostring(i / 2))
    assert.are.equal(D.printed('tensor([1, 4])'), tostring(i ^ 2))
    assert.are.equal(D.printed('tensor([2, 4])'), tostring(2 ^ i))
    assert.are.equal(D.printed('tensor(3)'), tostring(i:sum()))
    assert.are.equal(D.printed('tensor(2)'), tostring(torch.tensor({ true, true, false }):sum()))
  end)
end)

describe('printing (SPEC 3) against PyTorch 1.13', function()
  local cases = {
    { function() return torch.arange(-5, 5) end, 'tensor([-5, -4, -3, -2, -1,  0,  1,  2,  3,  4])' },
    { function() return torch.tensor({ 1000.5, 2.25, -3.125 }) end, 'tensor([1000.5000,    2.2500,   -3.1250])' },
    { function() return torch.tensor({ 123456.0, 0.001 }) end, 'tensor([1.2346e+05, 1.0000e-03])' },
    { function() return torch.tensor({ { 1e20 } }, { dtype = 'float64' }) end, 'tensor([[1.0000e+20]], dtype=float64)' },
    { function() return torch.tensor({ -1.0, 100.0 }) end, 'tensor([ -1., 100.])' },
    { function() return torch.tensor({ 12345678901234, -1 }) end, 'tensor([12345678901234,             -1])' },
    { function() return torch.tensor(1e-5) end, 'tensor(1.0000e-05)' },
    { function() return torch.zeros(3, 0, 2) end, 'tensor([], size=(3, 0, 2))' },
    { function() return torch.tensor({ { true, false }, { false, true } }) end, 'tensor([[ True, False],\n        [False,  True]])' },
    { function() return torch.arange(1, 7):view(2, 3):float() * 1e6 end,
      'tensor([[1000000., 2000000., 3000000.],\n        [4000000., 5000000., 6000000.]])' },
    { function() return torch.tensor({ 0 / 0, 1e10 }) end, 'tensor([       nan, 1.0000e+10])' },
    { function() return torch.ones(1001) * 0.5 end, 'tensor([0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000])' },
    { function() return torch.arange(3000):view(3, 1000):gt(1500) end,
      'tensor([[False, False, False,  ..., False, False, False],\n' ..
      '        [False, False, False,  ...,  True,  True,  True],\n' ..
      '        [ True,  True,  True,  ...,  True,  True,  True]])' },
    { function() return torch.tensor({ 1.0, 2.0 }, { dtype = 'float64', requires_grad = true }) end,
      'tensor([1., 2.], dtype=float64, requires_grad=true)' },
  }
  for i, case in ipairs(cases) do
    it('case ' .. i, function() assert.are.equal(D.printed(case[2]), tostring(case[1]())) end)
  end

  it('summarises a large 3-d tensor with ... between blocks', function()
    local s = tostring(torch.arange(8000):view(20, 20, 20):float())
    assert.is_truthy(s:find('\n\n        ...,\n\n', 1, true), s)
    local first = 'tensor([[[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.7000e+01,\n'
    assert.are.equal(first, s:sub(1, #first))
  end)

  it('names addmm as AddmmBackward0, as PyTorch prints it', function()
    local w = torch.ones(2, 2, { requires_grad = true })
    assert.are.equal('<AddmmBackward0>', tostring(torch.addmm(torch.zeros(2, 2), torch.ones(2, 2), w).grad_fn))
    assert.are.equal('<AddmmBackward0>', tostring(torch.zeros(2, 2):addmm(torch.ones(2, 2), w).grad_fn))
  end)
end)

describe('indexing and options (SPEC 3)', function()
  it('names index, dimension and size for index_select out of range', function()
    -- (tolist: a GPU checks the index there and reports it at the next synchronisation)
    local e = err(function() return torch.arange(10, 15):index_select(1, torch.tensor({ 6 })):tolist() end)
    assert_contains(e, '6')
    assert_contains(e, 'dimension 1')
    assert_contains(e, 'size 5')
  end)

  it('assigns a broadcast tensor and a float to a slice, negative from the end', function()
    local x = torch.zeros(2, 3)
    x[-1] = torch.tensor({ 5.0 })
    x[1] = 1.5
    assert.are.same({ { 1.5, 1.5, 1.5 }, { 5, 5, 5 } }, x:tolist())
    assert_contains(err(function() x[3] = 1 end), 'index 3 is out of range for dimension 1 with size 2')
  end)

  it('rejects an unknown option to to{}', function()
    assert_contains(err(function() return torch.ones(2):to({ devise = 'cpu' }) end), 'devise')
  end)

  it('returns the very same object from to() when nothing changes', function()
    local t = torch.zeros(2)
    assert.is_true(rawequal(t, t:to({ device = D.name, dtype = 'float32', non_blocking = true })))
    assert.is_true(rawequal(t, t:to(D.name == 'cpu' and torch.device('cpu', 0) or torch.device(D.name))))
    assert.is_false(rawequal(t, t:double()))
    assert.are.equal('float32', t.dtype)
  end)
end)

describe('torch.Timer and manual_seed (SPEC 3)', function()
  it('reset starts the clock again', function()
    local tm = torch.Timer()
    local t0 = os.clock()
    while os.clock() - t0 < 0.05 do end
    assert.is_true(tm:time().real >= 0.04)
    tm:reset()
    assert.is_true(tm:time().real < 0.01)
  end)

  it('repeats initialisation, dropout, shuffling and draws from run to run', function()
    local src = script([[
      torch.manual_seed(7)
      local l = nn.Linear(3, 2)
      local d = nn.Dropout(0.5)
      d:train()
      local dl = torch.data.DataLoader(torch.data.TensorDataset(torch.arange(10)), { batch_size = 10, shuffle = true })
      local b
      for x in dl:iter() do b = x end
      print(l.weight:sum():item(), d(torch.ones(8)):sum():item(), table.concat(b:tolist(), ','),
            torch.rand(1):item(), torch.randint(0, 100, { 3 }):sum():item())]])
    local o1, e1, c1 = run(q(BIN) .. ' ' .. q(src))
    local o2 = run(q(BIN) .. ' ' .. q(src))
    os.remove(src)
    assert.are.equal(0, c1, e1)
    assert.are.equal(o1, o2)
  end)
end)

describe('dplua FILE error format (SPEC 1)', function()
  it('puts FILE:LINE before a torch.tensor error', function()
    local src = script('local x = 1\nlocal t = torch.tensor({{1, 2}, {3}})\n')
    local _, e, code = run(q(BIN) .. ' ' .. q(src))
    os.remove(src)
    assert.are.equal(1, code)
    assert.are.equal('dplua: ' .. src .. ':2: ', e:sub(1, #src + 11))
    assert_contains(e, 'stack traceback:')
  end)
end)

describe('memory (SPEC 3)', function()
  local function peak_kb(src, runner)
    local p = script(src .. [[

      for l in io.lines('/proc/self/status') do
        local kb = l:match('^VmHWM:%s*(%d+)')
        if kb then print(kb) end
      end]])
    local out, e, code = run(runner .. ' ' .. q(p))
    os.remove(p)
    assert.are.equal(0, code, e)
    return tonumber(out:match('(%d+)'))
  end

  it('does not grow in a loop that drops 16 MB tensors of varying sizes', function()
    -- each tensor holds about 16 MB; only one is alive at a time
    local kb = peak_kb('for i = 1, 200 do local t = torch.ones(4 * 1024 * 1024 + i * 1024) end', q(BIN))
    assert.is_true(kb < 300 * 1024, ('peak %d MB'):format(kb // 1024))
  end)

  it('stays under 1 GB for 5000 dropped 4 MB tensors in stock lua5.4', function()
    local kb = peak_kb('local torch = require "torch"\nfor i = 1, 5000 do local t = torch.ones(1024 * 1024); local u = t + 1 end',
      ('LUA_CPATH=%s lua5.4'):format(q(build .. '/lua/?.so;;')))
    assert.is_true(kb < 1024 * 1024, ('peak %d MB'):format(kb // 1024))
  end)
end)
