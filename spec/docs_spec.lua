-- Docs that run: every ```lua block of README.md and doc/*.md, page by page, through
-- tools/docblocks.lua (statements as a reader types them; `--> error` lines must raise),
-- with two CPU devices and, where it was built, the emulated GPU for the CUDA examples;
-- the pages and blocks marked as running in stock lua5.4 also run there.
local shell = dofile('spec/helpers/shell.lua')

local root = io.popen('pwd'):read('l')
local emu = shell.emulated_cuda()
local have_emu = emu ~= nil

local pages = { 'README.md' }
for f in io.popen('ls doc/*.md'):lines() do pages[#pages + 1] = f end

-- counts the ok/skip/FAIL lines of tools/docblocks.lua's output; fails on a FAIL
local function tally(out)
  local fails, skips, oks = {}, {}, 0
  for line in out:gmatch('[^\n]+') do
    if line:find('^FAIL ') then
      if not have_emu and line:find('CUDA is not available', 1, true) then
        skips[#skips + 1] = line .. ' (no emulated GPU in this build)'
      else
        fails[#fails + 1] = line
      end
    elseif line:find('^skip ') then skips[#skips + 1] = line
    elseif line:find('^ok ') then oks = oks + 1 end
  end
  assert(#fails == 0, table.concat(fails, '\n') .. '\n' .. out)
  return oks, skips
end

-- pages, or blocks, that say they run in stock lua5.4 are run there too, with the build's
-- modules on LUA_CPATH
describe('the code that the docs say runs in stock lua5.4', function()
  local build = shell.build:sub(1, 1) == '/' and shell.build or root .. '/' .. shell.build
  for _, page in ipairs(pages) do
    if shell.slurp(page):find('runs in stock lua5.4', 1, true) then
      it('runs in lua5.4: ' .. page, function()
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute('mkdir -p ' .. shell.q(dir)))
        local env = 'DPLUA_CPU_DEVICES=2'
        if have_emu then env = env .. (' DPLUA_CUDA_LIB=%s DPLUA_EMU_GPUS=2'):format(shell.q(emu)) end
        local p = io.popen(('cd %s && env %s LUA_CPATH=%s lua5.4 %s --stock %s 2>&1'):format(shell.q(dir), env,
          shell.q(build .. '/lua/?.so;;'), shell.q(root .. '/tools/docblocks.lua'), shell.q(root .. '/' .. page)))
        local out = p:read('a')
        p:close()
        os.execute('rm -rf ' .. shell.q(dir))
        local oks = tally(out)
        assert(oks > 0, 'no block ran in lua5.4:\n' .. out)
      end)
    end
  end
end)

describe('the code in the docs', function()
  for _, page in ipairs(pages) do
    it('runs: ' .. page, function()
      local env = 'DPLUA_CPU_DEVICES=2'
      if have_emu then env = env .. (' DPLUA_CUDA_LIB=%s DPLUA_EMU_GPUS=2'):format(shell.q(emu)) end
      -- in a folder of its own: the examples write files (checkpoints, plots, logs)
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute('mkdir -p ' .. shell.q(dir)))
      local bin = shell.bin:sub(1, 1) == '/' and shell.bin or root .. '/' .. shell.bin
      local p = io.popen(('cd %s && env %s %s %s %s 2>&1'):format(shell.q(dir), env, shell.q(bin),
        shell.q(root .. '/tools/docblocks.lua'), shell.q(root .. '/' .. page)))
      local out = p:read('a')
      p:close()
      os.execute('rm -rf ' .. shell.q(dir))
      local oks, skips = tally(out)
      if #skips > 0 then pending(table.concat(skips, '; ')) end
      assert(oks + #skips > 0 or not io.open(page):read('a'):find('```lua', 1, true), out)
    end)
  end
end)
