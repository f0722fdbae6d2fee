-- conformance_spec.lua: a seeded subset of tools/conformance (dplua against PyTorch's own op
-- and module databases, see doc/conformance.md): the ops below agreed with PyTorch 1.13 on
-- every sample (values, dtypes, shapes, aliasing, float64 gradients, error inputs), and the
-- modules on every module input (state_dict names, order, dtypes and shapes, outputs, the
-- state after a training-mode forward, the gradients of parameters and inputs, in float32
-- and float64) when they were listed, and must go on doing so.  The samples come from
-- PyTorch's OpInfos and ModuleInfos, run by /usr/bin/python3 (cached under
-- $BUILD/conformance); the spec is pending without PyTorch.
local EXACT = {
  'abs', 'add', 'mul', 'sub', 'div.no_rounding_mode', 'atan2', 'clamp', 'exp', 'log', 'sqrt',
  'sigmoid', 'tanh', 'pow', 'lerp', 'xlogy', 'cumsum', 'cumprod', 'cummax', 'logcumsumexp',
  'max.reduction_with_dim', 'min.reduction_no_dim', 'prod', 'count_nonzero', 'matmul', 'mm',
  'bmm', 'softmax', 'log_softmax', 'nn.functional.relu', 'nn.functional.gelu',
  'nn.functional.linear', 'nn.functional.pad.constant', 'nn.functional.mse_loss',
  'nn.functional.nll_loss', 'transpose', 'permute', 'reshape', 'view', 'unsqueeze', 'squeeze',
  'select', 'stack', 'take', 'scatter_add', 'index_put', 'sort', 'argsort', 'topk', 'eq', 'lt',
  'logical_and', 'masked_fill', 'masked_select', 'tril', 'kron', 'linalg.inv', 'searchsorted',
}

local EXACT_MODULES = {
  'nn.Linear', 'nn.Conv2d', 'nn.BatchNorm2d', 'nn.Embedding', 'nn.CrossEntropyLoss', 'nn.GRUCell', 'nn.RNN',
  'nn.Transformer',
}

local function run(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('a')
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

describe('conformance with PyTorch\'s op database (a subset)', function()
  it('the listed ops and modules agree with PyTorch on every sample and module input', function()
    local _, torch_missing = run("/usr/bin/python3 -c 'import torch'")
    if torch_missing ~= 0 then
      pending('PyTorch is not available to /usr/bin/python3')
      return
    end
    local build = os.getenv('DPLUA_BUILD') or 'build'
    local findings = os.tmpname()
    local out, code = run(('BUILD=%q tools/conformance/conformance --samples 3 --seed 0 --ops %s --modules %s '
      .. '--expect-exact --quiet --findings %s'):format(build, table.concat(EXACT, ','), table.concat(EXACT_MODULES, ','),
      findings))
    os.remove(findings)
    local compared = tonumber(out:match('samples compared (%d+)'))
    assert.is_truthy(compared, out)
    -- about 8 per op: a run that compares far fewer has lost its samples, not passed
    assert.is_true(compared >= 5 * #EXACT, ('only %d samples compared\n%s'):format(compared, out))
    assert.is_truthy(out:find(('exact %d  (%d ops)'):format(#EXACT, #EXACT), 1, true), out)
    -- every module input of each module, in both dtypes (the RNN alone has 32 per dtype)
    local inputs = tonumber(out:match('module inputs compared (%d+)'))
    assert.is_truthy(inputs, out)
    assert.is_true(inputs >= 100, ('only %d module inputs compared\n%s'):format(inputs, out))
    assert.is_truthy(out:find(('exact %d  (%d modules)'):format(#EXACT_MODULES, #EXACT_MODULES), 1, true), out)
    assert.are.equal(0, code, out)
  end)
end)
