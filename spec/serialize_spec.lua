-- serialize: torch.save / torch.load (safetensors) and torch.save_npy / torch.load_npy,
-- checked against NumPy (files dplua writes load in NumPy with equal values, files NumPy
-- and a plain safetensors writer make load in dplua), and the parsers' handling of
-- truncated, lying and foreign files (each one an error naming the file, never a crash).
local torch = require 'torch'

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or 'spec'
local PYTHON = '/usr/bin/python3'

local expect_error = dofile('spec/helpers/check.lua').expect_error

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute('mkdir -p ' .. d))
  return d
end

local function rmdir(d) os.execute('rm -rf ' .. d) end

local function read_file(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('a')
  f:close()
  return s
end

local function write_file(path, s)
  os.remove(path)   -- (much faster than truncating an existing file on some file systems)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
end

local function listdir(d)
  local p = io.popen('ls -A ' .. d)
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  table.sort(out)
  return out
end

local function have_numpy()
  local p = io.popen(PYTHON .. ' -c "import numpy; print(1)" 2>/dev/null')
  local ok = p and p:read('l') == '1'
  if p then p:close() end
  return ok
end

local function shape_of(t)
  local s = {}
  for d = 1, t:dim() do s[d] = t:size(d) end
  return s
end

local function flat(t)
  if t:numel() == 0 then return {} end
  return t:reshape(-1):tolist()
end

-- The reference tensors of spec/fixtures/data_files.py, built in dplua.
local function reference()
  local f32 = (torch.arange(0, 12, { dtype = 'float64' }) * 0.5 - 3):float():reshape(3, 4)
  local i64 = {}
  for i = 0, 4 do i64[#i64 + 1] = (1 << 40) + i * i - 5 end
  return {
    f32 = f32,
    f64 = (torch.arange(0, 12, { dtype = 'float64' }) / 7):reshape(2, 3, 2),
    i64 = torch.tensor(i64, { dtype = 'int64' }),
    b = torch.tensor({ true, false, false, true, false, false, true, false }):reshape(2, 4),
    scalar = torch.tensor(3.25),
    empty = torch.zeros(0, 3),
    tr = f32:t(),   -- not contiguous: written in row-major order of the view
  }
end

local function assert_same(name, t, exp)
  assert(torch.is_tensor(t), name .. ': not a tensor')
  assert.are.equal(exp.dtype, t.dtype, name .. ': dtype')
  assert.are.same(exp.shape, shape_of(t), name .. ': shape')
  assert.are.same(exp.values, flat(t), name .. ': values')
end

local function describe_tensor(t)
  return { dtype = t.dtype, shape = shape_of(t), values = flat(t) }
end

describe('torch.save and torch.load (safetensors)', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmdir(dir) end)

  it('round-trips every dtype, 0-d, empty and non-contiguous tensors', function()
    local ref = reference()
    local path = dir .. '/all.safetensors'
    torch.save(path, ref)
    local back = torch.load(path)
    local n = 0
    for name, t in pairs(ref) do
      assert_same(name, back[name], describe_tensor(t:contiguous()))
      assert.is_false(back[name].is_cuda)
      n = n + 1
    end
    local m = 0
    for _ in pairs(back) do m = m + 1 end
    assert.are.equal(n, m)
  end)

  it('writes the safetensors layout: u64 header length, JSON header padded to 8 bytes, data', function()
    local path = dir .. '/w.safetensors'
    torch.save(path, { w = torch.tensor({ { 1.5, -2 } }), n = torch.tensor({ 7 }, { dtype = 'int64' }) })
    local s = read_file(path)
    local hlen = string.unpack('<I8', s)
    assert.are.equal(0, hlen % 8)
    assert.are.equal(8 + hlen + 8 + 8, #s)
    local header = s:sub(9, 8 + hlen)
    assert.truthy(header:find('"w":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]}', 1, true), header)
    assert.truthy(header:find('"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}', 1, true), header)
    assert.are.equal(7, string.unpack('<i8', s, 9 + hlen))
    assert.are.equal(1.5, string.unpack('<f', s, 17 + hlen))
    assert.are.equal(-2.0, string.unpack('<f', s, 21 + hlen))
  end)

  it('keeps metadata, and reports none for a file without it', function()
    local path = dir .. '/m.safetensors'
    torch.save(path, { x = torch.ones(2) }, { format = 'pt', note = 'a "quoted" \\ value' })
    local t, meta = torch.load(path)
    assert.are.same({ format = 'pt', note = 'a "quoted" \\ value' }, meta)
    assert.are.same({ 1.0, 1.0 }, t.x:tolist())
    torch.save(path, { x = torch.ones(2) })
    local _, none = torch.load(path)
    assert.is_nil(none)
  end)

  it('saves an empty table and names with JSON escapes and UTF-8', function()
    local path = dir .. '/e.safetensors'
    torch.save(path, {})
    assert.are.same({}, torch.load(path))
    local names = { ['a"b\\c'] = torch.ones(1), ['\tt\n'] = torch.zeros(1), ['été.weight'] = torch.ones(2) }
    torch.save(path, names)
    local back = torch.load(path)
    for k, v in pairs(names) do assert.are.same(v:tolist(), back[k]:tolist()) end
  end)

  it('accepts PyTorch\'s argument order', function()
    local path = dir .. '/o.safetensors'
    torch.save({ a = torch.ones(3) }, path)
    assert.are.same({ 1.0, 1.0, 1.0 }, torch.load(path).a:tolist())
  end)

  it('round-trips a module\'s state_dict', function()
    local ok, nn = pcall(require, 'nn')
    if not ok or not nn.Linear then
      pending('nn is not available')
      return
    end
    torch.manual_seed(3)
    local model = nn.Sequential(nn.Linear(5, 3), nn.ReLU(), nn.Linear(3, 2))
    local path = dir .. '/model.safetensors'
    torch.save(path, model:state_dict())
    local sd = torch.load(path)
    local other = nn.Sequential(nn.Linear(5, 3), nn.ReLU(), nn.Linear(3, 2))
    other:load_state_dict(sd)
    for name, t in pairs(model:state_dict()) do
      assert.is_true(torch.equal(t, other:state_dict()[name]), name)
    end
    local x = torch.randn(4, 5)
    assert.is_true(torch.equal(model(x), other(x)))
  end)

  it('writes through a temporary file: no stray files, and a failed save leaves the old file', function()
    local path = dir .. '/keep.safetensors'
    torch.save(path, { a = torch.ones(2) })
    torch.save(path, { a = torch.zeros(3) })   -- replaces
    assert.are.same({ 'keep.safetensors' }, listdir(dir))
    assert.are.same({ 0.0, 0.0, 0.0 }, torch.load(path).a:tolist())
    expect_error(function() torch.save(path, { a = torch.ones(2), b = print }) end, "'b'", 'is a function')
    assert.are.same({ 'keep.safetensors' }, listdir(dir))
    assert.are.same({ 0.0, 0.0, 0.0 }, torch.load(path).a:tolist())
  end)

  -- Renaming the temporary file over the name given would replace a symbolic link with a
  -- regular file, and a FIFO or a device node with a regular file (as root: /dev/full).
  it('saves through a symbolic link to the file it points to, and keeps the link', function()
    local real, link = dir .. '/real.safetensors', dir .. '/link.safetensors'
    torch.save(real, { a = torch.ones(2) })
    assert(os.execute(('ln -s real.safetensors %s'):format(link)))
    torch.save(link, { a = torch.zeros(3) })
    assert(os.execute('test -L ' .. link), 'the link was replaced')
    assert.are.same({ 0.0, 0.0, 0.0 }, torch.load(real).a:tolist())
    assert.are.same({ 'link.safetensors', 'real.safetensors' }, listdir(dir))
    -- a relative link in another folder, to a link
    assert(os.execute(('mkdir %s/sub && ln -s ../link.safetensors %s/sub/up'):format(dir, dir)))
    torch.save(dir .. '/sub/up', { b = torch.ones(1) })
    assert.are.same({ 1.0 }, torch.load(real).b:tolist())
    assert.are.same({ 'up' }, listdir(dir .. '/sub'))
    assert(os.execute(('test -L %s/sub/up && test -L %s && test -f %s'):format(dir, link, real)))
    -- a link to a file that does not exist yet creates that file; .npy files alike
    assert(os.execute(('ln -s %s/new.npy %s/sub/dangling'):format(dir, dir)))
    torch.save_npy(dir .. '/sub/dangling', torch.arange(0, 3))
    assert.are.same({ 0, 1, 2 }, flat(torch.load_npy(dir .. '/new.npy')))
    assert(os.execute(('test -L %s/sub/dangling'):format(dir)))
    -- a loop of links is an error
    assert(os.execute(('ln -s loop2 %s/loop1 && ln -s loop1 %s/loop2'):format(dir, dir)))
    expect_error(function() torch.save(dir .. '/loop1', { a = torch.ones(1) }) end, 'loop1', 'symbolic links')
  end)

  it('refuses to replace what is not a regular file: FIFOs, device nodes, directories', function()
    local fifo = dir .. '/fifo'
    assert(os.execute('mkfifo ' .. fifo))
    expect_error(function() torch.save(fifo, { a = torch.ones(1) }) end, fifo, 'FIFO', 'not a regular file')
    expect_error(function() torch.save_npy(fifo, torch.ones(1)) end, fifo, 'FIFO', 'not a regular file')
    assert(os.execute('test -p ' .. fifo), 'the FIFO was replaced')
    local null = dir .. '/null'
    assert(os.execute('ln -s /dev/null ' .. null))
    expect_error(function() torch.save(null, { a = torch.ones(1) }) end, null, "'/dev/null'", 'character device')
    assert(os.execute(('test -L %s && test -c /dev/null'):format(null)), 'the link or /dev/null was replaced')
    assert(os.execute(('mkdir %s/folder'):format(dir)))
    expect_error(function() torch.save(dir .. '/folder', { a = torch.ones(1) }) end, 'folder', 'directory')
    assert.are.same({ 'fifo', 'folder', 'null' }, listdir(dir))
  end)

  -- A Lua string may hold a NUL; cut there, the name would be another file's.
  it('refuses file names and metadata with a NUL character', function()
    local path = dir .. '/a.safetensors'
    expect_error(function() torch.save(path .. '\0.bak', { a = torch.ones(1) }) end, 'torch.save', 'NUL')
    expect_error(function() torch.save_npy(dir .. '/a.npy\0.bak', torch.ones(1)) end, 'torch.save_npy', 'NUL')
    assert.are.same({}, listdir(dir))
    torch.save(path, { a = torch.ones(1) })
    torch.save_npy(dir .. '/a.npy', torch.ones(1))
    expect_error(function() torch.load(path .. '\0.bak') end, 'torch.load', 'NUL')
    expect_error(function() torch.load_npy(dir .. '/a.npy\0.bak') end, 'torch.load_npy', 'NUL')
    expect_error(function() torch.save(path, { a = torch.zeros(1) }, { ['k\0ey'] = 'v' }) end, 'NUL')
    expect_error(function() torch.save(path, { a = torch.zeros(1) }, { key = 'v\0x' }) end, 'NUL')
    assert.are.same({ 1.0 }, torch.load(path).a:tolist())
  end)

  it('raises clear errors for bad arguments and unwritable paths', function()
    expect_error(function() torch.save(dir .. '/x', torch.ones(2)) end, 'expected a table', 'got a tensor')
    expect_error(function() torch.save(dir .. '/x', { [true] = torch.ones(2) }) end, 'keys must be strings or integers')
    expect_error(function() torch.save(dir .. '/x', { w = coroutine.create(print) }) end, "'w'", 'thread')
    expect_error(function() torch.save(dir .. '/no/such/dir/x.safetensors', { w = torch.ones(1) }) end,
      'no/such/dir/x.safetensors', 'No such file or directory')
    expect_error(function() torch.save(dir .. '/x', { __metadata__ = torch.ones(1) }) end, '__metadata__')
    expect_error(function() torch.load(dir .. '/missing.safetensors') end, 'missing.safetensors',
      'No such file or directory')
    expect_error(function() torch.load(dir) end, dir, 'directory')
    expect_error(function() torch.load(42) end, 'torch.load', 'string')
  end)
end)

describe('torch.save_npy and torch.load_npy', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmdir(dir) end)

  it('round-trips every dtype, 0-d, empty and non-contiguous tensors', function()
    for name, t in pairs(reference()) do
      local path = ('%s/%s.npy'):format(dir, name)
      torch.save_npy(path, t)
      assert_same(name, torch.load_npy(path), describe_tensor(t:contiguous()))
    end
  end)

  it('writes the header NumPy writes (version 1.0, padded to 64 bytes)', function()
    local path = dir .. '/h.npy'
    torch.save_npy(path, torch.zeros(2, 3))
    local s = read_file(path)
    assert.are.equal('\x93NUMPY\x01\x00', s:sub(1, 8))
    local hlen = string.unpack('<I2', s, 9)
    assert.are.equal(0, (10 + hlen) % 64)
    local header = s:sub(11, 10 + hlen)
    assert.truthy(header:find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, true), header)
    assert.are.equal('\n', header:sub(-1))
    torch.save_npy(path, torch.zeros(4, { dtype = 'int64' }))
    assert.truthy(read_file(path):find("'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", 1, true))
  end)

  it('raises clear errors naming the file', function()
    expect_error(function() torch.save_npy(dir .. '/x.npy', { 1, 2 }) end, 'torch.save_npy', 'tensor')
    expect_error(function() torch.load_npy(dir .. '/none.npy') end, 'none.npy', 'No such file')
    local path = dir .. '/text.npy'
    write_file(path, 'hello, this is not an array')
    expect_error(function() torch.load_npy(path) end, 'text.npy', 'not a NumPy .npy file')
  end)
end)

describe('files shared with NumPy', function()
  local dir
  before_each(function()
    dir = tmpdir()
  end)
  after_each(function() rmdir(dir) end)

  it('NumPy reads what dplua writes, with equal values', function()
    if not have_numpy() then pending('numpy is not installed') return end
    local ref = reference()
    for name, t in pairs(ref) do torch.save_npy(('%s/dp_%s.npy'):format(dir, name), t) end
    torch.save(dir .. '/dp_all.safetensors', ref, { format = 'pt', ['k"ey'] = 'v\\al' })
    local p = io.popen(('%s %s/fixtures/data_files.py check %s 2>&1'):format(PYTHON, here, dir))
    local out = p:read('a')
    p:close()
    assert.are.equal('OK\n', out)
  end)

  it('dplua reads what NumPy and a plain safetensors writer write', function()
    if not have_numpy() then pending('numpy is not installed') return end
    assert(os.execute(('%s %s/fixtures/data_files.py write %s'):format(PYTHON, here, dir)))
    local expected = dofile(dir .. '/expected.lua')
    local count = 0
    for file, exp in pairs(expected) do
      local path = dir .. '/' .. file
      if file:match('%.npy$') then
        assert_same(file, torch.load_npy(path), exp)
      else
        local got = torch.load(path)
        for name, e in pairs(exp) do assert_same(file .. ':' .. name, got[name], e) end
        for name in pairs(got) do assert(exp[name], file .. ': unexpected tensor ' .. name) end
      end
      count = count + 1
    end
    assert.are.equal(10, count)
    local _, meta = torch.load(dir .. '/st_all.safetensors')
    assert.are.same({ format = 'pt', note = 'x"y' }, meta)
  end)

  it('refuses the arrays it does not read, saying why', function()
    if not have_numpy() then pending('numpy is not installed') return end
    assert(os.execute(('%s %s/fixtures/data_files.py write %s'):format(PYTHON, here, dir)))
    expect_error(function() torch.load_npy(dir .. '/bad_fortran.npy') end, 'bad_fortran.npy', 'Fortran order')
    expect_error(function() torch.load_npy(dir .. '/bad_bigendian.npy') end, 'bad_bigendian.npy', 'big-endian', '>f4')
    expect_error(function() torch.load_npy(dir .. '/bad_int32.npy') end, 'bad_int32.npy', "'<i4'")
    expect_error(function() torch.load_npy(dir .. '/bad_object.npy') end, 'bad_object.npy', "'|O'")
    for _, t in pairs(torch.load(dir .. '/bad_f16.safetensors')) do   -- F16 is read, as float16
      assert.are.equal('float16', t.dtype)
    end
    expect_error(function() torch.load(dir .. '/np_f32.npy') end, 'np_f32.npy', 'torch.load_npy')
  end)
end)

-- A safetensors file from a header table (encoded by hand) and a data string.
local function st_bytes(header, data, pad)
  local s = header
  if pad ~= false then s = s .. (' '):rep((-#s) % 8) end
  return string.pack('<I8', #s) .. s .. (data or '')
end

describe('malformed files', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmdir(dir) end)

  local function load_bytes(bytes, name)
    local path = dir .. '/' .. (name or 'bad.safetensors')
    write_file(path, bytes)
    return path
  end

  local f8 = string.pack('<ff', 1, 2)

  it('headers that lie about offsets, sizes or shapes', function()
    local cases = {
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}', f8, 'outside the 8 bytes' },
      { '{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', f8, 'needs' },
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', f8, 'end before they begin' },
      { '{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}',
        f8, 'overlap' },
      { '{"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', f8, 'non-negative' },
      { '{"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}', f8, 'non-negative integers' },
      { '{"x":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}', f8, 'too large' },
      { '{"x":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}}', f8, 'at most' },
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}}', f8, 'data_offsets' },
      { '{"x":{"dtype":"F32","data_offsets":[0,8]}}', f8, "'shape'" },
      { '{"x":{"shape":[2],"data_offsets":[0,8]}}', f8, 'dtype' },
      { '{"x":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}', f8, "'C64'" },
      { '{"x":[1,2]}', f8, 'not an object' },
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
        f8, 'twice' },
      { '{"__metadata__":{"a":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', f8, '__metadata__' },
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', f8, 'not valid JSON' },
      { '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} trailing', f8, 'not valid JSON' },
      { '{"x\\q":1}', f8, 'not valid JSON' },
      { '[1,2,3]', f8, 'JSON object' },
      { ('['):rep(100000), '', 'JSON object' },
      { '{"a":' .. ('['):rep(1000) .. (']'):rep(1000) .. '}', '', 'nesting too deep' },
    }
    for i, c in ipairs(cases) do
      local path = load_bytes(st_bytes(c[1], c[2]), ('case%d.safetensors'):format(i))
      expect_error(function() torch.load(path) end, ('case%d.safetensors'):format(i), c[3])
    end
  end)

  it('truncated, empty and foreign files', function()
    local good = st_bytes('{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', f8)
    expect_error(function() torch.load(load_bytes('')) end, 'bad.safetensors', 'too short')
    expect_error(function() torch.load(load_bytes(good:sub(1, 5))) end, 'bad.safetensors', 'too short')
    expect_error(function() torch.load(load_bytes(good:sub(1, 20))) end, 'bad.safetensors', 'header length')
    expect_error(function() torch.load(load_bytes(good:sub(1, -2))) end, 'bad.safetensors', 'truncated')
    expect_error(function() torch.load(load_bytes(string.pack('<I8', 1 << 62) .. 'xxxx')) end, 'header length')
    expect_error(function() torch.load(load_bytes('PK\3\4 a zip archive......')) end, 'zip')
    expect_error(function() torch.load(load_bytes('just some text in a file')) end, 'bad.safetensors')
    expect_error(function() torch.load_npy(load_bytes('\x93NUMPY\x01\x00', 'short.npy')) end, 'short.npy', 'too short')
    expect_error(function() torch.load_npy(load_bytes('\x93NUMPY\x09\x00\x10\x00{}', 'v9.npy')) end, 'v9.npy', 'version 9.0')
  end)

  it('npy headers that lie', function()
    local function npy(header, data)
      header = header .. (' '):rep((-(#header + 11)) % 64) .. '\n'
      return '\x93NUMPY\x01\x00' .. string.pack('<I2', #header) .. header .. (data or '')
    end
    local d8 = string.pack('<ff', 1, 2)
    local cases = {
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", d8, 'need 12 bytes' },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", d8, 'need 4 bytes' },
      { "{'descr': '<f4', 'fortran_order': False, }", d8, "no 'shape'" },
      { "{'descr': '<f4', 'shape': (2,), }", d8, "fortran_order" },
      { "{'fortran_order': False, 'shape': (2,), }", d8, "no 'descr'" },
      { "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", d8, 'True or False' },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", d8, 'non-negative' },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", d8, 'too large' },
      { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", d8, "unknown key 'extra'" },
      { "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", d8, 'structured' },
      { "['descr']", d8, "start with '{'" },
    }
    for i, c in ipairs(cases) do
      local path = load_bytes(npy(c[1], c[2]), ('case%d.npy'):format(i))
      expect_error(function() torch.load_npy(path) end, ('case%d.npy'):format(i), c[3])
    end
    -- a header length beyond the end of the file
    local path = load_bytes('\x93NUMPY\x01\x00\xff\xff{', 'long.npy')
    expect_error(function() torch.load_npy(path) end, 'long.npy', 'header length')
  end)

  -- The check that no name is used twice once compared every name with every earlier one:
  -- 60,000 tensors (a 3.6 MB header) took 18 s.  CPU time, so a busy machine does not fail it.
  it('checks a header of 60,000 names in linear time, and still finds a repeated one', function()
    local n = 60000
    local parts = {}
    for i = 1, n do
      parts[i] = ('"layer.%d.w":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}'):format(i, 4 * (i - 1), 4 * i)
    end
    local data = string.pack('<f', 0.5):rep(n)
    local path = load_bytes(st_bytes('{' .. table.concat(parts, ',') .. '}', data), 'many.safetensors')
    local t0 = os.clock()
    local sd = torch.load(path)
    local took = os.clock() - t0
    assert.are.same({ 0.5 }, sd['layer.60000.w']:tolist())
    local count = 0
    for _ in pairs(sd) do count = count + 1 end
    assert.are.equal(n, count)
    assert(took < 4, ('loading %d tensors took %.1f s of CPU time'):format(n, took))
    parts[n + 1] = '"layer.1.w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    path = load_bytes(st_bytes('{' .. table.concat(parts, ',') .. '}', data), 'again.safetensors')
    t0 = os.clock()
    expect_error(function() torch.load(path) end, 'again.safetensors', "'layer.1.w' twice")
    assert(os.clock() - t0 < 4, 'finding the repeated name was slow')
  end)

  -- Sizes whose product, or whose product times the element size, overflows 64 bits:
  -- a zero size does not make the others harmless, since strides are products of them.
  -- NumPy refuses the same shapes ("array is too big").
  it('shapes whose element or byte count overflows: "too large", never a tensor', function()
    local huge = {
      { '0, 9223372036854775807, 9223372036854775807', 'F32', '<f4' },
      { '4611686018427387904, 4', 'F32', '<f4' },
      { '0, 4611686018427387904, 4', 'F32', '<f4' },
      { '0, 2305843009213693952', 'F32', '<f4' },       -- 2^61 elements of 4 bytes
      { '1152921504606846976, 0', 'F64', '<f8' },       -- 2^60 elements of 8 bytes
      { '3037000500, 3037000500, 0', 'I64', '<i8' },
      { '2, 2, 2, 2, 2, 2, 4294967296, 4294967296', 'BOOL', '|b1' },
    }
    for i, c in ipairs(huge) do
      local st = load_bytes(st_bytes(('{"x":{"dtype":"%s","shape":[%s],"data_offsets":[0,0]}}'):format(c[2], c[1])),
        ('huge%d.safetensors'):format(i))
      expect_error(function() torch.load(st) end, ('huge%d.safetensors'):format(i), 'too large')
      local header = ("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }"):format(c[3], c[1])
      header = header .. (' '):rep((-(#header + 11)) % 64) .. '\n'
      local np = load_bytes('\x93NUMPY\x01\x00' .. string.pack('<I2', #header) .. header, ('huge%d.npy'):format(i))
      expect_error(function() torch.load_npy(np) end, ('huge%d.npy'):format(i), 'too large')
    end
    -- one byte less than the limit is an empty tensor of that shape, as in NumPy
    local st = load_bytes(st_bytes('{"x":{"dtype":"F32","shape":[0,2305843009213693951],"data_offsets":[0,0]}}'))
    local t = torch.load(st).x
    assert.are.same({ 0, 2305843009213693951 }, shape_of(t))
    assert.are.equal(0, t:numel())
  end)

  -- A tiny deterministic generator, so that a failure can be replayed.
  local function lcg(seed)
    local s = seed
    return function(n)
      s = (s * 1103515245 + 12345) % 2147483648
      return s % n
    end
  end

  it('fuzz: every truncation is an error, byte flips never crash', function()
    local cases = {
      { 'f.safetensors', function(p) torch.save(p, { a = torch.ones(2, 3), b = torch.tensor({ 1, 2 }, { dtype = 'int64' }),
        m = torch.tensor({ true, false }) }) end, torch.load },
      { 'f.npy', function(p) torch.save_npy(p, torch.ones(3, 2)) end, torch.load_npy },
    }
    for _, c in ipairs(cases) do
      local name, save, load = c[1], c[2], c[3]
      local good = dir .. '/good_' .. name
      save(good)
      local bytes = read_file(good)
      local path = dir .. '/' .. name
      for cut = 0, #bytes - 1 do
        write_file(path, bytes:sub(1, cut))
        local ok, err = pcall(load, path)
        assert(not ok, ('%s cut to %d bytes loaded'):format(name, cut))
        assert(tostring(err):find(name, 1, true), err)
      end
      local rand = lcg(1234)
      local header_end = name:match('npy$') and 128 or 8 + string.unpack('<I8', bytes)
      local loaded, failed = 0, 0
      for _ = 1, 1000 do
        local b = { bytes:byte(1, -1) }
        for _ = 1, 1 + rand(3) do
          b[1 + rand(header_end)] = rand(256)
        end
        write_file(path, string.char(table.unpack(b)))
        local ok, res = pcall(load, path)
        if ok then
          loaded = loaded + 1
          assert(type(res) == 'table' or torch.is_tensor(res))
        else
          failed = failed + 1
          assert(tostring(res):find(name, 1, true), res)
        end
      end
      assert(failed > 600, ('only %d of 1000 damaged %s files failed'):format(failed, name))
    end
  end)
end)

describe('checkpoints: nested tables of tensors and plain values', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() rmdir(dir) end)

  it('round-trip numbers (integer or float), strings, booleans, empty tables and tensors', function()
    local path = dir .. '/ck.safetensors'
    local value = {
      epoch = 3, loss = 0.25, three = 3.0, huge = 1e300, inf = math.huge, name = 'run "1"\n',
      flags = { true, false }, empty = {}, nested = { w = torch.tensor({ 1.5, -2 }), list = { torch.ones(1), 7 } },
      [5] = 'five',
    }
    torch.save(path, value, { note = 'kept' })
    local back, meta = torch.load(path)
    assert.are.same({ note = 'kept' }, meta)
    assert.are.equal(3, back.epoch)
    assert.are.equal('integer', math.type(back.epoch))
    assert.are.equal('float', math.type(back.three))
    assert.are.equal(0.25, back.loss)
    assert.are.equal(1e300, back.huge)
    assert.are.equal(math.huge, back.inf)
    assert.are.equal('run "1"\n', back.name)
    assert.are.same({ true, false }, back.flags)
    assert.are.same({}, back.empty)
    assert.are.equal('five', back[5])
    assert.are.same({ 1.5, -2 }, back.nested.w:tolist())
    assert.are.same({ 1 }, back.nested.list[1]:tolist())
    assert.are.equal(7, back.nested.list[2])
  end)

  it('stores tensors under dotted names that Python sees as plain safetensors', function()
    local path = dir .. '/model.safetensors'
    local model = require('nn').Sequential(require('nn').Linear(2, 3))
    torch.save(path, { model = model, step = 10 })
    local py = io.popen(PYTHON .. [==[ -c "
import json, struct, sys
import numpy as np
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
print(' '.join(sorted(k for k in h if k != '__metadata__')))
o = h['model.1.weight']['data_offsets']
print(np.frombuffer(b[8 + n + o[0]:8 + n + o[1]], dtype='<f4').size)
" ]==] .. path)
    local out = py:read('a')
    py:close()
    if out == '' then pending('no NumPy for ' .. PYTHON) return end
    assert.are.equal('model.1.bias model.1.weight\n6\n', out)
    local back = torch.load(path)
    assert.are.equal(10, back.step)
    assert.are.same(model[1].weight:tolist(), back.model['1.weight']:tolist())
  end)

  it('resumes training exactly: model and optimizer state, then the same next steps', function()
    local nn, optim = require 'nn', require 'optim'
    local path = dir .. '/resume.safetensors'
    torch.manual_seed(3)
    local x, y = torch.randn(8, 4), torch.randn(8, 2)
    local function make()
      torch.manual_seed(4)
      local m = nn.Linear(4, 2)
      return m, optim.Adam(m:parameters(), { lr = 0.01 })
    end
    local function step(m, o)
      o:zero_grad()
      local loss = ((m(x) - y) ^ 2):mean()
      loss:backward()
      o:step()
    end
    local m1, o1 = make()
    for _ = 1, 3 do step(m1, o1) end
    torch.save(path, { model = m1:state_dict(), optimizer = o1:state_dict(), epoch = 3 })
    for _ = 1, 2 do step(m1, o1) end
    local m2, o2 = make()
    local ck = torch.load(path)
    m2:load_state_dict(ck.model)
    o2:load_state_dict(ck.optimizer)
    for _ = 1, 2 do step(m2, o2) end
    assert.are.same(m1.weight:tolist(), m2.weight:tolist())
    assert.are.same(m1.bias:tolist(), m2.bias:tolist())
  end)

  it('explains what cannot be saved', function()
    local path = dir .. '/bad.safetensors'
    expect_error(function() torch.save(path, { a = { f = print } }) end, "the value at 'a.f' is a function")
    expect_error(function() torch.save(path, { [1.5] = 1 }) end, 'keys must be strings or integers')
    local loop = {}
    loop.self = loop
    expect_error(function() torch.save(path, { l = loop }) end, "the table at 'l.self' contains itself")
    expect_error(function() torch.save(path, { a = { b = torch.ones(1) }, ['a.b'] = torch.ones(1) }) end,
      "two tensors would be stored as 'a.b'")
    expect_error(function() torch.save(path, { a = 1 }, { ['dplua.tree'] = 'x' }) end, "dplua's own")
  end)
end)

describe("PyTorch's state_dict keys", function()
  local nn = require 'nn'
  it('load with {from_pytorch = true}, save with {to_pytorch = true}, and the error suggests it', function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Linear(2, 1)))
    local pt = {   -- as PyTorch names them: children count from 0
      ['0.weight'] = torch.tensor({ { 1.0, 0 }, { 0, -1 } }), ['0.bias'] = torch.tensor({ 0.5, 0.5 }),
      ['2.0.weight'] = torch.tensor({ { 2.0, 3 } }), ['2.0.bias'] = torch.tensor({ -1.0 }),
    }
    expect_error(function() m:load_state_dict(pt) end, 'Unexpected key(s) in state_dict: "0.bias"',
      'load_state_dict(sd, {from_pytorch = true})')
    m:load_state_dict(pt, { from_pytorch = true })
    -- x = (1, 2): relu((1.5, -1.5)) = (1.5, 0); 2 * 1.5 + 3 * 0 - 1 = 2
    assert.are.same({ { 2 } }, m(torch.tensor({ { 1.0, 2 } })):tolist())
    local back = m:state_dict({ to_pytorch = true })
    local keys = {}
    for k in pairs(back) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ '0.bias', '0.weight', '2.0.bias', '2.0.weight' }, keys)
    assert.are.same({ { 2, 3 } }, back['2.0.weight']:tolist())
  end)
end)

describe('safetensors files with 16-bit floats and small integers', function()
  it('reads F16 and BF16 as float16 and bfloat16 and I8, I16, I32, U8 as int64, exactly', function()
    local dir = tmpdir()
    local path = dir .. '/hf.safetensors'
    local py = io.popen(PYTHON .. [==[ -c "
import json, struct, sys
import numpy as np
f16 = np.array([1.5, -2.25, 65504, 6.103515625e-05, 5.960464477539063e-08, np.inf, -0.0], dtype='<f2')
f32 = np.array([1.5, -2.25, 3.0e38, 1.0e-38, -7.0], dtype='<f4')
bf16 = (f32.view('<u4') >> 16).astype('<u2')
arrays = [('half', 'F16', f16.tobytes(), [7]), ('brain', 'BF16', bf16.tobytes(), [5]),
          ('i8', 'I8', np.array([-128, 127, 0], dtype='i1').tobytes(), [3]),
          ('i16', 'I16', np.array([-32768, 32767], dtype='<i2').tobytes(), [2]),
          ('i32', 'I32', np.array([-2147483648, 2147483647, 5, -6], dtype='<i4').tobytes(), [2, 2]),
          ('u8', 'U8', np.array([0, 255], dtype='u1').tobytes(), [2])]
header, data = {}, b''
for name, dt, raw, shape in arrays:
    header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + data)
print('ok')
" ]==] .. path)
    local out = py:read('a')
    py:close()
    if out ~= 'ok\n' then rmdir(dir) pending('no NumPy for ' .. PYTHON) return end
    local t = torch.load(path)
    rmdir(dir)
    assert.are.equal('float16', t.half.dtype)
    assert.are.same({ 1.5, -2.25, 65504, 6.103515625e-05, 5.960464477539063e-08, math.huge, 0 }, t.half:tolist())
    assert.are.equal(-math.huge, 1 / t.half[7])   -- -0.0 keeps its sign
    -- bfloat16 is float32's top half: values whose low 16 bits are zero come back exactly
    local brain = t.brain:tolist()
    assert.are.equal('bfloat16', t.brain.dtype)
    assert.are.same({ 1.5, -2.25 }, { brain[1], brain[2] })
    assert.are.equal(-7, brain[5])
    assert.are.same({ -128, 127, 0 }, t.i8:tolist())
    assert.are.same({ -32768, 32767 }, t.i16:tolist())
    assert.are.same({ { -2147483648, 2147483647 }, { 5, -6 } }, t.i32:tolist())
    assert.are.same({ 0, 255 }, t.u8:tolist())
    assert.are.equal('int64', t.u8.dtype)
  end)
end)
