"""PyTorch's side of the module part of the conformance run: walks the module database that
PyTorch tests its nn modules with (torch.testing._internal.common_modules.module_db).  For
each ModuleInfo, each of its module inputs, in float32 and float64, it constructs the
module with a fixed seed, runs the forward (in training mode, unless the module would draw
random numbers there), and writes the case, translated to dplua by the rules in rules.py,
with what PyTorch gave: the state_dict (names in order, dtypes, shapes, values) that dplua
loads, named_parameters and named_buffers in order, the outputs, the gradients of every
parameter and of the floating inputs after backward of sum(output * a fixed random
cotangent), and the state_dict after the forward (the running statistics of batch norms).
Modules whose ModuleInfo says that training and evaluation differ are run in both modes.

usage: moduledb.py [--seed S] [--modules A,B,...] --out PREFIX
       writes PREFIX.json (the cases and the modules); the cases hold only plain values
"""
import argparse
import inspect
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                                  # expecttest's stand-in, rules, opdb
sys.path.insert(0, os.path.join(HERE, '..', 'fuzz'))
import torch                                             # noqa: E402
from opdb import DTYPES, Case, Untranslatable, contiguous, record_out   # noqa: E402
from rules import ARG_KINDS, RULES                       # noqa: E402

MODULE_DTYPES = [torch.float32, torch.float64]


def lua_key(k):
    return k if k.isidentifier() and k not in ('end', 'and', 'or', 'not', 'function') else '[%s]' % json.dumps(k)


def callable_value(v):
    """A function argument (TransformerEncoderLayer's activation=F.gelu) in dplua's spelling."""
    for name in ('relu', 'gelu'):
        if v is getattr(torch.nn.functional, name) or v is getattr(torch, name, None):
            return 'nn.functional.' + name
    raise Untranslatable('the function argument %r' % v)


def spell_call(case, fn, args, kwargs, kinds, skip_self, required=None):
    """The Lua arguments of a call of fn (a constructor or a forward) with these values.

    A keyword argument for a parameter that PyTorch's signature has without a default
    (MultiheadAttention(embed_dim=3, num_heads=3)) is passed in its position, as Lua has
    no names for positional parameters; every other keyword argument goes into the
    options table in last position; a None keyword argument is left out.  required: those
    parameters' names, for a function whose signature is (*args, **kwargs)."""
    params = list(inspect.signature(fn).parameters.values())
    if skip_self:
        params = params[1:]
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if required is not None:
        names = list(required)
    else:
        required = []
        for p in params:
            if p.kind != p.POSITIONAL_OR_KEYWORD or p.default is not p.empty:
                break
            required.append(p.name)
    kwargs = dict(kwargs)
    values = list(args)
    arg_names = names[:len(values)]
    for name in required[len(values):]:
        if name not in kwargs:
            break
        values.append(kwargs.pop(name))
        arg_names.append(name)
    arg_names += ['arg%d' % i for i in range(len(arg_names), len(values))]

    def spell(v, kind):
        if callable(v) and not isinstance(v, (torch.Tensor, torch.dtype)):
            return callable_value(v)
        return case.value(v, kind)
    out = [spell(v, kinds.get(n, 'plain')) for v, n in zip(values, arg_names)]
    opts = ['%s = %s' % (lua_key(k), spell(v, kinds.get(k, 'plain'))) for k, v in kwargs.items() if v is not None]
    if opts:
        out.append('{' + ', '.join(opts) + '}')
    while out and out[-1] == 'nil':
        out.pop()
    return ', '.join(out)


def flat_outputs(out):
    """The tensors (and Nones) of a forward's result, nested tuples flattened in order."""
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res += flat_outputs(o)
        return res
    return [out]


def tensor_rec(t):
    d = t.detach()
    if d.dtype not in DTYPES:
        raise Untranslatable('a %s tensor in the state' % d.dtype)
    return {'dtype': DTYPES[d.dtype], 'shape': list(d.shape), 'values': d.reshape(-1).tolist()}


def state_recs(m):
    return [dict(tensor_rec(v), name=k) for k, v in m.state_dict().items()]


def draws_random(m):
    """Whether the module's training-mode forward draws random numbers (dropout)."""
    for sub in m.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd) and sub.p > 0:
            return True
        p = getattr(sub, 'dropout', 0)
        if isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0:
            return True
    return False


class TrackedCase(Case):
    """A Case that keeps the tensors it was given (to know which inputs are leaves)."""

    def __init__(self):
        super().__init__()
        self.originals = []

    def tensor(self, t, kind):
        self.originals.append(t)
        return super().tensor(t, kind)


def module_case(info, rule, lua_cls, mi, dtype, mode, seed):
    case = TrackedCase()
    kinds = dict(ARG_KINDS)
    kinds.update(rule.get('args', {}))
    cls = info.module_cls
    ctor_args, ctor_kwargs = mi.constructor_input.args, mi.constructor_input.kwargs
    ctor = '%s(%s)' % (lua_cls, spell_call(case, cls.__init__, ctor_args, ctor_kwargs, kinds, True,
                                                 rule.get('required')))
    torch.manual_seed(seed)
    m = cls(*ctor_args, **ctor_kwargs).to(dtype)
    if isinstance(m, torch.nn.modules.lazy.LazyModuleMixin) and m.has_uninitialized_params():
        with torch.no_grad():                 # the parameters get their shapes from a first forward
            m(*[contiguous(a) for a in mi.forward_input.args], **mi.forward_input.kwargs)
    if mode == 'train' and draws_random(m):
        mode = 'eval'
    m.train(mode == 'train')
    state = state_recs(m)
    params = [n for n, _ in m.named_parameters()]
    buffers = [n for n, _ in m.named_buffers()]
    # the forward's inputs: contiguous copies; the floating ones are leaves of the gradients
    def leaf(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.detach().clone().contiguous().requires_grad_(True)
        if isinstance(v, torch.Tensor):
            return v.detach().clone().contiguous()
        if isinstance(v, (tuple, list)):
            return type(v)(leaf(x) for x in v)
        return v
    fargs = [leaf(a) for a in mi.forward_input.args]
    fkwargs = {k: leaf(v) for k, v in mi.forward_input.kwargs.items()}
    fkinds = dict(ARG_KINDS)
    fkinds.update(rule.get('forward_args', {}))
    first = len(case.inputs)
    args_lua = spell_call(case, cls.forward, fargs, fkwargs, fkinds, True)
    leaves = [k + 1 for k in range(first, len(case.inputs)) if case.originals[k].requires_grad]
    leaf_tensors = [case.originals[k - 1] for k in leaves]
    out = m(*fargs, **fkwargs)
    outs = flat_outputs(out)
    index_out = rule.get('index_out', [])
    recs = []
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and i in index_out and o.dtype == torch.int64:
            recs.append(record_out(o + 1, False, []))
        else:
            recs.append(record_out(o, False, []))
    for r in recs:
        r.pop('alias', None)
    gen = torch.Generator().manual_seed(1234)
    loss, cots = None, []
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point():
            c = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
            term = (o * c).sum()
            loss = term if loss is None else loss + term
            cots.append(dict(tensor_rec(c), out=i + 1))
    grads = None
    if loss is not None:
        loss.backward()
        grads = {'params': [], 'inputs': []}
        for n, p in m.named_parameters():
            grads['params'].append(dict(tensor_rec(p.grad) if p.grad is not None else {'none': True}, name=n))
        for k, t in zip(leaves, leaf_tensors):
            grads['inputs'].append(dict(tensor_rec(t.grad) if t.grad is not None else {'none': True}, input=k))
    return {
        'module': info.name, 'dtype': DTYPES[dtype], 'mode': mode, 'desc': mi.desc or '',
        'check': lua_cls, 'ctor': ctor, 'args': args_lua, 'inputs': case.records, 'leaves': leaves,
        'state': state, 'params': params, 'buffers': buffers, 'outs': recs,
        'cotangents': cots, 'grads': grads, 'after': state_recs(m),
    }


def module_cases(info, seed):
    rule = RULES.get(info.name) or {}
    entry = {'module': info.name, 'cases': [], 'skipped': {}}
    if rule.get('untranslatable'):
        entry['untranslatable'] = rule['untranslatable']
        return entry
    lua_cls = rule.get('lua') or 'nn.' + info.module_cls.__name__
    entry['lua_name'] = lua_cls
    modes = ['train', 'eval'] if info.train_and_eval_differ else ['train']
    for dtype in MODULE_DTYPES:
        if dtype not in info.dtypes:
            continue
        torch.manual_seed(seed)
        try:
            inputs = list(info.module_inputs_func(info, device='cpu', dtype=dtype, requires_grad=False,
                                                  training=True))
        except Exception as e:                         # noqa: BLE001
            entry['skipped']['module_inputs raised: %s' % str(e)[:80]] = 1
            continue
        for k, mi in enumerate(inputs):
            for mode in modes:
                try:
                    c = module_case(info, rule, lua_cls, mi, dtype, mode, seed + k)
                except Untranslatable as e:
                    entry['skipped'][str(e)] = entry['skipped'].get(str(e), 0) + 1
                    continue
                except Exception as e:                 # noqa: BLE001 (PyTorch refused its own input)
                    why = 'PyTorch raised: %s' % type(e).__name__
                    entry['skipped'][why] = entry['skipped'].get(why, 0) + 1
                    continue
                entry['cases'].append(c)
    if not entry['cases'] and not entry['skipped']:
        entry['skipped']['no module input in float32 or float64'] = 1
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--modules', help='comma-separated ModuleInfo names (default: every module)')
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    import warnings
    warnings.filterwarnings('ignore')
    from torch.testing._internal.common_modules import module_db
    want = set(args.modules.split(',')) if args.modules else None
    entries = [module_cases(info, args.seed) for info in module_db if want is None or info.name in want]
    cases = []
    for e in entries:
        for c in e['cases']:
            c['id'] = len(cases) + 1
            cases.append(c)
    with open(args.out + '.json', 'w') as f:
        json.dump({'modules': [{k: v for k, v in e.items() if k != 'cases'} for e in entries], 'cases': cases}, f)


if __name__ == '__main__':
    main()
