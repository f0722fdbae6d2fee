-- helpindex.lua OUT.lua PAGE.md...: the index that help() reads (module 'torch._help'),
-- built from the docs so that the two cannot drift apart.  Each documented name maps to a
-- line of usage and where it is explained: {usage, page, section}.  Names come from, in
-- this order (the first one found wins):
--   1. the first cell of a table row (`torch.rand(...)`, `torch.randn(...)` | U[0, 1), N(0, 1))
--      with the second cell as the description; a bare `ones_like` after `torch.zeros_like(t)`
--      is torch.ones_like;
--   2. signature lines in plain ``` blocks (optim.SGD(params, {lr=, ...}));
--   3. headings naming something (## nn.Module), with the line that follows;
--   4. code spans in the prose (`F.linear(x, w [, b])`); on tensor.md a bare `view(...)` or
--      a list `neg, exp, log` are Tensor methods;
--   5. calls in the ```lua examples (torch.data.DataLoader(ds, {batch_size = 30})).
-- A method documented on a receiver (`t:view(...)`, `m:parameters()`, `opt:step()`) is filed
-- under its class: Tensor:view, nn.Module:parameters, optim.Optimizer:step.  `F.` is
-- nn.functional.
local out_path = assert(arg[1], 'usage: lua tools/helpindex.lua OUT.lua PAGE.md...')

local receivers = {
  t = 'Tensor', x = 'Tensor', a = 'Tensor', y = 'Tensor', src = 'Tensor', Tensor = 'Tensor',
  m = 'nn.Module', model = 'nn.Module', module = 'nn.Module', seq = 'nn.Module',
  opt = 'optim.Optimizer', optimizer = 'optim.Optimizer',
  loader = 'torch.data.DataLoader', sched = 'optim.lr_scheduler', scheduler = 'optim.lr_scheduler',
  g = 'torch.Generator', gen = 'torch.Generator', writer = 'torch.utils.SummaryWriter',
}
-- the first word of a name that makes it worth indexing
local roots = { torch = true, nn = true, optim = true, F = true, Tensor = true, gnuplot = true }

local index, order = {}, {}

local function clean(s)
  s = s:gsub('`', ''):gsub('%*%*', ''):gsub('%[([^%]]*)%]%b()', '%1'):gsub('\\|', '|')
  return (s:gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', ''))
end

local function shorten(s, n)
  if #s <= n then return s end
  local cut = s:sub(1, n):match('^(.*)[ ,;]') or s:sub(1, n)
  return cut .. ' ...'
end

-- the documented name a code span starts with (torch.nn.functional.relu, t:view), filed
-- under its class, or nil
local function name_of(span)
  local name = span:match('^[%a_][%w_]*[%.:][%a_][%w_%.:]*') or span:match('^[%a_][%w_]*')
  if not name then return nil end
  name = name:gsub('[%.:]$', '')
  local recv, sep, rest = name:match('^([%a_][%w_]*)([%.:])(.+)$')
  if not recv then return nil, name end   -- a bare word: may continue a prefix
  if receivers[recv] then return receivers[recv] .. sep .. rest end
  if recv == 'F' then return 'nn.functional.' .. rest end
  if roots[recv] then return name end
  return nil
end

local function add(name, usage, desc, page, section)
  if not name or index[name] then return end
  usage = clean(usage)
  desc = desc and clean(desc) or ''
  if desc ~= '' then usage = usage .. ' -- ' .. desc end
  index[name] = { shorten(usage, 160), page, section }
  order[#order + 1] = name
end

-- a table row: every name in the first cell, described by the second
local function row(line, page, section)
  local cells = {}
  for cell in (line:gsub('\\|', '\1') .. '|'):gmatch('([^|]*)|') do cells[#cells + 1] = cell:gsub('\1', '|') end
  local first, desc = cells[2], cells[3]
  if not first or not desc then return end
  local prefix
  for span in first:gmatch('`([^`]+)`') do
    local name, bare = name_of(span)
    local usage = span
    if name then
      prefix = span:match('^([%w_%.:]*[%.:])')
    elseif bare and prefix and span:match('^[%a_][%w_]*%f[^%w_]') then
      name = name_of(prefix .. span)
      usage = prefix .. span
    end
    add(name, usage, desc, page, section)
  end
end

local pages = {}
for i = 2, #arg do
  local path = arg[i]
  local f = assert(io.open(path))
  pages[#pages + 1] = { path = path:match('doc/.*$') or path, text = f:read('a') }
  f:close()
end
-- where a name is explained for users comes before where the internals mention it
table.sort(pages, function(a, b)
  local ia, ib = a.path:find('internals') ~= nil, b.path:find('internals') ~= nil
  if ia ~= ib then return ib end
  return a.path < b.path
end)

-- the lines of a page with the section each is in, code blocks marked
local function walk(page, fn)
  local section, fence = page.path, nil
  for line in (page.text .. '\n'):gmatch('(.-)\n') do
    local mark = line:match('^```(%w*)')
    if mark then
      fence = not fence and mark or nil
    elseif fence then
      fn('code:' .. fence, line, section)
    else
      local h = line:match('^#+%s+(.-)%s*$')
      if h then section = clean(h); fn('heading', line, section) else fn('text', line, section) end
    end
  end
end

for _, page in ipairs(pages) do
  walk(page, function(kind, line, section)
    if kind == 'text' and line:match('^|%s*`') then row(line, page.path, section) end
  end)
end
for _, page in ipairs(pages) do
  walk(page, function(kind, line, section)
    if kind == 'code:' then
      local sig = line:match('^%s*([%a_][%w_%.:]*%b().*)$')
      if sig then add((name_of(sig)), sig, nil, page.path, section) end
    end
  end)
end
for _, page in ipairs(pages) do
  local heading_for
  walk(page, function(kind, line, section)
    if kind == 'heading' then
      local h = clean(line:match('^#+%s+(.-)%s*$'))
      heading_for = h:match('^[%w_%.:]+%s*$') and name_of(h:match('^[%w_%.:]+')) or nil
    elseif kind == 'text' and heading_for and line:match('%S') and not line:match('^|') then
      add(heading_for, heading_for, line, page.path, section)
      heading_for = nil
    end
  end)
end
local tensor_page = 'doc/tensor.md'
for _, with_args in ipairs({ true, false }) do   -- `F.linear(x, w)` before a bare `F.linear`
  for _, page in ipairs(pages) do
  walk(page, function(kind, line, section)
    if kind ~= 'text' or line:match('^|') then return end
    for span in line:gmatch('`([^`]+)`') do
      local name = name_of(span)
      if (span:find('(', 1, true) ~= nil) ~= with_args then
        -- the other pass
      elseif name and name:match('[%.:]') then
        add(name, span, nil, page.path, section)
      elseif page.path == tensor_page and span:match('^[%a_][%w_]*%b()') then
        local m = span:match('^[%a_][%w_]*')
        add('Tensor:' .. m, 't:' .. span, nil, page.path, section)
      elseif page.path == tensor_page and span:match('^[%a_][%w_]*,[%w_, ]+$') then
        for m in span:gmatch('[%a_][%w_]*') do add('Tensor:' .. m, 't:' .. m .. '(...)', nil, page.path, section) end
      end
    end
  end)
  end
end

for _, page in ipairs(pages) do
  walk(page, function(kind, line, section)
    if kind ~= 'code:lua' then return end
    for call in line:gmatch('[%a_][%w_]*[%.:][%w_%.:]*%b()') do
      local name = name_of(call)
      if name and name:match('[%.:]') and not name:match('^Tensor') then add(name, call, nil, page.path, section) end
    end
  end)
end

table.sort(order)
local out = assert(io.open(out_path, 'w'))
out:write('-- generated by tools/helpindex.lua from the docs: do not edit\nreturn {\n')
for _, name in ipairs(order) do
  local e = index[name]
  out:write(('  [%q] = {%q, %q, %q},\n'):format(name, e[1], e[2], e[3]))
end
out:write('}\n')
out:close()
