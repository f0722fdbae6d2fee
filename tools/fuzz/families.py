#!/usr/bin/python3
"""Random programs over the second wave's op families, with PyTorch's results: the
differential fuzzer's second generator (gen.py makes the basic tensor and autograd ones; the
driver, tools/fuzz/fuzz, runs both, and run.lua replays either).

Each program picks one family (FAMILIES below) and calls its ops once or twice with random
options in the spellings users write: PyTorch's positional order, or the rest in an options
table (dplua) and keywords (PyTorch); 1-based dims and indices in Lua.  Inputs are hostile
now and then: 0- and 1-sized dims, transposed, strided or expanded views, NaN and inf in the
programs that only go forward.  Autograd programs make float64 leaves, weigh each float
output by a constant tensor, sum, run backward and record the leaves' grads.

float16 and bfloat16 programs run the elementwise ops and reductions of src/ops.def on half
inputs; PyTorch 1.13's CPU lacks many half kernels, so the reference computes in float32 from
the same (exactly representable) values and rounds once to the input's dtype.

The program's kind is "family:NAME"; the driver counts findings per family and class.
"""
import math
import random

import torch
import torch.nn.functional as F

import gen
from gen import lua_num, py_num, lua_dim, record, DTYPE_NAME, UNARY, BINARY, REDUCE


# ---------------------------------------------------------------------------------------
# Arguments in both languages: a value is a Python object, written for each side here

class Var(str):
    """A variable's name as an argument (written as it is on both sides)."""


class Raw:
    """An argument already written for each side."""
    def __init__(self, lua, py):
        self.lua, self.py = lua, py


def L(v):
    if isinstance(v, Raw):
        return v.lua
    if isinstance(v, Var):
        return str(v)
    if v is None:
        return 'nil'
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join('false' if x is None else L(x) for x in v) + '}'
    return lua_num(v)


def P(v):
    if isinstance(v, Raw):
        return v.py
    if isinstance(v, Var):
        return str(v)
    if v is None:
        return 'None'
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return '[' + ', '.join(P(x) for x in v) + ']'
    if isinstance(v, tuple):
        return '(' + ', '.join(P(x) for x in v) + (',)' if len(v) == 1 else ')')
    return py_num(v)


def call(rng, lua_fn, py_fn, first, params, chosen, max_pos=None):
    """Both spellings of a call: first (the required arguments, values), then params
    [(name, default)] in PyTorch's positional order of which chosen {name: value} are set.
    A random number of the leading params go positionally (defaults filled in), the other
    chosen ones as an options table (Lua) and keywords (PyTorch)."""
    names = [n for n, _ in params]
    last = max([names.index(n) + 1 for n in chosen if n in names] + [0])
    cut = rng.randint(0, min(last, len(names) if max_pos is None else max_pos))
    if lua_fn.startswith('F.'):
        lua_fn = 'nn.functional.' + lua_fn[2:]
    lua_args, py_args = [L(v) for v in first], [P(v) for v in first]
    for name, default in params[:cut]:
        v = chosen.get(name, default)
        lua_args.append(L(v))
        py_args.append(P(v))
    opts = [(n, chosen[n]) for n in names[cut:] if n in chosen] + [(n, v) for n, v in chosen.items() if n not in names]
    if opts:
        lua_args.append('{' + ', '.join('%s = %s' % (n, L(v)) for n, v in opts) + '}')
        py_args += ['%s=%s' % (n, P(v)) for n, v in opts]
    return '%s(%s)' % (lua_fn, ', '.join(lua_args)), '%s(%s)' % (py_fn, ', '.join(py_args))


def sdpa_reference(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """PyTorch 2's F.scaled_dot_product_attention (absent from 1.13), as its docs write it."""
    L_, S = q.size(-2), k.size(-2)
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L_, S, dtype=q.dtype)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError('is_causal with attn_mask')
        bias = bias.masked_fill(torch.ones(L_, S, dtype=torch.bool).tril().logical_not(), float('-inf'))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float('-inf'))
        else:
            bias = bias + attn_mask
    w = torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1)
    return w @ v


# ---------------------------------------------------------------------------------------
# The generator

class FamilyGen(gen.Gen):
    def __init__(self, rng, autograd, family):
        super().__init__(rng, autograd)
        self.family = family
        self.objs = {}           # modules: name -> object (never recorded)
        self.shift = {}          # name -> how its PyTorch values read in Lua (1-based indices)
        self.outs = []           # float outputs that the loss weighs

    # Running a step: as Gen.run, with modules kept aside and index values shifted
    def run(self, lua, py, defines, reads, root=None, writes=None, objs=(), outs=True):
        env = {'torch': torch, 'F': F, 'nn': torch.nn, 'sdpa_reference': sdpa_reference}
        env.update(self.vars)
        env.update(self.objs)
        step = {'lua': lua, 'py': py, 'defines': list(defines) + list(objs), 'reads': reads}
        try:
            exec(py, env)
        except Exception as e:                     # noqa: BLE001 (any PyTorch error counts)
            step['error'] = '%s: %s' % (type(e).__name__, str(e).strip().split('\n')[0])
            self.steps.append(step)
            return False
        results = []
        for name in defines:
            t = env[name]
            if isinstance(t, torch.Tensor) and t.dtype not in DTYPE_NAME:
                return False
            r = record(name, t)
            if name in self.shift and 'values' in r:
                r['values'] = [self.shift[name](x) for x in r['values']]
            results.append(r)
        for name in defines:
            self.vars[name] = env[name]
            self.roots[name] = root if root is not None else name
            t = env[name]
            if outs and isinstance(t, torch.Tensor) and t.requires_grad:
                self.outs.append(name)
        for name in objs:
            self.objs[name] = env[name]
        if writes is not None:
            step['writes'] = writes
            self.inplace = True
        step['results'] = results
        step['roots'] = {n: self.roots.get(n, n) for n in defines}
        self.steps.append(step)
        return True

    def values(self, n, dtype='float64', hostile=None, lo=-3.0, hi=3.0, distinct=False):
        r = self.rng
        hostile = (not self.autograd) if hostile is None else hostile
        if dtype == 'bool':
            return [r.random() < 0.5 for _ in range(n)]
        if distinct:
            xs = r.sample(range(-4 * n - 4, 4 * n + 4), n)
            return [x / 4 for x in xs]
        out = []
        for _ in range(n):
            p = r.random()
            if hostile and p < 0.03:
                out.append(r.choice([math.nan, math.inf, -math.inf]))
            elif p < 0.3:
                out.append(float(r.randint(int(lo), int(hi))))
            else:
                out.append(round(r.uniform(lo, hi), 6))
        return out

    def tensor(self, shape, dtype='float64', grad=None, values=None, hostile_layout=True, **kw):
        """A float tensor variable of shape: a leaf (requiring grad in autograd programs), or
        now and then a transposed, strided or expanded view of one."""
        r = self.rng
        grad = self.autograd if grad is None else grad
        n = math.prod(shape)
        mode = 'plain'
        if hostile_layout and values is None and r.random() < 0.3:
            mode = r.choice(['transpose', 'stride', 'expand'])
            if mode == 'transpose' and len(shape) < 2:
                mode = 'stride'
            if mode == 'expand' and (not shape or kw.get('distinct')):
                mode = 'plain'           # (expanding repeats values: no longer distinct)
        if mode == 'plain':
            base_shape = list(shape)
        elif mode == 'transpose':
            i, j = sorted(r.sample(range(len(shape)), 2))
            base_shape = list(shape)
            base_shape[i], base_shape[j] = base_shape[j], base_shape[i]
        elif mode == 'stride':
            base_shape = list(shape) + [2]
        else:
            d = r.randrange(len(shape))
            base_shape = list(shape)
            base_shape[d] = 1
        vals = values if values is not None else self.values(math.prod(base_shape), dtype, **kw)
        name = self.new_name()
        lua = 'torch.tensor(%s, {dtype = %r}):reshape(%s)' % (gen.lua_list(vals), dtype, gen.lua_list(base_shape))
        py = 'torch.tensor(%s, dtype=torch.%s).reshape(%s)' % (gen.py_list(vals), dtype, gen.py_list(base_shape))
        if grad:
            lua, py = lua + ':requires_grad_()', py + '.requires_grad_()'
        if not self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [], outs=False):
            return None
        if grad:
            self.leaves.append(name)
        if mode == 'plain':
            return Var(name)
        view = self.new_name()
        if mode == 'transpose':
            lua, py = '%s:transpose(%d, %d)' % (name, i + 1, j + 1), '%s.transpose(%d, %d)' % (name, i, j)
        elif mode == 'stride':
            k = r.randint(0, 1)
            lua, py = '%s:select(-1, %d)' % (name, k + 1), '%s.select(-1, %d)' % (name, k)
        else:
            lua, py = '%s:expand(%s)' % (name, gen.lua_list(shape)), '%s.expand(%s)' % (name, gen.py_list(shape))
        self.run('%s = %s' % (view, lua), '%s = %s' % (view, py), [view], [name], root=name, outs=False)
        return Var(view)

    def index(self, shape, lo, hi, shift=lambda x: x + 1, dtype='int64', unique=False):
        """An int64 tensor of shape with values in [lo, hi] (PyTorch's numbering); Lua's are
        shift(value) (1-based)."""
        n = math.prod(shape)
        if unique:
            vals = self.rng.sample(range(lo, hi + 1), n)
        else:
            vals = [self.rng.randint(lo, hi) for _ in range(n)]
        name = self.new_name()
        self.shift[name] = shift
        lua = 'torch.tensor(%s, {dtype = %r}):reshape(%s)' % (gen.lua_list([shift(v) for v in vals]), dtype,
                                                             gen.lua_list(shape))
        py = 'torch.tensor(%s, dtype=torch.%s).reshape(%s)' % (gen.py_list(vals), dtype, gen.py_list(shape))
        if self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [], outs=False):
            return Var(name)
        return None

    def mask(self, shape):
        name = self.new_name()
        vals = self.values(math.prod(shape), 'bool')
        lua = 'torch.tensor(%s, {dtype = "bool"}):reshape(%s)' % (gen.lua_list(vals), gen.lua_list(shape))
        py = 'torch.tensor(%s, dtype=torch.bool).reshape(%s)' % (gen.py_list(vals), gen.py_list(shape))
        self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [], outs=False)
        return Var(name)

    def step(self, lua_expr, py_expr, reads, n_out=1, index_outs=(), extra_py='', lua_lhs=None):
        """name(s) = expression on both sides; outputs whose position is in index_outs are
        PyTorch indices, shifted by one in PyTorch's line."""
        names = [self.new_name() for _ in range(n_out)]
        lhs = ', '.join(names)
        py = '%s = %s' % (lhs, py_expr)
        for k in index_outs:
            py += '; %s = %s + 1' % (names[k], names[k])
        if extra_py:
            py += '; ' + extra_py
        ok = self.run('%s = %s' % (lua_lhs or lhs, lua_expr), py, names, [x for x in reads if x])
        return names if ok else None

    def sizes(self, n, lo=0, hi=4):
        """n sizes, mostly small and positive; 0 and 1 now and then."""
        r = self.rng
        return [r.choice([lo, 1] + list(range(max(lo, 1), hi + 1)) * 3) for _ in range(n)]

    def finish(self):
        """Autograd programs: the loss (each float output weighed by a constant), backward,
        the leaves' grads."""
        if not self.autograd or not self.leaves:
            return
        outs = [n for n in self.outs if self.vars.get(n) is not None and self.vars[n].is_floating_point()]
        if not outs:
            return
        outs = outs[-3:]
        terms_lua, terms_py, reads = [], [], list(outs)
        for o in outs:
            w = self.tensor(list(self.vars[o].shape), grad=False, hostile_layout=False, hostile=False)
            if w is None:
                return
            reads.append(w)
            terms_lua.append('(%s * %s):sum()' % (o, w))
            terms_py.append('(%s * %s).sum()' % (o, w))
        if not self.run('loss = %s' % ' + '.join(terms_lua), 'loss = %s' % ' + '.join(terms_py), ['loss'], reads,
                        outs=False):
            return
        grads = ['g%s' % leaf[1:] for leaf in self.leaves]
        assign = '; '.join('%s = %s.grad' % (g, leaf) for g, leaf in zip(grads, self.leaves))
        self.run('loss:backward(); %s' % assign, 'loss.backward(); %s' % assign, grads, ['loss'] + self.leaves,
                 outs=False)

    # -----------------------------------------------------------------------------------
    # Families

    def conv(self):
        r = self.rng
        d = r.choice([1, 2])
        transposed = r.random() < 0.35
        groups = r.choice([1, 1, 2])
        cin, cout = groups * r.choice([1, 2]), groups * r.choice([1, 2])
        k = [r.choice([1, 2, 3]) for _ in range(d)]
        spatial = [r.choice([0, 1, 3, 4, 5, 6]) if r.random() < 0.1 else r.choice([3, 4, 5, 6]) for _ in range(d)]
        batch = r.choice([[], [1], [2], [2], [0]])
        x = self.tensor(batch + [cin] + spatial)
        w_shape = ([cin, cout // groups] if transposed else [cout, cin // groups]) + k
        w = self.tensor(w_shape)
        b = self.tensor([cout]) if r.random() < 0.6 else None
        chosen = {}
        if b is not None:
            chosen['bias'] = b
        tup = lambda v: v if r.random() < 0.5 else tuple([v] * d)
        if r.random() < 0.5:
            chosen['stride'] = tup(r.choice([1, 2, 3]))
        if r.random() < 0.5:
            if not transposed and r.random() < 0.3:
                chosen['padding'] = r.choice(['same', 'valid'])
            else:
                chosen['padding'] = tup(r.choice([0, 1, 2]))
        if r.random() < 0.4:
            chosen['dilation'] = tup(r.choice([1, 2]))
        if groups > 1 or r.random() < 0.1:
            chosen['groups'] = groups
        if transposed:
            if r.random() < 0.4:
                chosen['output_padding'] = tup(r.choice([0, 1]))
            params = [('bias', None), ('stride', 1), ('padding', 0), ('output_padding', 0), ('groups', 1),
                      ('dilation', 1)]
            fn = 'conv_transpose%dd' % d
        else:
            params = [('bias', None), ('stride', 1), ('padding', 0), ('dilation', 1), ('groups', 1)]
            fn = 'conv%dd' % d
        lua, py = call(r, 'F.' + fn, 'F.' + fn, [x, w], params, chosen)
        self.step(lua, py, [x, w, b])

    def pool(self):
        r = self.rng
        kind = r.choice(['max', 'max', 'avg', 'avg', 'adaptive_max', 'adaptive_avg'])
        d = r.choice([1, 2])
        spatial = [r.choice([0, 1, 2]) if r.random() < 0.1 else r.choice([2, 3, 4, 5, 6]) for _ in range(d)]
        batch = r.choice([[], [1], [2]])
        x = self.tensor(batch + [r.choice([1, 2])] + spatial)
        tup = lambda v: v if r.random() < 0.5 or d == 1 else tuple([v] * d)
        if kind.startswith('adaptive'):
            out = [r.choice([1, 2, 3, 4]) for _ in range(d)]
            size = out[0] if d == 1 or r.random() < 0.3 else tuple(None if r.random() < 0.2 else o for o in out)
            chosen = {}
            params = []
            if kind == 'adaptive_max':
                params = [('return_indices', False)]
                if r.random() < 0.5:
                    chosen['return_indices'] = True
            fn = 'F.%s_pool%dd' % (kind, d)
            lua, py = call(r, fn, fn, [x, size], params, chosen)
            ri = chosen.get('return_indices')
            self.step(lua, py, [x], n_out=2 if ri else 1, index_outs=[1] if ri else [])
            return
        kk = [r.choice([1, 2, 3]) for _ in range(d)]
        chosen = {}
        kernel = kk[0] if d == 1 else (kk[0] if r.random() < 0.3 else tuple(kk))
        if r.random() < 0.6:
            chosen['stride'] = tup(r.choice([1, 2, 3]))
        if r.random() < 0.5:
            chosen['padding'] = tup(r.choice([0, 1]))
        if r.random() < 0.4:
            chosen['ceil_mode'] = r.random() < 0.7
        fn = 'F.%s_pool%dd' % (kind, d)
        if kind == 'max':
            if r.random() < 0.4:
                chosen['dilation'] = tup(r.choice([1, 2]))
            ri = r.random() < 0.4
            if ri:
                chosen['return_indices'] = True
            params = [('stride', None), ('padding', 0), ('dilation', 1), ('ceil_mode', False),
                      ('return_indices', False)]
            lua, py = call(r, fn, fn, [x, kernel], params, chosen)
            self.step(lua, py, [x], n_out=2 if ri else 1, index_outs=[1] if ri else [])
        else:
            if r.random() < 0.4:
                chosen['count_include_pad'] = r.random() < 0.5
            params = [('stride', None), ('padding', 0), ('ceil_mode', False), ('count_include_pad', True)]
            if d == 2:
                params.append(('divisor_override', None))
                if r.random() < 0.2:
                    chosen['divisor_override'] = r.choice([1, 2, 3])
            lua, py = call(r, fn, fn, [x, kernel], params, chosen)
            self.step(lua, py, [x])

    def norm(self):
        r = self.rng
        kind = r.choice(['batch', 'batch', 'layer', 'group', 'instance'])
        if kind == 'batch':
            c = r.choice([1, 2, 3])
            shape = [r.choice([1, 2, 3, 4])] + [c] + [r.choice([1, 2, 3]) for _ in range(r.choice([0, 1, 2]))]
            x = self.tensor(shape)
            training = r.random() < 0.6
            rm = self.tensor([c], grad=False, hostile_layout=False, hostile=False) if not training or r.random() < 0.7 else None
            rv = None
            if rm is not None:
                rv = self.tensor([c], grad=False, hostile_layout=False, hostile=False,
                                 values=[round(r.uniform(0.2, 2), 4) for _ in range(c)])
            chosen = {'training': training} if training or r.random() < 0.3 else {}
            # (contiguous: PyTorch 1.13's batch_norm backward reads a strided weight wrongly)
            if r.random() < 0.5:
                chosen['weight'] = self.tensor([c], hostile_layout=False)
            if r.random() < 0.5:
                chosen['bias'] = self.tensor([c], hostile_layout=False)
            if r.random() < 0.3:
                chosen['momentum'] = r.choice([0.1, 0.5, 1.0])
            if r.random() < 0.3:
                chosen['eps'] = r.choice([1e-5, 1e-3, 0.1])
            params = [('weight', None), ('bias', None), ('training', False), ('momentum', 0.1), ('eps', 1e-5)]
            # PyTorch 1.13's training backward is wrong for a strided input: its reference
            # gets a contiguous copy (the same values)
            lua, py = call(r, 'F.batch_norm', 'F.batch_norm', [Raw(x, x + '.contiguous()'), rm, rv], params, chosen)
            reads = [x, rm, rv] + [v for v in chosen.values() if isinstance(v, Var)]
            if rm is not None:
                out, m2, v2 = self.new_name(), self.new_name(), self.new_name()
                self.run('%s = %s; %s = %s:clone(); %s = %s:clone()' % (out, lua, m2, rm, v2, rv),
                         '%s = %s; %s = %s.clone(); %s = %s.clone()' % (out, py, m2, rm, v2, rv),
                         [out, m2, v2], [x for x in reads if x])
            else:
                self.step(lua, py, reads)
        elif kind == 'layer':
            nd = r.choice([1, 1, 2])
            shape = [r.choice([1, 2, 3]) for _ in range(r.choice([0, 1, 2]))] + [r.choice([1, 2, 3, 4]) for _ in range(nd)]
            x = self.tensor(shape)
            ns = shape[-nd:]
            # an integer is dplua's spelling of a one-dim shape (PyTorch wants a tuple or list)
            norm_shape = Raw(lua_num(ns[0]), P((ns[0],))) if nd == 1 and r.random() < 0.3 else \
                (tuple(ns) if r.random() < 0.5 else list(ns))
            chosen = {}
            if r.random() < 0.5:
                chosen['weight'] = self.tensor(ns)
            if r.random() < 0.5:
                chosen['bias'] = self.tensor(ns)
            if r.random() < 0.3:
                chosen['eps'] = r.choice([1e-5, 0.1])
            lua, py = call(r, 'F.layer_norm', 'F.layer_norm', [x, norm_shape],
                           [('weight', None), ('bias', None), ('eps', 1e-5)], chosen)
            self.step(lua, py, [x] + [v for v in chosen.values() if isinstance(v, Var)])
        elif kind == 'group':
            g = r.choice([1, 2, 3])
            c = g * r.choice([1, 2])
            shape = [r.choice([1, 2])] + [c] + [r.choice([1, 2, 3]) for _ in range(r.choice([0, 1, 2]))]
            x = self.tensor(shape)
            chosen = {}
            if r.random() < 0.5:
                chosen['weight'] = self.tensor([c])
            if r.random() < 0.5:
                chosen['bias'] = self.tensor([c])
            if r.random() < 0.3:
                chosen['eps'] = r.choice([1e-5, 0.1])
            lua, py = call(r, 'F.group_norm', 'F.group_norm', [x, g],
                           [('weight', None), ('bias', None), ('eps', 1e-5)], chosen)
            self.step(lua, py, [x] + [v for v in chosen.values() if isinstance(v, Var)])
        else:
            c = r.choice([1, 2, 3])
            shape = [r.choice([1, 2])] + [c] + [r.choice([2, 3, 4]) for _ in range(r.choice([1, 2]))]
            x = self.tensor(shape)
            chosen = {}
            if r.random() < 0.4:
                chosen['weight'] = self.tensor([c])
                chosen['bias'] = self.tensor([c])
            if r.random() < 0.3:
                chosen['eps'] = r.choice([1e-5, 0.1])
            lua, py = call(r, 'F.instance_norm', 'F.instance_norm', [x],
                           [('running_mean', None), ('running_var', None), ('weight', None), ('bias', None),
                            ('use_input_stats', True), ('momentum', 0.1), ('eps', 1e-5)], chosen)
            self.step(lua, py, [x] + [v for v in chosen.values() if isinstance(v, Var)])

    def loss(self):
        r = self.rng
        fn = r.choice(['cross_entropy', 'cross_entropy', 'nll_loss'])
        c = r.choice([1, 2, 3, 4])
        lead = r.choice([[], [r.choice([1, 2, 3, 0])], [2], [2, 1], [2, 2, 1]])
        extra = lead[1:]
        shape = (lead[:1] + [c] + extra) if lead else [c]
        x = self.tensor(shape)
        if fn == 'nll_loss' and r.random() < 0.7:
            lx = self.step('%s:log_softmax(%d)' % (x, 2 if lead else 1), 'torch.log_softmax(%s, %d)' % (x, 1 if lead else 0), [x])
            if lx is None:
                return
            x = Var(lx[0])
        tshape = lead[:1] + extra
        probs = fn == 'cross_entropy' and r.random() < 0.3
        chosen = {}
        if probs:
            t = self.tensor(shape, grad=False, hostile_layout=False, lo=0, hi=1, hostile=False)
        else:
            t = self.index(tshape, 0, c - 1)
            if r.random() < 0.3:
                ii = r.choice([0, c - 1, -1])
                chosen['ignore_index'] = Raw(lua_num(ii + 1), py_num(ii))
        if r.random() < 0.4:
            chosen['weight'] = self.tensor([c], grad=False, hostile_layout=False, lo=0, hi=2, hostile=False)
        if r.random() < 0.5:
            chosen['reduction'] = r.choice(['mean', 'sum', 'none'])
        if fn == 'cross_entropy' and r.random() < 0.3:
            chosen['label_smoothing'] = r.choice([0.0, 0.1, 0.5])
        params = [('weight', None)]
        lua, py = call(r, 'F.' + fn, 'F.' + fn, [x, t], params, chosen, max_pos=1)
        self.step(lua, py, [x, t] + [v for v in chosen.values() if isinstance(v, Var)])

    def embedding(self):
        r = self.rng
        num, dim = r.choice([1, 3, 5]), r.choice([1, 2, 3])
        w = self.tensor([num, dim], hostile_layout=False)
        idx = self.index(r.choice([[], [3], [2, 2], [0], [1, 4]]), 0, num - 1 if r.random() < 0.97 else num)
        chosen = {}
        if r.random() < 0.4:
            p = r.randint(-num, num - 1)
            chosen['padding_idx'] = Raw(lua_num(lua_dim(p)), py_num(p))
        if r.random() < 0.3:
            chosen['max_norm'] = r.choice([0.5, 1.0, 2.0])
            if r.random() < 0.5:
                chosen['norm_type'] = r.choice([1.0, 2.0, 3.0])
            if self.autograd:                     # max_norm renormalizes the weight in place
                wc = self.step('%s:clone()' % w, '%s.clone()' % w, [w])
                if wc is None:
                    return
                w = Var(wc[0])
        params = [('padding_idx', None), ('max_norm', None), ('norm_type', 2.0), ('scale_grad_by_freq', False)]
        lua, py = call(r, 'F.embedding', 'F.embedding', [idx, w], params, chosen)
        out = self.new_name()
        # max_norm renormalizes the rows of w in place: a write that reproducers keep
        self.run('%s = %s' % (out, lua), '%s = %s' % (out, py), [out], [idx, w],
                 writes=self.roots[w] if 'max_norm' in chosen else None)

    def interpolate(self):
        r = self.rng
        d = r.choice([1, 2])
        x = self.tensor([r.choice([1, 2]), r.choice([1, 2])] + [r.choice([1, 2, 3, 4]) for _ in range(d)])
        mode = r.choice(['nearest', 'linear' if d == 1 else 'bilinear'])
        if r.random() < 0.1:
            mode = r.choice(['nearest-exact', 'area', 'bicubic' if d == 2 else 'linear'])
        chosen = {'mode': mode}
        if r.random() < 0.5:
            s = [r.choice([1, 2, 3, 5]) for _ in range(d)]
            chosen['size'] = s[0] if r.random() < 0.4 else tuple(s)
        else:
            s = [r.choice([0.5, 1.5, 2.0, 2.5, 3.0]) for _ in range(d)]
            chosen['scale_factor'] = s[0] if r.random() < 0.5 else tuple(s)
            if r.random() < 0.3:
                chosen['recompute_scale_factor'] = r.random() < 0.5
        if mode in ('linear', 'bilinear', 'bicubic') and r.random() < 0.6:
            chosen['align_corners'] = r.random() < 0.5
        params = [('size', None), ('scale_factor', None), ('mode', 'nearest'), ('align_corners', None),
                  ('recompute_scale_factor', None)]
        lua, py = call(r, 'F.interpolate', 'F.interpolate', [x], params, chosen)
        self.step(lua, py, [x])

    def pad(self):
        r = self.rng
        mode = r.choice(['constant', 'constant', 'reflect', 'replicate', 'circular'])
        nd = r.choice([1, 2, 3, 4]) if mode == 'constant' else r.choice([2, 3, 3, 4])
        shape = [r.choice([1, 2, 3, 4]) if r.random() < 0.9 else 0 for _ in range(nd)]
        x = self.tensor(shape)
        npad = r.choice([1, 2]) if mode != 'constant' else r.randint(1, nd)
        pad = [r.choice([0, 1, 2, -1]) if mode == 'constant' else r.choice([0, 1, 2]) for _ in range(2 * npad)]
        chosen = {}
        if mode != 'constant' or r.random() < 0.4:
            chosen['mode'] = mode
        if mode == 'constant' and r.random() < 0.4:
            chosen['value'] = r.choice([0.0, 1.5, -2.0])
        padv = pad if r.random() < 0.5 else tuple(pad)
        lua, py = call(r, 'F.pad', 'F.pad', [x, padv], [('mode', 'constant'), ('value', None)], chosen)
        self.step(lua, py, [x])

    def fold(self):
        r = self.rng
        k = [r.choice([1, 2, 3]) for _ in range(2)]
        chosen = {}
        dil = [r.choice([1, 2]) for _ in range(2)] if r.random() < 0.3 else [1, 1]
        padd = [r.choice([0, 1]) for _ in range(2)] if r.random() < 0.4 else [0, 0]
        st = [r.choice([1, 2]) for _ in range(2)] if r.random() < 0.4 else [1, 1]
        for name, v in (('dilation', dil), ('padding', padd), ('stride', st)):
            if v != [1, 1] and name != 'padding' or v != [0, 0] and name == 'padding':
                chosen[name] = v[0] if v[0] == v[1] and r.random() < 0.5 else tuple(v)
        params = [('dilation', 1), ('padding', 0), ('stride', 1)]
        kernel = k[0] if k[0] == k[1] and r.random() < 0.5 else tuple(k)
        c = r.choice([1, 2])
        if r.random() < 0.5:
            x = self.tensor(r.choice([[], [1], [2]]) + [c] + [r.choice([2, 3, 4, 5]) for _ in range(2)])
            lua, py = call(r, 'F.unfold', 'F.unfold', [x, kernel], params, chosen)
            self.step(lua, py, [x])
        else:
            out = [r.choice([2, 3, 4, 5]) for _ in range(2)]
            blocks = [(out[i] + 2 * padd[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2)]
            nl = max(blocks[0], 0) * max(blocks[1], 0)
            x = self.tensor(r.choice([[], [1], [2]]) + [c * k[0] * k[1], nl])
            osize = out[0] if out[0] == out[1] and r.random() < 0.5 else tuple(out)
            lua, py = call(r, 'F.fold', 'F.fold', [x, osize, kernel], params, chosen)
            self.step(lua, py, [x])

    def sort(self):
        r = self.rng
        op = r.choice(['sort', 'argsort', 'topk', 'cumsum', 'cumprod', 'cummax', 'cummin', 'kthvalue', 'median',
                       'median_all', 'mode', 'msort'])
        shape = [r.choice([0, 1, 2, 3, 4]) if r.random() < 0.15 else r.choice([1, 2, 3, 4])
                 for _ in range(r.choice([0, 1, 1, 2, 2, 3]))]
        n = math.prod(shape)
        ties = op in ('cumsum', 'cumprod') or r.random() < 0.25
        indices = op not in ('cumsum', 'cumprod', 'msort', 'median_all')
        if op == 'mode':
            ties = True
        x = self.tensor(shape, distinct=not ties)
        t = self.vars[x]
        dim = self.dim(t)
        size = t.shape[dim] if t.dim() and -t.dim() <= dim < t.dim() else 1
        m = '%s:%s' % (x, op)
        keep = ties and op not in ('cummax', 'cummin') and indices  # indices of ties are not defined
        if op == 'sort' or op == 'argsort':
            chosen = {}
            if r.random() < 0.5:
                chosen['descending'] = r.random() < 0.6
            if r.random() < 0.3 or ties:
                chosen['stable'] = True
            params = [('dim', Raw(L(-1), P(-1))), ('descending', False)]
            if r.random() < 0.7:
                chosen['dim'] = Raw(L(lua_dim(dim)), P(dim))
            lua, py = call(r, 'torch.' + op, 'torch.' + op, [x], params, chosen)
            if op == 'sort':
                self.step(lua, py, [x], n_out=2, index_outs=[1])
            else:
                self.step(lua, py, [x], index_outs=[0])
            return
        if op == 'msort':
            self.step('torch.msort(%s)' % x, 'torch.msort(%s)' % x, [x])
            return
        if op == 'median_all':
            self.step('%s:median()' % x, '%s.median()' % x, [x])
            return
        keepdim = r.random() < 0.3
        kd_l, kd_p = (', true', ', True') if keepdim else ('', '')
        if op in ('cumsum', 'cumprod'):
            self.step('%s(%d)' % (m, lua_dim(dim)), 'torch.%s(%s, %d)' % (op, x, dim), [x])
        elif op in ('cummax', 'cummin'):
            self.step('%s(%d)' % (m, lua_dim(dim)), 'torch.%s(%s, %d)' % (op, x, dim), [x], n_out=2,
                      index_outs=[] if ties else [1])
            if ties:
                self.vars.pop(self.steps[-1]['defines'][1], None)
                self._drop_index()
        elif op == 'topk':
            k = r.randint(0, size) if r.random() < 0.95 else size + 1
            chosen = {}
            if r.random() < 0.6:
                chosen['dim'] = Raw(L(lua_dim(dim)), P(dim))
            if r.random() < 0.4:
                chosen['largest'] = r.random() < 0.5
            params = [('dim', Raw('-1', '-1')), ('largest', True), ('sorted', True)]
            lua, py = call(r, 'torch.topk', 'torch.topk', [x, k], params, chosen)
            self.step(lua, py, [x], n_out=2, index_outs=[1])
            if keep:
                self._drop_index()
        elif op == 'kthvalue':
            k = r.randint(1, max(size, 1)) if r.random() < 0.95 else size + 1
            self.step('%s(%d, %d%s)' % (m, k, lua_dim(dim), kd_l), 'torch.kthvalue(%s.contiguous(), %d, %d%s)' % (x, k, dim, kd_p),
                      [x], n_out=2, index_outs=[1])
            if keep:
                self._drop_index()
        else:            # median, mode (PyTorch 1.13's median(dim) of an expanded input reads
            # garbage: its reference gets a contiguous copy)
            self.step('%s(%d%s)' % (m, lua_dim(dim), kd_l), 'torch.%s(%s.contiguous(), %d%s)' % (op, x, dim, kd_p), [x], n_out=2,
                      index_outs=[1])
            if keep:
                self._drop_index()

    def _drop_index(self):
        """The last step's second result is an index among ties: not compared."""
        s = self.steps[-1]
        if 'results' in s:
            s['results'] = s['results'][:1]

    def indexing(self):
        r = self.rng
        op = r.choice(['take_rows', 'take_pairs', 'mask_read', 'index_put', 'gather', 'scatter', 'scatter_add',
                       'index_select', 'index_add', 'index_copy', 'index_fill', 'masked_fill', 'masked_scatter',
                       'masked_select', 'setitem'])
        shape = [r.choice([1, 2, 3, 4]) if r.random() < 0.9 else 0 for _ in range(r.choice([1, 2, 2, 3]))]
        x = self.tensor(shape)
        t = self.vars[x]
        if t is None:
            return
        neg = lambda n: (lambda: r.randint(-n, n - 1)) if n else (lambda: 0)
        if op == 'take_rows':
            n0 = shape[0]
            if n0 == 0:
                return
            idx = self.index(r.choice([[2], [3], [2, 2], [0]]), -n0, n0 - 1, shift=lua_dim)
            self.step('%s[%s]' % (x, idx), '%s[%s]' % (x, idx), [x, idx])
        elif op == 'take_pairs' and len(shape) >= 2 and shape[0] and shape[1]:
            k = r.choice([1, 2, 3])
            i1 = self.index([k], -shape[0], shape[0] - 1, shift=lua_dim)
            i2 = self.index([k] if r.random() < 0.8 else [1], -shape[1], shape[1] - 1, shift=lua_dim)
            self.step('%s[{%s, %s}]' % (x, i1, i2), '%s[%s, %s]' % (x, i1, i2), [x, i1, i2])
        elif op == 'mask_read':
            m = self.mask(shape if r.random() < 0.7 else shape[:1])
            self.step('%s[%s]' % (x, m), '%s[%s]' % (x, m), [x, m])
        elif op in ('gather', 'scatter', 'scatter_add'):
            dim = r.randrange(len(shape))
            ishape = [r.randint(0, s) if r.random() < 0.8 else s for s in shape]
            if op == 'gather' or shape[dim] == 0:
                idx = self.index(ishape, 0, max(shape[dim] - 1, 0)) if shape[dim] else None
            else:
                # scatter writes: distinct indices along dim (the order of repeated writes is not defined)
                ishape[dim] = min(ishape[dim], shape[dim])
                idx = self._perm_index(ishape, dim, shape[dim], unique=op == 'scatter')
            if idx is None:
                return
            if op == 'gather':
                self.step('%s:gather(%d, %s)' % (x, dim + 1, idx), 'torch.gather(%s, %d, %s)' % (x, dim, idx), [x, idx])
                return
            if op == 'scatter' and r.random() < 0.3:
                v = r.choice([1.5, -2.0])
                self.step('%s:scatter(%d, %s, %s)' % (x, dim + 1, idx, lua_num(v)),
                          'torch.scatter(%s, %d, %s, %s)' % (x, dim, idx, py_num(v)), [x, idx])
                return
            src = self.tensor([s + r.choice([0, 0, 1]) for s in ishape])
            self.step('%s:%s(%d, %s, %s)' % (x, op, dim + 1, idx, src),
                      'torch.%s(%s, %d, %s, %s)' % (op, x, dim, idx, src), [x, idx, src])
        elif op in ('index_select', 'index_add', 'index_copy', 'index_fill'):
            dim = r.randrange(len(shape))
            n = shape[dim]
            if n == 0:
                return
            k = r.choice([0, 1, 2, 3])
            unique = op in ('index_copy',)
            if unique:
                k = min(k, n)
            idx = self.index([k], 0, n - 1, unique=unique)
            if op == 'index_select':
                self.step('%s:index_select(%d, %s)' % (x, dim + 1, idx), 'torch.index_select(%s, %d, %s)' % (x, dim, idx),
                          [x, idx])
            elif op == 'index_fill':
                v = r.choice([0.5, -3.0])
                self.step('%s:index_fill(%d, %s, %s)' % (x, dim + 1, idx, lua_num(v)),
                          '%s.index_fill(%d, %s, %s)' % (x, dim, idx, py_num(v)), [x, idx])
            else:
                sshape = list(shape)
                sshape[dim] = k
                src = self.tensor(sshape)
                alpha = ''
                if op == 'index_add' and r.random() < 0.3:
                    alpha = r.choice([2.0, -0.5])
                self.step('%s:%s(%d, %s, %s%s)' % (x, op, dim + 1, idx, src, ', {alpha = %s}' % lua_num(alpha) if alpha != '' else ''),
                          '%s.%s(%d, %s, %s%s)' % (x, op, dim, idx, src, ', alpha=%s' % py_num(alpha) if alpha != '' else ''),
                          [x, idx, src])
        elif op in ('masked_fill', 'masked_scatter', 'masked_select'):
            mshape = shape if r.random() < 0.7 else [1] + shape[1:]
            m = self.mask(mshape)
            if op == 'masked_fill':
                v = r.choice([0.0, 2.5, -math.inf])
                self.step('%s:masked_fill(%s, %s)' % (x, m, lua_num(v)), '%s.masked_fill(%s, %s)' % (x, m, py_num(v)), [x, m])
            elif op == 'masked_select':
                self.step('%s:masked_select(%s)' % (x, m), '%s.masked_select(%s)' % (x, m), [x, m])
            else:
                src = self.tensor([math.prod(shape) + r.choice([0, 1])])
                self.step('%s:masked_scatter(%s, %s)' % (x, m, src), '%s.masked_scatter(%s, %s)' % (x, m, src), [x, m, src])
        elif op in ('index_put', 'setitem'):
            n0 = shape[0]
            if n0 == 0:
                return
            acc = op == 'index_put' and r.random() < 0.5
            k = r.choice([1, 2, 3]) if acc else r.randint(1, n0)
            idx = self.index([k], -n0, n0 - 1, shift=lua_dim) if acc else \
                self.index([k], 0, n0 - 1, unique=True, shift=lua_dim)
            vshape = r.choice([[k] + shape[1:], shape[1:], [1]])
            v = self.tensor(vshape)
            y = self.step('%s:clone()' % x, '%s.clone()' % x, [x])
            if y is None:
                return
            y = y[0]
            if op == 'setitem':
                self.run('%s[%s] = %s' % (y, idx, v), '%s[%s] = %s' % (y, idx, v), [], [y, idx, v], writes=y)
            else:
                opt = ', {accumulate = true}' if acc and r.random() < 0.5 else (', true' if acc else '')
                self.run('%s:index_put_({%s}, %s%s)' % (y, idx, v, opt),
                         '%s.index_put_((%s,), %s%s)' % (y, idx, v, ', accumulate=True' if acc else ''),
                         [], [y, idx, v], writes=y)
            self.outs.append(y)
        else:
            return

    def _perm_index(self, ishape, dim, n, unique):
        """An index of ishape whose values along dim are distinct (when unique) in [0, n)."""
        r = self.rng
        vals = []
        import itertools
        other = [range(s) for i, s in enumerate(ishape) if i != dim]
        cols = {}
        for pos in itertools.product(*other):
            cols[pos] = r.sample(range(n), ishape[dim]) if unique else [r.randrange(n) for _ in range(ishape[dim])]
        for full in itertools.product(*[range(s) for s in ishape]):
            pos = tuple(v for i, v in enumerate(full) if i != dim)
            vals.append(cols[pos][full[dim]])
        name = self.new_name()
        self.shift[name] = lambda x: x + 1
        lua = 'torch.tensor(%s, {dtype = "int64"}):reshape(%s)' % (gen.lua_list([v + 1 for v in vals]), gen.lua_list(ishape))
        py = 'torch.tensor(%s, dtype=torch.int64).reshape(%s)' % (gen.py_list(vals), gen.py_list(ishape))
        return Var(name) if self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [], outs=False) else None

    def attention(self):
        r = self.rng
        if r.random() < 0.55:
            lead = r.choice([[], [1], [2], [2, 2]])
            lq, s, e, ev = r.choice([1, 2, 3]), r.choice([1, 2, 3]), r.choice([1, 2, 4]), r.choice([1, 2, 3])
            q = self.tensor(lead + [lq, e])
            k = self.tensor((lead if r.random() < 0.8 else lead[1:]) + [s, e])
            v = self.tensor(lead + [s, ev])
            chosen = {}
            p = r.random()
            if p < 0.25:
                chosen['attn_mask'] = self.mask([lq, s])
            elif p < 0.45:
                chosen['attn_mask'] = self.tensor([lq, s] if r.random() < 0.7 else [s], grad=False)
            elif p < 0.65:
                chosen['is_causal'] = True
            if r.random() < 0.3:
                chosen['scale'] = r.choice([0.5, 1.0, 2.0])
            lua = 'nn.functional.scaled_dot_product_attention(%s, %s, %s%s)' % (
                q, k, v, (', {' + ', '.join('%s = %s' % (n, L(x)) for n, x in chosen.items()) + '}') if chosen else '')
            py = 'sdpa_reference(%s, %s, %s%s)' % (q, k, v, ''.join(', %s=%s' % (n, P(x)) for n, x in chosen.items()))
            self.step(lua, py, [q, k, v] + [x for x in chosen.values() if isinstance(x, Var)])
            return
        e, h = r.choice([2, 4, 6]), r.choice([1, 2])
        if e % h:
            h = 1
        bias = r.random() < 0.7
        batch_first = r.random() < 0.3
        lq, s, b = r.choice([1, 2, 3]), r.choice([1, 2, 3]), r.choice([[], [1], [2]])
        mname = self.new_name()
        params = {'in_proj_weight': [3 * e, e], 'out_proj.weight': [e, e]}
        if bias:
            params.update({'in_proj_bias': [3 * e], 'out_proj.bias': [e]})
        pv = {k: self.tensor(sh, grad=False, hostile_layout=False, lo=-1, hi=1, hostile=False) for k, sh in params.items()}
        sd_lua = '{' + ', '.join('[%r] = %s' % (k, v) for k, v in pv.items()) + '}'
        sd_py = '{' + ', '.join('%r: %s' % (k, v) for k, v in pv.items()) + '}'
        opt_l, opt_p = [], []
        if not bias:
            opt_l.append('bias = false')
            opt_p.append('bias=False')
        if batch_first:
            opt_l.append('batch_first = true')
            opt_p.append('batch_first=True')
        lua = '%s = nn.MultiheadAttention(%d, %d%s):double(); %s:load_state_dict(%s)' % (
            mname, e, h, (', {%s}' % ', '.join(opt_l)) if opt_l else '', mname, sd_lua)
        py = '%s = nn.MultiheadAttention(%d, %d%s).double(); %s.load_state_dict(%s)' % (
            mname, e, h, ''.join(', ' + o for o in opt_p), mname, sd_py)
        if not self.run(lua, py, [], list(pv.values()), objs=[mname]):
            return
        def seq(n):
            if not b:
                return [n, e]
            return [b[0], n, e] if batch_first else [n, b[0], e]
        q = self.tensor(seq(lq))
        kv = q if r.random() < 0.3 and lq == s else None
        k = kv or self.tensor(seq(s))
        v = kv or self.tensor(seq(s))
        chosen = {}
        if r.random() < 0.3:
            chosen['need_weights'] = r.random() < 0.5
        if r.random() < 0.3:
            chosen['average_attn_weights'] = r.random() < 0.5
        if r.random() < 0.25:
            chosen['attn_mask'] = self.mask([lq, s]) if r.random() < 0.5 else self.tensor([lq, s], grad=False)
        if r.random() < 0.2 and b:
            chosen['key_padding_mask'] = self.mask([b[0], s])
        lua, py = call(r, mname, mname, [q, k, v], [('key_padding_mask', None), ('need_weights', True),
                                                     ('attn_mask', None), ('average_attn_weights', True)], chosen)
        self.step(lua, py, [mname, q, k, v] + [x for x in chosen.values() if isinstance(x, Var)], n_out=2)

    def rnn(self):
        r = self.rng
        kind = r.choice(['RNN', 'GRU', 'LSTM'])
        inp, hid = r.choice([1, 2, 3]), r.choice([1, 2, 3])
        layers = r.choice([1, 1, 2])
        bidir = r.random() < 0.3
        bias = r.random() < 0.8
        batch_first = r.random() < 0.3
        nonlin = r.choice(['tanh', 'relu']) if kind == 'RNN' else None
        g = {'RNN': 1, 'GRU': 3, 'LSTM': 4}[kind]
        dirs = 2 if bidir else 1
        params = {}
        for l in range(layers):
            for sfx in ([''] + (['_reverse'] if bidir else [])):
                i = inp if l == 0 else dirs * hid
                params['weight_ih_l%d%s' % (l, sfx)] = [g * hid, i]
                params['weight_hh_l%d%s' % (l, sfx)] = [g * hid, hid]
                if bias:
                    params['bias_ih_l%d%s' % (l, sfx)] = [g * hid]
                    params['bias_hh_l%d%s' % (l, sfx)] = [g * hid]
        pv = {k: self.tensor(sh, grad=False, hostile_layout=False, lo=-1, hi=1, hostile=False) for k, sh in params.items()}
        chosen = {}
        if layers > 1 or r.random() < 0.2:
            chosen['num_layers'] = layers
        if nonlin and (nonlin == 'relu' or r.random() < 0.2):
            chosen['nonlinearity'] = nonlin
        if not bias:
            chosen['bias'] = False
        if batch_first:
            chosen['batch_first'] = True
        if bidir:
            chosen['bidirectional'] = True
        order = [('num_layers', 1)] + ([('nonlinearity', 'tanh')] if kind == 'RNN' else []) + \
                [('bias', True), ('batch_first', False), ('dropout', 0.0), ('bidirectional', False)]
        mname = self.new_name()
        # (PyTorch 1.13's nn.RNN takes no positional nonlinearity: it is passed on as bias)
        ctor_l, ctor_p = call(r, 'nn.' + kind, 'nn.' + kind, [inp, hid], order, chosen, max_pos=1)
        sd_lua = '{' + ', '.join('%s = %s' % (k, v) for k, v in pv.items()) + '}'
        sd_py = '{' + ', '.join('%r: %s' % (k, v) for k, v in pv.items()) + '}'
        if not self.run('%s = %s:double(); %s:load_state_dict(%s)' % (mname, ctor_l, mname, sd_lua),
                        '%s = %s.double(); %s.load_state_dict(%s)' % (mname, ctor_p, mname, sd_py),
                        [], list(pv.values()), objs=[mname]):
            return
        seq, b = r.choice([1, 2, 3]), r.choice([[], [1], [2]])
        xs = ([b[0], seq] if batch_first else [seq, b[0]]) if b else [seq]
        x = self.tensor(xs + [inp], lo=-2, hi=2)
        args, states = [x], []
        hshape = [layers * dirs] + b + [hid]
        if r.random() < 0.4:
            h0 = self.tensor(hshape, lo=-1, hi=1)
            if kind == 'LSTM':
                c0 = self.tensor(hshape, lo=-1, hi=1)
                args.append(Raw('{%s, %s}' % (h0, c0), '(%s, %s)' % (h0, c0)))
                states = [h0, c0]
            else:
                args.append(h0)
                states = [h0]
        reads = [mname, x] + states
        if kind == 'LSTM':
            names = [self.new_name() for _ in range(3)]
            o, hn, cn = names
            self.run('%s, %s = %s(%s); %s, %s = %s[1], %s[2]' % (o, hn, mname, ', '.join(L(a) for a in args), hn, cn, hn, hn),
                     '%s, (%s, %s) = %s(%s)' % (o, hn, cn, mname, ', '.join(P(a) for a in args)),
                     names, reads)
        else:
            self.step('%s(%s)' % (mname, ', '.join(L(a) for a in args)), '%s(%s)' % (mname, ', '.join(P(a) for a in args)),
                      reads, n_out=2, lua_lhs=None)

    def half(self):
        """An elementwise op or reduction on float16 or bfloat16 inputs; PyTorch's result is
        computed in float32 from the same values and rounded once."""
        r = self.rng
        dt = r.choice(['float16', 'bfloat16'])
        shape = [r.choice([0, 1, 2, 3]) if r.random() < 0.2 else r.choice([1, 2, 3]) for _ in range(r.choice([0, 1, 2]))]
        # values that float16 and bfloat16 hold exactly: multiples of 1/8 below 8
        vals = lambda n: [r.choice([math.nan, math.inf, -math.inf]) if r.random() < 0.03 else r.randint(-64, 64) / 8
                          for _ in range(n)]
        x = self.tensor(shape, dtype=dt, grad=False, values=vals(math.prod(shape)))
        kind = r.choice(['unary', 'unary', 'binary', 'reduce'])
        rnd = 'torch.%s' % dt
        back = lambda e: '(lambda t: t.to(%s) if t.dtype == torch.float32 else t)(%s)' % (rnd, e)
        if kind == 'unary':
            row = r.choice([u for u in UNARY if u['name'] != 'clamp'])
            op = row['name']
            fn = 'torch.' + op if hasattr(torch, op) else 'F.' + op
            self.step('%s:%s()' % (x, op), back('%s(%s.float())' % (fn, x)), [x])
        elif kind == 'binary':
            op = r.choice(BINARY)['name']
            other = r.choice(['same', 'same', 'number', 'float32'])
            if other == 'number':
                num = r.choice([2, -1, 0.5, 1.5])
                y_l, y_p = lua_num(num), py_num(num)
                if op in ('maximum', 'minimum', 'atan2', 'hypot'):
                    y_p = 'torch.tensor(%s)' % y_p
                reads = [x]
            elif other == 'same':
                ys = self.broadcastable_to(self.vars[x])
                y = self.tensor(ys, dtype=dt, grad=False, values=vals(math.prod(ys)))
                if y is None:
                    return
                y_l, y_p, reads = str(y), '%s.float()' % y, [x, y]
            else:
                y = self.tensor(list(self.vars[x].shape), dtype='float32', grad=False, values=vals(self.vars[x].numel()))
                y_l, y_p, reads = str(y), str(y), [x, y]
            if other == 'float32':            # float32 wins: no rounding to half
                self.step('%s:%s(%s)' % (x, op, y_l), 'torch.%s(%s.float(), %s)' % (op, x, y_p), reads)
            else:
                self.step('%s:%s(%s)' % (x, op, y_l), back('torch.%s(%s.float(), %s)' % (op, x, y_p)), reads)
        else:
            row = r.choice(REDUCE)
            op = row['name']
            t = self.vars[x]
            if r.random() < 0.4 or t.dim() == 0:
                py = back('torch.%s(%s.float())' % (op, x))
                if op in ('argmax', 'argmin'):
                    py += ' + 1'
                self.step('%s:%s()' % (x, op), py, [x])
                return
            d = self.dim(t)
            if op in ('max', 'min'):
                self.step('%s:%s(%d)' % (x, op, lua_dim(d)),
                          '(lambda v: (v[0].to(%s), v[1] + 1))(torch.%s(%s.float(), %d))' % (rnd, op, x, d), [x], n_out=2)
            elif op in ('argmax', 'argmin'):
                self.step('%s:%s(%d)' % (x, op, lua_dim(d)), 'torch.%s(%s.float(), %d) + 1' % (op, x, d), [x])
            else:
                self.step('%s:%s(%d)' % (x, op, lua_dim(d)), back('torch.%s(%s.float(), %d)' % (op, x, d)), [x])


FAMILIES = ['conv', 'pool', 'norm', 'loss', 'embedding', 'interpolate', 'pad', 'fold', 'sort', 'indexing',
            'attention', 'rnn', 'half']


def program(seed, index, family=None):
    rng = random.Random('families %d/%d' % (seed, index))
    family = family or FAMILIES[index % len(FAMILIES)]
    autograd = family != 'half' and rng.random() < 0.6
    g = FamilyGen(rng, autograd, family)
    for _ in range(rng.choice([1, 1, 2])):
        getattr(g, family)()
    g.finish()
    prog = {'seed': seed, 'index': index, 'kind': 'family:' + family, 'steps': g.steps}
    if g.inplace:
        prog['final'] = []
        for n, t in g.vars.items():
            if isinstance(t, torch.Tensor) and t.dtype in DTYPE_NAME:
                rec = record(n, t)
                if n in g.shift:
                    rec['values'] = [g.shift[n](x) for x in rec['values']]
                prog['final'].append(rec)
    return prog
