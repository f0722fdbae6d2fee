-- The DataLoader's progress bar (lua/torch/data/progress.lua): a few lines per epoch off a
-- terminal, postfix fields, print() that does not land on the bar's line, `break` that
-- ends the bar.
local torch = require 'torch'
local Progress = require 'torch.data.progress'

local function sink()
  local s = { text = '' }
  function s:write(...) for _, v in ipairs({ ... }) do self.text = self.text .. v end end
  function s:flush() end
  return s
end

describe('the progress bar', function()
  it('writes a line each quarter of the epoch off a terminal, with the postfix', function()
    local out = sink()
    local bar = Progress.new(8, out, false)
    bar:set_postfix({ loss = 0.25, epoch = 2 })
    for i = 1, 8 do bar:step(i) end
    bar:finish()
    local lines = {}
    for l in out.text:gmatch('[^\n]+') do lines[#lines + 1] = l end
    assert.are.equal(4, #lines, out.text)
    assert.is_truthy(lines[1]:find('^2/8 batches %(25%%%)'), lines[1])
    assert.is_truthy(lines[4]:find('^8/8 batches %(100%%%).*  epoch=2, loss=0.25$'), lines[4])
  end)

  it('on a terminal, print() clears the bar and the bar is redrawn below', function()
    local printed = {}
    local print0 = _G.print
    _G.print = function(...) printed[#printed + 1] = table.concat({ ... }, ' ') end
    local ok, err = pcall(function()
      local out = sink()
      local bar = Progress.new(4, out, true)
      bar:step(1)
      local before = #out.text
      print('epoch note')
      assert.are.same({ 'epoch note' }, printed)
      local after = out.text:sub(before + 1)
      assert.is_truthy(after:find('^\r%s+\r\r1/4 %['), after)   -- cleared, then redrawn
      bar:finish()
      assert.are.equal('\n', out.text:sub(-1))
    end)
    local restored = _G.print
    _G.print = print0
    assert(ok, err)
    assert.are_not.equal(print0, nil)
    assert.is_truthy(restored ~= nil)
  end)

  it('a break out of the loader loop ends the bar, and set_postfix reaches it', function()
    local ds = torch.data.TensorDataset(torch.zeros(40, 2), torch.zeros(40))
    local loader = torch.data.DataLoader(ds, { batch_size = 10, progress = true })
    local seen = 0
    for _ in loader:iter() do
      loader:set_postfix({ loss = 1 })
      seen = seen + 1
      if seen == 2 then break end
    end
    assert.is_true(loader.bar.finished)
    assert.are.same({ loss = 1 }, loader.bar.postfix)
  end)
end)
