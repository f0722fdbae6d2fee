-- torch.CmdLine: Torch7's command-line parser.
--
--   local cmd = torch.CmdLine()
--   cmd:text('Train a network'); cmd:text(); cmd:text('Options:')
--   cmd:option('-lr', 0.1, 'learning rate')
--   cmd:option('-cuda', false, 'run on the GPU')
--   local opt = cmd:parse(arg)          -- opt.lr, opt.cuda
--
-- A boolean option given on the command line flips its default (`-cuda` alone); others
-- take the next argument, converted to the default's type.  -h / --help prints the help
-- and exits.
local CmdLine = {}
CmdLine.__index = CmdLine

local function new()
  return setmetatable({ helplines = {}, options = {}, order = {}, arguments = {} }, CmdLine)
end

function CmdLine:text(txt)
  table.insert(self.helplines, txt or '')
end

function CmdLine:option(name, default, help)
  local key = type(name) == 'string' and name:match('^%-%-?([%w_%-%.]+)$')
  if not key then error(("CmdLine:option: the name must look like '-name', got %s"):format(tostring(name)), 2) end
  if self.options[key] then error(("CmdLine:option: option '%s' is defined twice"):format(name), 2) end
  self.options[key] = { default = default, help = help or '' }
  table.insert(self.order, key)
  table.insert(self.helplines, { option = key })
end

function CmdLine:argument(name, help)
  table.insert(self.arguments, { name = name, help = help or '' })
  table.insert(self.helplines, { argument = #self.arguments })
end

function CmdLine:help(program)
  local out = { ('Usage: %s [options]%s'):format(program or (arg and arg[0]) or 'script',
    #self.arguments > 0 and ' ' .. table.concat((function()
      local n = {}
      for i, a in ipairs(self.arguments) do n[i] = '<' .. a.name .. '>' end
      return n
    end)(), ' ') or '') }
  for _, line in ipairs(self.helplines) do
    if type(line) == 'string' then
      out[#out + 1] = line
    elseif line.option then
      local o = self.options[line.option]
      out[#out + 1] = ('  -%-20s %s [%s]'):format(line.option, o.help, tostring(o.default))
    else
      local a = self.arguments[line.argument]
      out[#out + 1] = ('  %-21s %s'):format(a.name, a.help)
    end
  end
  return table.concat(out, '\n')
end

local function convert(key, default, value)
  if type(default) == 'number' then
    local n = tonumber(value)
    if not n then error(("option '-%s' expects a number, got '%s'"):format(key, tostring(value)), 0) end
    return n
  end
  return value
end

-- cmd:parse(arg): a table of every option (defaults where not given) and argument
function CmdLine:parse(argv)
  argv = argv or {}
  local params, positional = {}, 0
  for key, o in pairs(self.options) do params[key] = o.default end
  local i = 1
  while argv[i] ~= nil do
    local a = argv[i]
    if a == '-h' or a == '--help' then
      print(self:help())
      os.exit(0)
    end
    local key = a:match('^%-%-?([%w_%-%.]+)$')
    if key and self.options[key] then
      local o = self.options[key]
      if type(o.default) == 'boolean' then
        params[key] = not o.default
        i = i + 1
      else
        if argv[i + 1] == nil then error(("option '%s' needs a value"):format(a), 0) end
        params[key] = convert(key, o.default, argv[i + 1])
        i = i + 2
      end
    elseif key and not tonumber(a) then
      error(("unknown option '%s' (the options are: -%s)"):format(a, table.concat(self.order, ', -')), 0)
    else
      positional = positional + 1
      local spec = self.arguments[positional]
      if not spec then error(("unexpected argument '%s'"):format(a), 0) end
      params[spec.name] = a
      i = i + 1
    end
  end
  for k = positional + 1, #self.arguments do
    error(("missing argument <%s>"):format(self.arguments[k].name), 0)
  end
  return params
end

-- cmd:string(prefix, params, ignore): 'prefix,key=value,...' of the options that differ
-- from their defaults (Torch7 names experiment folders this way)
function CmdLine:string(prefix, params, ignore)
  ignore = ignore or {}
  local parts = { prefix }
  local keys = {}
  for _, k in ipairs(self.order) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if not ignore[k] and params[k] ~= self.options[k].default then
      parts[#parts + 1] = k .. '=' .. tostring(params[k])
    end
  end
  return table.concat(parts, ',')
end

return setmetatable(CmdLine, { __call = function() return new() end })
