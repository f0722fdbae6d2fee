"""PyTorch's side of the conformance run: walks the op database that PyTorch tests itself
with (torch.testing._internal.common_methods_invocations.op_db), runs each sample in
PyTorch and writes it, translated to dplua by the rules in rules.py, with what PyTorch
gave: the outputs (dtype, shape, values), whether each aliases an input, the gradients of
float64 samples, and the error inputs that must raise.

usage: opdb.py [--samples N] [--seed S] [--ops A,B,...] --out PREFIX
       writes PREFIX.lua (the cases, read by run.lua) and PREFIX.json (cases and ops)
"""
import argparse
import inspect
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)                                  # expecttest's stand-in, rules
sys.path.insert(0, os.path.join(HERE, '..', 'fuzz'))
import torch                                             # noqa: E402
from gen import lua_num, lua_value                       # noqa: E402  (tools/fuzz/gen.py)
from rules import ARG_KINDS, RULES                       # noqa: E402

DTYPES = {torch.float32: 'float32', torch.float64: 'float64', torch.int64: 'int64', torch.bool: 'bool'}
MAX_ELEMENTS = 2000          # a sample whose tensors hold more is passed over (the file stays small)


# Keyword arguments of PyTorch's factories that its schemas do not list.
FACTORY = {'requires_grad', 'device', 'layout', 'pin_memory', 'memory_format'}


STRUCTSEQ = {'count', 'index', 'n_fields', 'n_sequence_fields', 'n_unnamed_fields'}


class Untranslatable(Exception):
    pass


def rule_of(full):
    """The rules for an op, merged from its base name and its full name ('max.reduction_with_dim')."""
    out = {}
    base = full
    keys = []
    while True:
        keys.append(base)
        if '.' not in base:
            break
        base = base.rsplit('.', 1)[0]
    for k in reversed(keys):
        out.update(RULES.get(k) or {})
    return out


# ---------------------------------------------------------------------------------------
# Naming the arguments of a call

def type_ok(t, v):
    t = str(t)
    if t.startswith('Optional['):
        if v is None:
            return True
        t = t[len('Optional['):-1]
    if v is None:
        return False
    if t == 'Tensor':
        return isinstance(v, torch.Tensor)
    if t.startswith('List['):
        inner = t[5:-1]
        if isinstance(v, (list, tuple)):
            return all(type_ok(inner, x) or (inner.startswith('Optional') and x is None) for x in v)
        return inner == 'int' and isinstance(v, int) and not isinstance(v, bool)
    if t == 'int':
        return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, (torch.dtype, torch.layout,
                                                                                 torch.memory_format))
    if t == 'float':
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == 'bool':
        return isinstance(v, bool)
    if t == 'number':
        return isinstance(v, (int, float, bool))
    if t == 'str':
        return isinstance(v, str)
    return True


def schema_names(aten, nargs, kwargs, values):
    """The argument names of the first overload of aten::NAME that the call fits, or None."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator('aten::' + aten)
    except RuntimeError:
        return None
    for s in schemas:
        pos = [a for a in s.arguments if not a.kwarg_only]
        if len(pos) < nargs:
            continue
        names = {a.name: a for a in s.arguments}
        if any(k not in names and k not in FACTORY for k in kwargs):
            continue
        if not all(type_ok(pos[i].type, values[i]) for i in range(nargs)):
            continue
        if not all(type_ok(names[k].type, v) for k, v in kwargs.items() if k in names):
            continue
        return [a.name for a in pos[:nargs]]
    return None


def arg_names(fn, aten, values, kwargs):
    """The names of the positional values (input first) of a call of fn."""
    if fn is not None:
        fn = torch._jit_internal.boolean_dispatched.get(fn, {}).get('if_false', fn)
    if inspect.isfunction(fn):
        try:
            bound = inspect.signature(fn).bind_partial(*values, **kwargs)
            names = []
            for name, p in inspect.signature(fn).parameters.items():
                if name in bound.arguments and p.kind != p.VAR_POSITIONAL and name not in kwargs:
                    names.append(name)
                elif name in bound.arguments and p.kind == p.VAR_POSITIONAL:
                    names += [name] * len(bound.arguments[name])
            if len(names) == len(values):
                return names
        except TypeError:
            pass
    for a in (aten, aten.rsplit('_', 1)[-1]):
        names = schema_names(a, len(values), kwargs, values)
        if names is not None:
            return names
    if all(not isinstance(v, int) or isinstance(v, bool) for v in values[1:]):
        return ['arg%d' % i for i in range(len(values))]     # no number whose meaning matters
    raise Untranslatable('no overload of aten::%s takes these arguments' % aten)


# ---------------------------------------------------------------------------------------
# Values in dplua's spelling

class Case:
    """The inputs of one sample (tensors become a1, a2 ...) and their Lua spelling."""

    def __init__(self):
        self.inputs = []          # torch tensors, in order (a1 ...)
        self.records = []         # their records for Lua

    def tensor(self, t, kind):
        if t.dtype not in DTYPES:
            raise Untranslatable('a %s tensor' % t.dtype)
        t = t.detach()
        if kind == 'index' and t.dtype == torch.int64:
            t = torch.where(t >= 0, t + 1, t)
        self.inputs.append(t)
        self.records.append({'dtype': DTYPES[t.dtype], 'shape': list(t.shape), 'values': t.reshape(-1).tolist()})
        return 'a%d' % len(self.inputs)

    def value(self, v, kind):
        if isinstance(v, torch.Tensor):
            return self.tensor(v, kind)
        if v is None:
            return 'nil'
        if isinstance(v, bool):
            return lua_num(v)
        if isinstance(v, int):
            if kind in ('dim', 'index') and v >= 0:
                return str(v + 1)
            return str(v)
        if isinstance(v, float):
            return lua_num(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, torch.dtype):
            if v not in DTYPES:
                raise Untranslatable('dtype %s' % v)
            return "'%s'" % DTYPES[v]
        if isinstance(v, (list, tuple, torch.Size)):
            inner = 'dim' if kind == 'dimlist' else kind
            return '{' + ', '.join(self.value(x, inner) for x in v) + '}'
        if isinstance(v, torch.device):
            return "'%s'" % v
        if isinstance(v, torch.memory_format) and v == torch.preserve_format:
            return 'nil'
        raise Untranslatable('a %s argument' % type(v).__name__)


def lua_tensor(rec):
    """A Lua expression that makes the recorded tensor."""
    dtype = "{dtype = '%s'}" % rec['dtype']
    if 0 in rec['shape']:
        return 'torch.empty(%s, %s)' % (lua_value(rec['shape']), dtype)
    if not rec['shape']:
        return 'torch.tensor(%s, %s)' % (lua_num(rec['values'][0]), dtype)
    t = 'torch.tensor(%s, %s)' % (lua_value(rec['values']), dtype)
    return t if len(rec['shape']) == 1 else '%s:view(%s)' % (t, lua_value(rec['shape']))


# ---------------------------------------------------------------------------------------
# One op

def torch_function(name):
    obj = torch
    for part in name.split('.'):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def spelling(op, rule):
    """How the op is called: ('fn', python function, lua path) or ('method', name, name) ..."""
    lua = rule.get('lua')
    if lua and lua.startswith('op:'):
        return 'op', op.op, lua[3:]
    if lua and lua.startswith('attr:'):
        return 'attr', None, lua[5:]
    if lua and lua.startswith('method:'):
        return 'method', lua[7:], lua[7:]
    fn = torch_function(op.name)
    if fn is not None and callable(fn) and (op.op is fn or 'order' in rule):
        return 'fn', fn, 'torch.' + op.name
    if op.method_variant is not None:
        return 'method', op.name, op.name
    if fn is not None:
        raise Untranslatable("the OpInfo calls torch.%s through a function of its own" % op.name)
    raise Untranslatable('PyTorch has neither torch.%s nor a method of that name' % op.name)


def exists(how, name):
    """A Lua expression that is nil when dplua lacks the op."""
    if how == 'fn':
        return name
    if how in ('method', 'attr'):
        return "a1[%s]" % json.dumps(name)
    return None


def call_torch(how, fn, name, values, kwargs):
    if how == 'fn':
        return fn(*values, **kwargs)
    if how == 'method':
        return getattr(values[0], name)(*values[1:], **kwargs)
    if how == 'attr':
        return getattr(values[0], name)
    return fn(*values, **kwargs)        # an operator: the OpInfo's own function


def translate(op, rule, how, name, sample):
    """(Case, lua expression, inputs for PyTorch, kwargs for PyTorch) of a sample."""
    values = [sample.input] + list(sample.args)
    if 'order' in rule:
        values = [values[i] for i in rule['order']] + values[len(rule['order']):]
    kwargs = dict(sample.kwargs)
    if 'out' in kwargs:
        raise Untranslatable('an out= tensor')
    if how == 'attr':
        names = ['self']
    elif how == 'op':
        names = ['self', 'other']
        if len(values) != 2 or kwargs:
            raise Untranslatable('an operator with %d operands' % len(values))
    else:
        fn = torch_function(op.name) if how == 'fn' else None
        aten = op.aten_name if how == 'fn' else name
        names = rule.get('names') or arg_names(fn, (aten or name).replace('.', '_'), values, kwargs)
    kinds = dict(ARG_KINDS)
    kinds.update(rule.get('args', {}))
    case = Case()
    lua_args = [case.value(v, kinds.get(n, 'plain')) for v, n in zip(values, names)]
    # PyTorch runs on contiguous copies of the same tensors, as dplua gets them
    py_values = [contiguous(v) for v in values]
    py_kwargs = {k: contiguous(v) for k, v in kwargs.items()}
    if kwargs:
        parts = []
        for k, v in kwargs.items():
            parts.append('%s = %s' % (k, case.value(v, kinds.get(k, 'plain'))))
        lua_args.append('{' + ', '.join(parts) + '}')
    while len(lua_args) > 1 and lua_args[-1] == 'nil':
        lua_args.pop()
    if how == 'fn':
        expr = '%s(%s)' % (name, ', '.join(lua_args))
    elif how == 'method':
        expr = '%s:%s(%s)' % (lua_args[0], name if name.isidentifier() and name != 'repeat' else name,
                              ', '.join(lua_args[1:]))
        if name == 'repeat':
            expr = "%s['repeat'](%s)" % (lua_args[0], ', '.join(lua_args))
    elif how == 'attr':
        expr = '%s.%s' % (lua_args[0], name)
    else:
        expr = '%s %s %s' % (lua_args[1], name, lua_args[0])    # reflected: other OP self
    return case, expr, py_values, py_kwargs


def contiguous(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone().contiguous()
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return type(v)(contiguous(x) for x in v) if not hasattr(v, '_fields') else v
    return v


def tensors_in(values):
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [x for x in v if isinstance(x, torch.Tensor)]
    return out


def record_out(o, index, inputs):
    """PyTorch's result as a record for compare.lua, with its alias."""
    if isinstance(o, torch.Tensor):
        if o.dtype not in DTYPES:
            raise Untranslatable('a %s result' % o.dtype)
        d = o.detach()
        if index and d.dtype == torch.int64:
            d = d + 1
        alias = 0
        if o.numel():
            for k, t in enumerate(inputs):
                if t.numel() and t.dtype == o.dtype and t.storage().data_ptr() == o.storage().data_ptr():
                    alias = k + 1
        return {'dtype': DTYPES[d.dtype], 'shape': list(d.shape), 'values': d.reshape(-1).tolist(), 'alias': alias}
    if o is None:
        return {'none': True}
    if isinstance(o, bool) or isinstance(o, (int, float)):
        return {'number': o}
    raise Untranslatable('a %s result' % type(o).__name__)


def outputs_of(out):
    if isinstance(out, (tuple, list)):
        return list(out), True
    return [out], False


def too_big(sample):
    n = 0
    for t in tensors_in([sample.input] + list(sample.args) + list(sample.kwargs.values())):
        n += t.numel()
    return n > MAX_ELEMENTS


def run_sample(op, rule, how, fn, name, sample, dtype, grads):
    case, expr, values, kwargs = translate(op, rule, how, name, sample)
    inputs = tensors_in(values) + tensors_in(list(kwargs.values()))
    out = call_torch(how, fn, name, values, kwargs)
    outs, multi = outputs_of(out)
    index_out = rule.get('index_out', [])
    if 'index_out_if' in rule:              # an output that is there only with that option
        name_, at = rule['index_out_if']
        index_out = at if sample.kwargs.get(name_) else []
    recs = [record_out(o, index_out == 'all' or i in index_out, inputs) for i, o in enumerate(outs)]
    if rule.get('ties') and any(t.numel() != t.unique().numel() for t in inputs[:1]):
        for i, r in enumerate(recs):          # which of equal elements is unspecified: shape only
            if (index_out == 'all' or i in index_out) and 'values' in r:
                r['shape_only'] = True
    for i in rule.get('shape_only', []):
        if i < len(recs) and 'values' in recs[i]:
            recs[i]['shape_only'] = True
    c_fields = None
    if hasattr(out, 'n_fields'):            # torch.return_types: the field names in order
        c_fields = [k for k in dir(out) if not k.startswith('_') and k not in STRUCTSEQ]
        c_fields.sort(key=lambda k: [i for i, v in enumerate(out) if v is getattr(out, k)][:1] or [99])
    c = {'lua': expr, 'inputs': case.records, 'outs': recs, 'multi': multi, 'dtype': DTYPES[dtype],
         'fields': c_fields,
         'check': exists(how, name)}
    if rule.get('random'):
        c['random'] = True
    view = rule.get('view', None)
    c['view'] = view
    if grads and not rule.get('random') and not rule.get('no_grad'):
        g = gradients(how, fn, name, sample, rule, values, kwargs, outs)
        if g:
            c['grad'] = g
    return c


def gradients(how, fn, name, sample, rule, values, kwargs, outs):
    """The gradients of sum(out * cotangent) w.r.t. the float64 tensor inputs, or None."""
    leaves = []

    def leaf(v):
        if isinstance(v, torch.Tensor) and v.dtype == torch.float64:
            v = v.detach().clone().requires_grad_(True)
            leaves.append(v)
        return v
    vals = [leaf(v) if not isinstance(v, list) else [leaf(x) for x in v] for v in values]
    kw = {k: leaf(v) for k, v in kwargs.items()}
    if not leaves:
        return None
    # the leaves in the order the Lua side numbers its inputs (a1 ...): positional first
    try:
        out = call_torch(how, fn, name, vals, kw)
    except Exception:                                   # noqa: BLE001
        return None
    res, _ = outputs_of(out)
    gen = torch.Generator().manual_seed(1234)
    loss, cots, used = 0, [], []
    for i, o in enumerate(res):
        if isinstance(o, torch.Tensor) and o.requires_grad and o.dtype == torch.float64 and \
                i not in rule.get('shape_only', []):          # a sign-free gradient only
            c = torch.randn(o.shape, generator=gen, dtype=torch.float64)
            loss = loss + (o * c).sum()
            cots.append({'dtype': 'float64', 'shape': list(o.shape), 'values': c.reshape(-1).tolist()})
            used.append(i + 1)
    if not used:
        return None
    try:
        gs = torch.autograd.grad(loss, leaves, allow_unused=True)
    except Exception:                                   # noqa: BLE001
        return None
    # which inputs (their numbers a1 ...) are the leaves
    order = [id(t) for t in leaves]
    flat = []
    for v in vals:
        if isinstance(v, torch.Tensor):
            flat.append(v)
        elif isinstance(v, (list, tuple)):
            flat += [x for x in v if isinstance(x, torch.Tensor)]
    flat += [v for v in kw.values() if isinstance(v, torch.Tensor)]
    slots = [k + 1 for k, t in enumerate(flat) if id(t) in order]
    return {'leaves': slots, 'outs': used, 'cotangents': cots,
            'grads': [record_out(g, False, []) if g is not None else {'none': True} for g in gs]}


def op_cases(op, samples_per_dtype, seed):
    full = op.name + ('.' + op.variant_test_name if op.variant_test_name else '')
    rule = rule_of(full)
    entry = {'op': full, 'cases': [], 'skipped': {}}
    if rule.get('untranslatable'):
        entry['untranslatable'] = rule['untranslatable']
        return entry
    try:
        how, fn, name = spelling(op, rule)
    except Untranslatable as e:
        entry['untranslatable'] = str(e)
        return entry
    entry['lua_name'] = name if how != 'op' else 'operator ' + name
    entry['how'] = how
    supported = op.supported_dtypes('cpu')
    for dtype in DTYPES:
        if dtype not in supported:
            continue
        grads = dtype == torch.float64 and op.supports_autograd
        torch.manual_seed(seed)
        try:
            samples = op.sample_inputs('cpu', dtype, requires_grad=False)
            taken = 0
            for sample in samples:
                if taken >= samples_per_dtype:
                    break
                if too_big(sample):
                    continue
                try:
                    c = run_sample(op, rule, how, fn, name, sample, dtype, grads)
                except Untranslatable as e:
                    entry['skipped'][str(e)] = entry['skipped'].get(str(e), 0) + 1
                    continue
                except Exception as e:                 # noqa: BLE001 (PyTorch refused its own sample)
                    entry['skipped']['PyTorch raised: %s' % type(e).__name__] = \
                        entry['skipped'].get('PyTorch raised: %s' % type(e).__name__, 0) + 1
                    continue
                taken += 1
                entry['cases'].append(c)
        except Exception as e:                         # noqa: BLE001
            entry['skipped']['sample_inputs raised: %s' % str(e)[:80]] = 1
    # error inputs: each must raise in dplua too
    try:
        errors = list(op.error_inputs('cpu')) if op.error_inputs_func else []
    except Exception:                                  # noqa: BLE001
        errors = []
    for ei in errors[:samples_per_dtype * 2]:
        s = ei.sample_input
        try:
            case, expr, values, kwargs = translate(op, rule, how, name, s)
        except Exception:                              # noqa: BLE001 (untranslatable, or meta tensors)
            continue
        try:
            call_torch(how, fn, name, values, kwargs)
            continue                                    # PyTorch's copy did not raise either
        except (TypeError, AttributeError):
            continue                                    # Python's argument parsing: no Lua twin
        except Exception as e:                          # noqa: BLE001
            msg = '%s: %s' % (type(e).__name__, str(e).strip().split('\n')[0][:200])
        entry['cases'].append({'lua': expr, 'inputs': case.records, 'error': msg, 'dtype': 'error',
                               'check': exists(how, name)})
    if not entry['cases'] and not entry['skipped']:
        entry['skipped']['no sample in float32, float64, int64 or bool'] = 1
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--samples', type=int, default=5, help='samples per op per dtype')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--ops', help='comma-separated op names (default: every op)')
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    import warnings
    warnings.filterwarnings('ignore')
    from torch.testing._internal.common_methods_invocations import op_db
    want = set(args.ops.split(',')) if args.ops else None
    entries = []
    for op in op_db:
        full = op.name + ('.' + op.variant_test_name if op.variant_test_name else '')
        if want is not None and full not in want:
            continue
        entries.append(op_cases(op, args.samples, args.seed))
    cases = []
    for e in entries:
        for c in e['cases']:
            c['op'] = e['op']
            c['id'] = len(cases) + 1
            cases.append(c)
    with open(args.out + '.json', 'w') as f:
        json.dump({'ops': [{k: v for k, v in e.items() if k != 'cases'} for e in entries], 'cases': cases}, f)
    with open(args.out + '.lua', 'w') as f:
        f.write('return {\n')
        for c in cases:
            f.write(lua_value({k: v for k, v in c.items() if k != 'dtype'}) + ',\n')
        f.write('}\n')


if __name__ == '__main__':
    main()
