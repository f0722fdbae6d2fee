-- spec/dist_env_spec.lua: a process that a launcher started as one rank of a larger job
-- (WORLD_SIZE and RANK set, as torchrun sets them) and that joins a group of another size
-- is stopped with a message naming what disagrees, instead of training alone in a world
-- of 1 while its siblings do the same.
local shell = dofile('spec/helpers/shell.lua')

local function mpi_built()
  local out = shell.run(shell.q(shell.bin) .. ' -v')
  return out:find('mpi', 1, true) ~= nil
end

describe('init_process_group under a launcher', function()
  local script = shell.write(os.tmpname() .. '.lua', [[
    local dist = torch.distributed
    dist.init_process_group{ backend = 'mpi', init_method = 'env://' }
    print('rank ' .. dist.get_rank() .. ' of ' .. dist.get_world_size())
    dist.destroy_process_group()
  ]])
  local function run(env)
    return shell.run(('env %s %s %s'):format(env, shell.q(shell.bin), shell.q(script)))
  end

  it('refuses WORLD_SIZE=2 where the group has one process, naming both', function()
    if not mpi_built() then return pending('this build has no MPI backend') end
    local out, err, code = run('WORLD_SIZE=2 RANK=1')
    assert.are_not.equal(0, code)
    assert.truthy(err:find('started with WORLD_SIZE=2, but the mpi group it joined gives it world size 1', 1, true), err)
    assert.falsy(out:find('rank', 1, true))
  end)

  it('joins as before where WORLD_SIZE and RANK agree or are not set', function()
    if not mpi_built() then return pending('this build has no MPI backend') end
    for _, env in ipairs { 'WORLD_SIZE=1 RANK=0', '-u WORLD_SIZE -u RANK' } do
      local out, err, code = run(env)
      assert.are.equal(0, code, err)
      assert.truthy(out:find('rank 0 of 1', 1, true), out .. err)
    end
  end)
end)
