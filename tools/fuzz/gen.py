#!/usr/bin/python3
"""Random tensor programs for the differential fuzzer, with PyTorch's results.

usage: gen.py --seed S --count N --out PREFIX     writes PREFIX.lua (read by run.lua) and
                                                  PREFIX.json (read by the fuzz driver)

A program is a list of steps over variables v1, v2 ...; each step is one Lua statement and
its PyTorch twin (dims and indices 0-based there, 1-based in Lua).  Programs are built by
running them: each candidate step runs in PyTorch at once, so later steps know the shapes
and dtypes they work on, and the step records what PyTorch gave for every variable it
defines (dtype, shape, flat values; None for a missing grad) or the error it raised.  A
program whose steps wrote in place also records every variable's final value, which catches
writes that should have shown through views.

Two kinds of program: "tensor" programs (creation from explicit values in float32, float64,
int64 or bool with 0-, 1- and small dims; views; elementwise ops with broadcasting and with
Lua numbers; comparisons; reductions; matmul; conversions; in-place ops) and "autograd"
programs (float64 leaves that require grad, a random graph of differentiable ops, the sum
of a few results, backward, and the leaves' grads).

The elementwise ops and reductions are the rows of src/ops.def (read as the op sweep's
fixture writer reads them), so a new row joins the fuzzer without an edit here.
"""
import argparse
import json
import math
import os
import random
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
sys.path.insert(0, os.path.join(ROOT, 'spec', 'fixtures'))
from make_op_sweep import read_rows   # noqa: E402

DTYPES = ['float32', 'float64', 'int64', 'bool']
TORCH_DTYPE = {'float32': torch.float32, 'float64': torch.float64, 'int64': torch.int64,
               'bool': torch.bool, 'float16': torch.float16, 'bfloat16': torch.bfloat16}
DTYPE_NAME = {v: k for k, v in TORCH_DTYPE.items()}
INT_LIMIT = 2 ** 40        # steps whose integer results grow past this are dropped (overflow)


# ---------------------------------------------------------------------------------------
# The op table

def op_table():
    rows = [r for r in read_rows(os.path.join(ROOT, 'src', 'ops.def')) if r['bind'] != 'NONE']
    unary = [r for r in rows if r['family'] == 'unary' and (r['bind'] == 'AUTO' or r['name'] == 'clamp')]
    binary = [r for r in rows if r['family'] == 'binary']
    reduce = [r for r in rows if r['family'] == 'reduce']
    return unary, binary, reduce


UNARY, BINARY, REDUCE = op_table()
OPERATOR = {'add': ('+', '+'), 'sub': ('-', '-'), 'mul': ('*', '*'), 'div': ('/', '/'),
            'pow': ('^', '**')}


# ---------------------------------------------------------------------------------------
# Literals in both languages

def lua_num(x):
    if isinstance(x, bool):
        return 'true' if x else 'false'
    if isinstance(x, int):
        return str(x)
    if x != x:
        return '(0/0)'
    if math.isinf(x):
        return 'math.huge' if x > 0 else '-math.huge'
    return repr(x)


def py_num(x):
    if isinstance(x, float) and (x != x or math.isinf(x)):
        return "float('%s')" % x
    return repr(x)


def lua_list(xs):
    return '{' + ', '.join(lua_num(x) for x in xs) + '}'


def py_list(xs):
    return '[' + ', '.join(py_num(x) for x in xs) + ']'


def lua_dim(d):
    return d + 1 if d >= 0 else d


# ---------------------------------------------------------------------------------------
# Random values, shapes and dims

class Gen:
    def __init__(self, rng, autograd):
        self.rng, self.autograd = rng, autograd
        self.vars = {}       # name -> torch tensor
        self.roots = {}      # name -> storage id (views share their input's)
        self.leaves = []
        self.steps = []
        self.count = 0
        self.inplace = False

    def new_name(self):
        self.count += 1
        return 'v%d' % self.count

    def scalar(self, dtype):
        r = self.rng
        if dtype == 'bool':
            return r.random() < 0.5
        if dtype == 'int64':
            return r.randint(-4, 4)
        if self.autograd:
            x = r.uniform(0.1, 2.0)
            return x if r.random() < 0.6 else -x
        p = r.random()
        if p < 0.04:
            return r.choice([math.nan, math.inf, -math.inf, -0.0])
        if p < 0.4:
            return float(r.randint(-3, 3))
        if p < 0.7:
            return r.randint(-12, 12) / 4
        return r.uniform(-3, 3)

    def number(self):
        """A Lua number (or boolean) for an operand: mostly small ints and simple floats."""
        p = self.rng.random()
        if p < 0.45:
            return self.rng.randint(-3, 3)
        if p < 0.95 or self.autograd:
            return self.rng.choice([0.5, -1.5, 2.0, 2.5, -0.25, 3.0, 1.0])
        return self.rng.random() < 0.5

    def shape(self):
        r = self.rng
        n = r.choice([0, 1, 1, 2, 2, 2, 3, 3])
        sizes = [1, 1, 2, 2, 3, 3, 4] + ([] if self.autograd else [0])
        return [r.choice(sizes) for _ in range(n)]

    def dtype(self):
        if self.autograd:
            return 'float64'
        return self.rng.choice(DTYPES)

    def pick(self, want=None):
        """A variable (recent ones are likelier), optionally one whose tensor passes want."""
        names = [n for n, t in self.vars.items() if t is not None and (want is None or want(t))]
        if not names:
            return None
        weights = [1 + i for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    def dim(self, t, extra=0):
        """A PyTorch dim of t (0-based or negative); now and then one out of range."""
        n = max(t.dim(), 1) + extra
        if self.rng.random() < 0.04:
            return n
        return self.rng.randrange(-n, n)

    # -----------------------------------------------------------------------------------
    # Running a step in PyTorch

    def run(self, lua, py, defines, reads, root=None, writes=None):
        """Runs py (PyTorch) and keeps the step unless its integers overflow; True when kept."""
        env = {'torch': torch}
        env.update({k: v for k, v in self.vars.items()})
        step = {'lua': lua, 'py': py, 'defines': defines, 'reads': reads}
        try:
            exec(py, env)
        except Exception as e:                     # noqa: BLE001 (any PyTorch error counts)
            step['error'] = '%s: %s' % (type(e).__name__, str(e).strip().split('\n')[0])
            self.steps.append(step)
            return False
        results = []
        for name in defines:
            t = env[name]
            if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.numel() and \
                    t.abs().max().item() > INT_LIMIT:
                return False
            results.append(record(name, t))
        for name in defines:
            self.vars[name] = env[name]
            self.roots[name] = root if root is not None else name
        if writes is not None:
            step['writes'] = writes
            self.inplace = True
        step['results'] = results
        step['roots'] = {n: self.roots[n] for n in defines}
        self.steps.append(step)
        return True

    # -----------------------------------------------------------------------------------
    # Steps

    def create(self, shape=None, dtype=None, leaf=False):
        shape = self.shape() if shape is None else shape
        dtype = dtype or self.dtype()
        n = math.prod(shape)
        values = [self.scalar(dtype) for _ in range(n)]
        name = self.new_name()
        if not shape and self.rng.random() < 0.5:
            lua = 'torch.tensor(%s, {dtype = %r})' % (lua_num(values[0]), dtype)
            py = 'torch.tensor(%s, dtype=torch.%s)' % (py_num(values[0]), dtype)
        else:
            lua = 'torch.tensor(%s, {dtype = %r}):reshape(%s)' % (lua_list(values), dtype, lua_list(shape))
            py = 'torch.tensor(%s, dtype=torch.%s).reshape(%s)' % (py_list(values), dtype, py_list(shape))
        if leaf:
            lua, py = lua + ':requires_grad_()', py + '.requires_grad_()'
        if self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], []):
            if leaf:
                self.leaves.append(name)
            return name
        return None

    def broadcastable_to(self, t):
        """A shape that broadcasts with t's: some dims set to 1, leading ones dropped or added."""
        shape = [s if self.rng.random() < 0.7 else 1 for s in t.shape]
        p = self.rng.random()
        if p < 0.3 and shape:
            shape = shape[self.rng.randint(1, len(shape)):]
        elif p < 0.45:
            shape = [self.rng.choice([1, 2])] + shape
        return shape

    def operand(self, a, allow_number=True):
        """The other operand of a binary op with a: a number, a variable or a new tensor."""
        r = self.rng.random()
        if allow_number and r < 0.3:
            return None, self.number()
        if r < 0.55:
            b = self.pick()
            if b is not None:
                return b, None
        dtype = self.vars[a].dtype
        dtype = DTYPE_NAME[dtype] if self.rng.random() < 0.6 else self.dtype()
        return self.create(self.broadcastable_to(self.vars[a]), dtype), None

    def view(self):
        a = self.pick()
        if a is None:
            return
        t, r, name = self.vars[a], self.rng, self.new_name()
        n = t.dim()
        kind = r.choice(['transpose', 'permute', 'narrow', 'select', 'expand', 'unsqueeze',
                         'reshape', 'view', 'squeeze', 't', 'flatten', 'contiguous', 'clone',
                         'detach'])
        if kind == 'transpose':
            d1, d2 = self.dim(t), self.dim(t)
            lua, py = '%s:transpose(%d, %d)' % (a, lua_dim(d1), lua_dim(d2)), '%s.transpose(%d, %d)' % (a, d1, d2)
        elif kind == 'permute':
            p = list(range(n))
            r.shuffle(p)
            lua = '%s:permute(%s)' % (a, ', '.join(str(d + 1) for d in p))
            py = '%s.permute(%s)' % (a, py_list(p))
        elif kind in ('narrow', 'select'):
            if n == 0:
                return
            d = self.dim(t)
            size = t.shape[d] if -n <= d < n else 1
            if kind == 'narrow':
                start = r.randint(0, size)
                length = r.randint(0, size - start) if r.random() < 0.95 else size + 1
                lua = '%s:narrow(%d, %d, %d)' % (a, lua_dim(d), start + 1, length)
                py = '%s.narrow(%d, %d, %d)' % (a, d, start, length)
            else:
                i = r.randint(-size, size - 1) if size and r.random() < 0.95 else size
                lua = '%s:select(%d, %d)' % (a, lua_dim(d), lua_dim(i))
                py = '%s.select(%d, %d)' % (a, d, i)
        elif kind == 'expand':
            sizes = [r.choice([1, 2, 3]) for _ in range(r.choice([0, 0, 1]))]
            for s in t.shape:
                sizes.append(r.choice([0, 2, 3, -1]) if s == 1 else r.choice([s, -1, -1, s + 1 if r.random() < 0.1 else s]))
            lua, py = '%s:expand(%s)' % (a, lua_list(sizes)), '%s.expand(%s)' % (a, py_list(sizes))
        elif kind == 'unsqueeze':
            d = self.dim(t, 1) if n else r.choice([0, -1])
            lua, py = '%s:unsqueeze(%d)' % (a, lua_dim(d)), '%s.unsqueeze(%d)' % (a, d)
        elif kind in ('reshape', 'view'):
            shape = factor(t.numel(), r) if r.random() < 0.95 else [t.numel() + 1]
            if shape and r.random() < 0.3 and t.numel():
                shape[r.randrange(len(shape))] = -1
            lua = '%s:%s(%s)' % (a, kind, lua_list(shape))
            py = '%s.%s(%s)' % (a, kind, py_list(shape))
        elif kind == 'squeeze':
            if r.random() < 0.5:
                lua, py = '%s:squeeze()' % a, '%s.squeeze()' % a
            else:
                d = self.dim(t)
                lua, py = '%s:squeeze(%d)' % (a, lua_dim(d)), '%s.squeeze(%d)' % (a, d)
        else:        # t, flatten, contiguous, clone, detach
            lua, py = '%s:%s()' % (a, kind), '%s.%s()' % (a, kind)
        self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [a],
                 root=None if kind == 'clone' else self.roots[a])

    def unary(self):
        a = self.pick()
        if a is None:
            return
        row = self.rng.choice([u for u in UNARY if u['node'] or not self.autograd])
        op, name, r = row['name'], self.new_name(), self.rng
        if op == 'clamp':
            lo = self.number() if r.random() < 0.7 else None
            hi = self.number() if lo is None or r.random() < 0.5 else None
            if isinstance(lo, bool) or isinstance(hi, bool):
                return
            lua = '%s:clamp(%s, %s)' % (a, 'nil' if lo is None else lua_num(lo), 'nil' if hi is None else lua_num(hi))
            py = 'torch.clamp(%s, %s, %s)' % (a, py_num(lo) if lo is not None else 'None', py_num(hi) if hi is not None else 'None')
        elif r.random() < 0.5:
            lua, py = '%s:%s()' % (a, op), 'torch.%s(%s)' % (op, a)
        else:
            lua, py = 'torch.%s(%s)' % (op, a), 'torch.%s(%s)' % (op, a)
        if r.random() < 0.05:
            lua, py = '-%s' % a, '-%s' % a
        elif r.random() < 0.06 and self.vars[a].is_floating_point():
            fn, d = r.choice(['softmax', 'log_softmax']), self.dim(self.vars[a])
            lua, py = '%s:%s(%d)' % (a, fn, lua_dim(d)), 'torch.%s(%s, %d)' % (fn, a, d)
        self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], [a])

    def binary(self, compare=False):
        a = self.pick()
        if a is None:
            return
        rows = [b for b in BINARY if (b['rule'] == 'CMP') == compare and (b['node'] or not self.autograd)]
        if not rows:
            return
        op, r = self.rng.choice(rows)['name'], self.rng
        b, num = self.operand(a)
        if b is None and num is None:
            return
        name = self.new_name()
        reads = [a] + ([b] if b else [])
        if b:
            lhs_lua = lhs_py = b
        else:
            lhs_lua, lhs_py = lua_num(num), py_num(num)
        form = r.random()
        if op in OPERATOR and form < 0.4:
            lo, po = OPERATOR[op]
            if form < 0.15 and b is None and not isinstance(num, bool):    # the number on the left
                lua, py = '%s %s %s' % (lhs_lua, lo, a), '%s %s %s' % (lhs_py, po, a)
            else:
                lua, py = '%s %s %s' % (a, lo, lhs_lua), '%s %s %s' % (a, po, lhs_py)
            if isinstance(num, bool):
                return
        else:
            alpha = ''
            if op in ('add', 'sub') and r.random() < 0.15:
                alpha = self.number()
            lua_call = ('%s:%s(%s' % (a, op, lhs_lua)) if form < 0.7 else ('torch.%s(%s, %s' % (op, a, lhs_lua))
            lua = lua_call + (', %s)' % lua_num(alpha) if alpha != '' else ')')
            other = lhs_py
            if b is None and op in ('maximum', 'minimum', 'atan2', 'hypot'):
                other = 'torch.tensor(%s)' % py_num(num)     # these take no Python number
            py = 'torch.%s(%s, %s%s)' % (op, a, other, ', alpha=%s' % py_num(alpha) if alpha != '' else '')
        self.run('%s = %s' % (name, lua), '%s = %s' % (name, py), [name], reads)

    def reduce(self):
        a = self.pick()
        if a is None:
            return
        row = self.rng.choice([x for x in REDUCE if x['node'] or not self.autograd])
        op, r, t = row['name'], self.rng, self.vars[a]
        if self.autograd and op in ('argmax', 'argmin'):
            return
        name = self.new_name()
        if r.random() < 0.3:
            lua, py = '%s = %s:%s()' % (name, a, op), '%s = torch.%s(%s)' % (name, op, a)
            if op in ('argmax', 'argmin'):
                py += '; %s = %s + 1' % (name, name)
            return self.run(lua, py, [name], [a])
        d, keep = self.dim(t), r.random() < 0.4
        kd_lua, kd_py = (', true', ', keepdim=True') if keep else ('', '')
        call_lua = '%s:%s(%d%s)' % (a, op, lua_dim(d), kd_lua)
        call_py = 'torch.%s(%s, %d%s)' % (op, a, d, kd_py)
        if op in ('max', 'min'):
            idx = self.new_name()
            self.run('%s, %s = %s' % (name, idx, call_lua),
                     '%s, %s = %s; %s = %s + 1' % (name, idx, call_py, idx, idx), [name, idx], [a])
        elif op in ('argmax', 'argmin'):
            self.run('%s = %s' % (name, call_lua), '%s = %s + 1' % (name, call_py), [name], [a])
        else:
            self.run('%s = %s' % (name, call_lua), '%s = %s' % (name, call_py), [name], [a])

    def matmul(self):
        a = self.pick(lambda t: 1 <= t.dim() <= 3 and (t.is_floating_point() or self.rng.random() < 0.1))
        if a is None:
            return
        t, r = self.vars[a], self.rng
        k = t.shape[-1]
        m = r.choice([1, 2, 3])
        if r.random() < 0.8:
            shape = r.choice([[k], [k, m], [r.choice([1, 2]), k, m]] + ([[t.shape[0], k, m]] if t.dim() == 3 else []))
            dtype = DTYPE_NAME[t.dtype] if r.random() < 0.9 else self.dtype()
            b = self.create(shape, dtype)
        else:
            b = self.pick()
        if b is None:
            return
        name = self.new_name()
        if r.random() < 0.5:
            lua = '%s:matmul(%s)' % (a, b)
        else:
            lua = 'torch.matmul(%s, %s)' % (a, b)
        self.run('%s = %s' % (name, lua), '%s = torch.matmul(%s, %s)' % (name, a, b), [name], [a, b])

    def convert(self):
        a = self.pick()
        if a is None:
            return
        t = self.vars[a]
        target = self.rng.choice(DTYPES)
        if target in ('int64',) and t.is_floating_point() and t.numel() and \
                not (t.isfinite().all() and t.abs().max() < 2 ** 40):
            return                                   # float -> int of NaN or inf is undefined
        name = self.new_name()
        method = {'float32': 'float', 'float64': 'double', 'int64': 'long', 'bool': 'bool'}[target]
        lua = ('%s:%s()' % (a, method)) if self.rng.random() < 0.5 else ('%s:to(%r)' % (a, target))
        same = TORCH_DTYPE[target] == t.dtype
        self.run('%s = %s' % (name, lua), '%s = %s.to(torch.%s)' % (name, a, target), [name], [a],
                 root=self.roots[a] if same else None)

    def inplace_op(self):
        a = self.pick()
        if a is None:
            return
        r, name = self.rng, self.new_name()
        op = r.choice(['add_', 'sub_', 'mul_', 'div_', 'fill_', 'zero_', 'copy_', 'clamp_'])
        reads = [a]
        if op in ('add_', 'sub_', 'mul_', 'div_', 'copy_'):
            b, num = self.operand(a, allow_number=op != 'copy_')
            if b is None and num is None:
                return
            if isinstance(num, bool):
                return
            arg_lua, arg_py = (b, b) if b else (lua_num(num), py_num(num))
            reads += [b] if b else []
        elif op == 'fill_':
            num = self.number()
            arg_lua, arg_py = lua_num(num), py_num(num)
        elif op == 'clamp_':
            lo, hi = sorted([self.number(), self.number()])
            if isinstance(lo, bool) or isinstance(hi, bool):
                return
            arg_lua, arg_py = '%s, %s' % (lua_num(lo), lua_num(hi)), '%s, %s' % (py_num(lo), py_num(hi))
        else:
            arg_lua = arg_py = ''
        self.run('%s = %s:%s(%s)' % (name, a, op, arg_lua), '%s = %s.%s(%s)' % (name, a, op, arg_py),
                 [name], reads, root=self.roots[a], writes=self.roots[a])

    # -----------------------------------------------------------------------------------
    # Programs

    def tensor_program(self, length):
        for _ in range(self.rng.randint(1, 2)):
            self.create()
        steps = [(self.create, 0.1), (self.view, 0.25), (self.unary, 0.15), (self.binary, 0.2),
                 (lambda: self.binary(compare=True), 0.06), (self.reduce, 0.1), (self.matmul, 0.05),
                 (self.convert, 0.04), (self.inplace_op, 0.05)]
        while len(self.steps) < length:
            self.rng.choices([s for s, _ in steps], [w for _, w in steps])[0]()

    def autograd_program(self, length):
        for _ in range(self.rng.randint(1, 3)):
            self.create(self.shape(), 'float64', leaf=True)
        if not self.leaves:
            return
        steps = [(self.view, 0.25), (self.unary, 0.2), (self.binary, 0.3), (self.reduce, 0.1),
                 (self.matmul, 0.08), (self.inplace_op, 0.03)]
        while len(self.steps) < length:
            self.rng.choices([s for s, _ in steps], [w for _, w in steps])[0]()
        ends = [n for n, t in self.vars.items() if t.requires_grad and n not in self.leaves]
        ends = self.rng.sample(ends, min(len(ends), self.rng.randint(1, 2))) or [self.leaves[0]]
        loss_lua = ' + '.join('%s:sum()' % n for n in ends)
        loss_py = ' + '.join('%s.sum()' % n for n in ends)
        grads = ['g%s' % leaf[1:] for leaf in self.leaves]
        assign = '; '.join('%s = %s.grad' % (g, leaf) for g, leaf in zip(grads, self.leaves))
        self.run('loss = %s' % loss_lua, 'loss = %s' % loss_py, ['loss'], ends)
        self.run('loss:backward(); %s' % assign, 'loss.backward(); %s' % assign, grads,
                 ['loss'] + self.leaves)


def factor(n, rng):
    """A random shape of n elements with up to 3 dims."""
    if n == 0:
        return rng.choice([[0], [0, 2], [2, 0, 1]])
    shape = []
    while n > 1 and len(shape) < 2:
        ds = [d for d in range(2, n + 1) if n % d == 0]
        d = rng.choice(ds)
        shape.append(d)
        n //= d
    if n > 1:
        shape.append(n)
    while rng.random() < 0.2:
        shape.insert(rng.randint(0, len(shape)), 1)
    rng.shuffle(shape)
    return shape


def record(name, t):
    if t is None:
        return {'var': name, 'none': True}
    if not isinstance(t, torch.Tensor):
        return {'var': name, 'number': t}
    t = t.detach()
    return {'var': name, 'dtype': DTYPE_NAME[t.dtype], 'shape': list(t.shape),
            'values': t.reshape(-1).tolist()}


def program(seed, index):
    rng = random.Random('%d/%d' % (seed, index))
    autograd = rng.random() < 0.35
    g = Gen(rng, autograd)
    length = rng.randint(3, 12)
    if autograd:
        g.autograd_program(length)
    else:
        g.tensor_program(length)
    prog = {'seed': seed, 'index': index, 'kind': 'autograd' if autograd else 'tensor', 'steps': g.steps}
    if g.inplace:
        prog['final'] = [record(n, t) for n, t in g.vars.items() if isinstance(t, torch.Tensor)]
    return prog


# ---------------------------------------------------------------------------------------
# Output

def lua_value(v, indent=''):
    if v is None:
        return 'nil'
    if isinstance(v, (bool, int, float)):
        return lua_num(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)     # a JSON string is a Lua string too
    if isinstance(v, list):
        return '{' + ', '.join(lua_value(x) for x in v) + '}'
    return '{' + ', '.join('%s = %s' % (k, lua_value(x)) for k, x in v.items()) + '}'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--first', type=int, default=0, help='index of the first program')
    ap.add_argument('--count', type=int, default=100)
    ap.add_argument('--out', required=True, help='PREFIX of PREFIX.lua and PREFIX.json')
    args = ap.parse_args()
    torch.set_printoptions(precision=10)
    progs = [program(args.seed, i) for i in range(args.first, args.first + args.count)]
    with open(args.out + '.json', 'w') as f:
        json.dump(progs, f, allow_nan=True)
    with open(args.out + '.lua', 'w') as f:
        f.write('return {\n')
        for p in progs:
            f.write(lua_value(p) + ',\n')
        f.write('}\n')


if __name__ == '__main__':
    main()
