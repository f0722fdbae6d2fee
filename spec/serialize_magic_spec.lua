-- serialize_magic: torch.load tells a safetensors file from a PyTorch pickle, a zip archive or a
-- .npy file by what each really is.  A safetensors file starts with its header length (8 bytes,
-- little-endian), so its first byte can be 0x80, the byte a pickle starts with: every header
-- length of 128 mod 256 gives one.  Files of every header length load back; the PyTorch files
-- (spec/fixtures/torch_save/*.pt, written by PyTorch 1.13 with spec/fixtures/make_torch_save.py)
-- are named for what they are.
local torch = require 'torch'

local expect_error = dofile('spec/helpers/check.lua').expect_error

local function first_bytes(path, n)
  local f = assert(io.open(path, 'rb'))
  local s = f:read(n)
  f:close()
  return s
end

local function write_file(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
end

describe('torch.load and the first bytes of a file', function()
  local path
  before_each(function() path = os.tmpname() end)
  after_each(function() os.remove(path) end)

  it('loads what torch.save wrote for every header length from 8 to 4096 bytes', function()
    local covered, low80, pickle_like = {}, {}, {}
    local values = torch.tensor({ 1.5, -2.25, 3.0, 0.125 })
    -- The header grows one byte per metadata character (the writer pads it to 8 bytes);
    -- without a tensor it can be as short as '{}'.  Each (with a tensor or not, header
    -- length) pair is loaded back once.
    for _, with_tensor in ipairs { false, true } do
      local seen = {}
      for pad = 0, 4096 do
        local tbl = with_tensor and { w = values } or {}
        local meta = pad > 0 and { [''] = ('x'):rep(pad - 1) } or nil
        torch.save(path, tbl, meta)
        local head = first_bytes(path, 8)
        local hlen = string.unpack('<I8', head)
        if hlen > 4096 then break end
        if not seen[hlen] then
          seen[hlen], covered[hlen] = true, true
          if head:byte(1) == 0x80 then
            low80[hlen] = true
            if head:byte(2) >= 2 and head:byte(2) <= 5 then pickle_like[hlen] = true end
          end
          local got, gotmeta = torch.load(path)
          if with_tensor then
            assert.are.same({ 1.5, -2.25, 3.0, 0.125 }, got.w:tolist())
          else
            assert.are.same({}, got)
          end
          assert.are.same(meta, gotmeta)
        end
      end
    end
    -- every multiple of 8 a header can have: 8 ('{}' padded), then 24 ('{"__metadata__":{"":""}}')
    -- and up
    local function count(set) local n = 0; for _ in pairs(set) do n = n + 1 end; return n end
    for n = 8, 4096, 8 do
      if n ~= 16 then assert(covered[n], ('header length %d not covered'):format(n)) end
    end
    assert.are.equal(16, count(low80))        -- 128, 384, ..., 3968: the first byte is 0x80
    assert.are.equal(4, count(pickle_like))   -- 0x280 ... 0x580: 0x80 then a pickle protocol byte
  end)

  it('loads hand-written files of every unpadded header length from 2 to 4096 bytes', function()
    for hlen = 2, 4096 do
      local entry = '{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
      local header
      if hlen >= #entry + 1 then
        header = entry .. (' '):rep(hlen - #entry - 1) .. '}'
      else
        header = '{' .. (' '):rep(hlen - 2) .. '}'
      end
      assert(#header == hlen)
      write_file(path, string.pack('<I8', hlen) .. header .. string.pack('<f', hlen))
      local got = torch.load(path)
      if hlen >= #entry + 1 then
        assert.are.equal(hlen, got.t[1])
      else
        assert.are.same({}, got)
      end
    end
  end)

  it('names the files PyTorch 1.13 writes: a legacy pickle and a zip archive', function()
    local legacy, zip = 'spec/fixtures/torch_save/legacy.pt', 'spec/fixtures/torch_save/zip.pt'
    assert.are.equal('\x80\x02', first_bytes(legacy, 2))
    assert.are.equal('PK\3\4', first_bytes(zip, 4))
    expect_error(function() torch.load(legacy) end, 'torch.load', legacy, 'Python pickle',
      '_use_new_zipfile_serialization=False', 'safetensors.torch.save_file')
    expect_error(function() torch.load(zip) end, 'torch.load', zip, 'zip archive', 'safetensors.torch.save_file')
  end)

  it('names pickles of every protocol, and refuses 0x80 files that are neither', function()
    for proto = 2, 5 do
      write_file(path, string.char(0x80, proto) .. 'K\1.' .. ('\0'):rep(20))
      expect_error(function() torch.load(path) end, path, 'Python pickle')
    end
    -- 0x80 and a byte that is no pickle protocol, with a length that does not fit: a plain error
    write_file(path, '\x80\x09' .. ('\0'):rep(30))
    local e = expect_error(function() torch.load(path) end, path, 'header length')
    assert.is_nil(e:find('pickle', 1, true))
    -- a header length that fits but a header that is no JSON object
    write_file(path, string.pack('<I8', 128) .. ('x'):rep(128))
    e = expect_error(function() torch.load(path) end, path, 'JSON object')
    assert.is_nil(e:find('pickle', 1, true))
  end)

  it('names a .npy file given to torch.load, and a safetensors file given to torch.load_npy', function()
    torch.save_npy(path, torch.ones(3))
    expect_error(function() torch.load(path) end, path, 'NumPy .npy', 'torch.load_npy')
    torch.save(path, { a = torch.ones(2) })
    expect_error(function() torch.load_npy(path) end, path, 'not a NumPy .npy file')
  end)
end)
