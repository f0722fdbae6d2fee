-- tools/docblocks.lua PAGE.md: runs every ```lua block of a page, in order, as a reader
-- types them into the REPL: statement by statement in one environment per page, so what a
-- block defines (locals included: a top-level `local` is kept, as the REPL keeps it) is
-- there for the next, and a line that is an expression (`t:sum()  --> tensor(6.)`) is
-- evaluated.  A line whose comment says `--> error` must raise.  A block that needs
-- several processes (init_process_group) is reported as "skip".  Prints "ok PAGE:N",
-- "skip PAGE:N: why" or "FAIL PAGE:N: message" per block; exits 1 if any failed.
local page = assert(arg[1], 'usage: dplua tools/docblocks.lua PAGE.md')
local f = assert(io.open(page))
local text = f:read('a')
f:close()

local env = setmetatable({}, { __index = _G })
local failed = 0

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
for code in text:gmatch('```lua\n(.-)```') do
  n = n + 1
  local ok, e
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
