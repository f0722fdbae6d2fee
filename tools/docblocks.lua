-- tools/docblocks.lua PAGE.md: runs every ```lua block of a page, in order, as a reader
-- types them into the REPL: statement by statement in one environment per page, so what a
-- block defines (locals included: a top-level `local` is kept, as the REPL keeps it) is
-- there for the next, and a line that is an expression (`t:sum()  --> tensor(6.)`) is
-- evaluated.  A line whose comment says `--> error` must raise.  A block that needs
-- several processes (init_process_group) is reported as "skip".  Prints "ok PAGE:N",
-- "skip PAGE:N: why" or "FAIL PAGE:N: message" per block; exits 1 if any failed.
--
-- `lua5.4 tools/docblocks.lua --stock PAGE.md` runs, in the stock interpreter, only the
-- blocks that the page says run there: a line `<!-- this page runs in stock lua5.4 -->`
-- marks the whole page, `<!-- runs in stock lua5.4 -->` just before a block that block;
-- `... lua5.4 after require: torch, nn -->` first requires those modules into globals of
-- the same names (as the page's prose tells a reader to).
local stock = arg[1] == '--stock'
local page = assert(arg[stock and 2 or 1], 'usage: dplua tools/docblocks.lua [--stock] PAGE.md')
local f = assert(io.open(page))
local text = f:read('a')
f:close()

local env = setmetatable({}, { __index = _G })
local failed = 0

-- the modules a marker asks for, or nil when s holds none
local function marker(s, whole_page)
  local rest = s:match('<!%-%- ' .. (whole_page and 'this page runs' or 'runs') .. ' in stock lua5%.4(.-)%-%->')
  if not rest then return nil end
  local mods = {}
  for m in (rest:match('after require:(.*)') or ''):gmatch('[%w_%.]+') do mods[#mods + 1] = m end
  return mods
end
local page_mods = marker(text, true)
local ready = {}
local function prepare(mods)
  for _, m in ipairs(mods or {}) do
    -- in the real globals (env reads them), as a script's `torch = require 'torch'` puts
    -- them, so DataLoader workers find them too
    if not ready[m] then rawset(_G, m, require(m)); ready[m] = true end
  end
end

local function run_lines(src)
  local buf = ''
  for line in (src .. '\n'):gmatch('(.-)\n') do
    if buf == '' then line = line:gsub('^local%s+function%s', 'function '):gsub('^local%s+', '') end
    buf = buf == '' and line or (buf .. '\n' .. line)
    local expect_error = line:find('%-%->%s*error') ~= nil
    local chunk = load('return ' .. buf, '=doc', 't', env)
    local err
    if not chunk then chunk, err = load(buf, '=doc', 't', env) end
    if chunk then
      local ok, e = pcall(chunk)
      if expect_error and ok then return false, ('expected an error from: %s'):format(buf) end
      if not expect_error and not ok then return false, tostring(e) end
      buf = ''
    elseif not tostring(err):find('<eof>', 1, true) then
      return false, err
    end
  end
  if buf:match('%S') then return false, 'incomplete statement at the end: ' .. buf end
  return true
end

local n = 0
for before, code in text:gmatch('([^\n]*)\n```lua\n(.-)```') do
  n = n + 1
  local ok, e
  local mods = marker(before) or page_mods
  if stock and not mods then goto continue end
  if stock then prepare(mods) end
  if code:find('init_process_group', 1, true) or code:find('DistributedDataParallel', 1, true) then
    print(('skip %s:%d: needs several processes (mpirun)'):format(page, n))
    goto continue
  end
  ok, e = run_lines(code)
  if ok then print(('ok %s:%d'):format(page, n))
  else
    failed = failed + 1
    print(('FAIL %s:%d: %s'):format(page, n, (tostring(e):gsub('\n.*', ''))))
  end
  ::continue::
end
os.exit(failed == 0 and 0 or 1)
