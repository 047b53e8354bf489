"""shlo.py: a small tracing framework that builds StableHLO programs.

A Graph records ops on statically shaped tensors (Values).  Every op kind
has three parts kept next to each other below: shape inference (the
builder method, which asserts its operand shapes), its vector-Jacobian
product (VJP[op]), and its text form (_FMT[op]).  Graph.grad() walks the
forward ops in reverse and emits the VJP ops into the same graph, as JAX's
reverse mode does.  emit() prints one `main` function in the style of
`jax.jit(f).lower(...).as_text()`: scalar constants first (%cst, %c ...),
then the ops numbered %0, %1, ... in creation order, dead ops removed.

Loops: a stablehlo.while is an op of its graph whose cond and body are
Graphs of their own (regions; their args are the iterArgs) and whose
results are 'result' Values (%N#k).  scan() lowers jax.lax.scan over
stacked per-layer weights the way JAX does: a forward while that stacks
the residuals, and (through the while's vjp) a reverse while that builds
the stacked gradients.

Standard library only.  The reference evaluator used by the tests lives
in refeval.py.
"""

import itertools
import math
import struct

FLOAT_TYPES = ('f32', 'bf16', 'f64', 'f16')
DTYPE_BYTES = {'f32': 4, 'bf16': 2, 'f16': 2, 'f64': 8, 'i32': 4, 'i1': 1,
               'ui8': 1}

# Ops whose result never carries a gradient.
_NONDIFF = frozenset(('compare', 'iota', 'stop_gradient', 'constant'))


def prod(xs):
    r = 1
    for x in xs:
        r *= x
    return r


# Value ids, unique across all graphs (a region is a Graph of its own).
_IDS = itertools.count()

_TTYPE_CACHE = {}


def ttype(shape, dtype):
    """The MLIR tensor type, e.g. tensor<48x2048xf32>, tensor<f32>."""
    key = (shape, dtype)
    s = _TTYPE_CACHE.get(key)
    if s is None:
        if shape:
            s = 'tensor<%sx%s>' % ('x'.join(map(str, shape)), dtype)
        else:
            s = 'tensor<%s>' % dtype
        _TTYPE_CACHE[key] = s
    return s


class Value:
    """One SSA value: an argument, a scalar constant or an op result."""
    __slots__ = ('id', 'op', 'shape', 'dtype', 'operands', 'attrs',
                 'needs_grad')

    def __init__(self, id, op, shape, dtype, operands, attrs, needs_grad):
        self.id = id
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.operands = operands
        self.attrs = attrs
        self.needs_grad = needs_grad

    @property
    def rank(self):
        return len(self.shape)

    @property
    def type(self):
        return ttype(self.shape, self.dtype)

    def __repr__(self):
        return '<%s #%d %s>' % (self.op, self.id, self.type)


def _ints(xs):
    return tuple(int(x) for x in xs)


class Graph:
    """A straight-line program under construction."""

    def __init__(self, dtype='f32'):
        assert dtype in FLOAT_TYPES, dtype
        self.dtype = dtype          # default float element type
        self.nodes = []             # op results, in creation order
        self.args = []              # argument Values, in creation order
        self.consts = {}            # (dtype, key) -> scalar constant Value
        self.outputs = None         # as a region: the Values it returns
        self.tag = None             # checkpoint name given to new ops

    # ---------------------------------------------------------------- core

    def _new(self, op, shape, dtype, operands=(), attrs=None):
        needs = (op not in _NONDIFF and
                 any(o.needs_grad for o in operands))
        v = Value(next(_IDS), op, shape, dtype, tuple(operands),
                  attrs or {}, needs)
        if self.tag and op not in ('arg', 'constant'):
            v.attrs['ckpt_name'] = self.tag
        if op not in ('arg', 'constant'):
            self.nodes.append(v)
        return v

    def arg(self, name, shape, dtype=None, requires_grad=False):
        """A function argument; `name` becomes its loc("...")."""
        v = self._new('arg', _ints(shape), dtype or self.dtype, (),
                      {'name': name})
        v.needs_grad = requires_grad
        self.args.append(v)
        return v

    def const(self, value, dtype=None):
        """A scalar constant, shared by every use (interned)."""
        dtype = dtype or self.dtype
        if dtype in FLOAT_TYPES:
            value = float(value)
            key = (dtype, struct.pack('<d', value))
        elif dtype == 'i1':
            value = bool(value)
            key = (dtype, value)
        else:
            value = int(value)
            key = (dtype, value)
        v = self.consts.get(key)
        if v is None:
            v = self._new('constant', (), dtype, (), {'value': value})
            self.consts[key] = v
        return v

    def full(self, shape, value, dtype=None):
        shape = _ints(shape)
        c = self.const(value, dtype)
        if not shape:
            return c
        return self.broadcast_in_dim(c, shape, ())

    def zeros(self, shape, dtype=None):
        return self.full(shape, 0.0 if (dtype or self.dtype) in FLOAT_TYPES
                         else 0, dtype)

    def zeros_like(self, x):
        return self.zeros(x.shape, x.dtype)

    def _coerce(self, a, b):
        if not isinstance(a, Value):
            a = self.full(b.shape, a, b.dtype)
        if not isinstance(b, Value):
            b = self.full(a.shape, b, a.dtype)
        return a, b

    # ------------------------------------------------------- elementwise

    def _binary(self, op, a, b):
        a, b = self._coerce(a, b)
        assert a.shape == b.shape and a.dtype == b.dtype, (op, a, b)
        return self._new(op, a.shape, a.dtype, (a, b))

    def add(self, a, b): return self._binary('add', a, b)
    def sub(self, a, b): return self._binary('subtract', a, b)
    def mul(self, a, b): return self._binary('multiply', a, b)
    def div(self, a, b): return self._binary('divide', a, b)
    def maximum(self, a, b): return self._binary('maximum', a, b)
    def power(self, a, b): return self._binary('power', a, b)

    def _unary(self, op, x):
        assert x.dtype in FLOAT_TYPES, (op, x)
        return self._new(op, x.shape, x.dtype, (x,))

    def neg(self, x): return self._unary('negate', x)
    def exp(self, x): return self._unary('exponential', x)
    def log(self, x): return self._unary('log', x)
    def tanh(self, x): return self._unary('tanh', x)
    def logistic(self, x): return self._unary('logistic', x)
    def rsqrt(self, x): return self._unary('rsqrt', x)
    def sqrt(self, x): return self._unary('sqrt', x)
    def sine(self, x): return self._unary('sine', x)
    def cosine(self, x): return self._unary('cosine', x)

    def convert(self, x, dtype):
        if x.dtype == dtype:
            return x
        return self._new('convert', x.shape, dtype, (x,))

    def compare(self, a, b, direction):
        a, b = self._coerce(a, b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        assert direction in ('EQ', 'NE', 'LT', 'LE', 'GT', 'GE')
        return self._new('compare', a.shape, 'i1', (a, b),
                         {'direction': direction})

    def select(self, pred, a, b):
        a, b = self._coerce(a, b)
        assert pred.dtype == 'i1' and pred.shape == a.shape, (pred, a)
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        return self._new('select', a.shape, a.dtype, (pred, a, b))

    def stop_gradient(self, x):
        """Identity that blocks the gradient; prints as nothing."""
        return self._new('stop_gradient', x.shape, x.dtype, (x,))

    # ------------------------------------------------------- structural

    def iota(self, shape, dim, dtype='i32'):
        shape = _ints(shape)
        assert 0 <= dim < len(shape)
        return self._new('iota', shape, dtype, (), {'dim': dim})

    def broadcast_in_dim(self, x, shape, dims):
        shape, dims = _ints(shape), _ints(dims)
        assert len(dims) == x.rank, (x, shape, dims)
        assert len(set(dims)) == len(dims)
        for i, d in enumerate(dims):
            assert 0 <= d < len(shape) and x.shape[i] in (1, shape[d]), \
                (x, shape, dims)
        if shape == x.shape and dims == tuple(range(x.rank)):
            return x
        return self._new('broadcast_in_dim', shape, x.dtype, (x,),
                         {'dims': dims})

    def reshape(self, x, shape):
        shape = _ints(shape)
        assert prod(shape) == prod(x.shape), (x, shape)
        if shape == x.shape:
            return x
        return self._new('reshape', shape, x.dtype, (x,))

    def transpose(self, x, perm):
        perm = _ints(perm)
        assert sorted(perm) == list(range(x.rank)), (x, perm)
        if perm == tuple(range(x.rank)):
            return x
        return self._new('transpose', tuple(x.shape[p] for p in perm),
                         x.dtype, (x,), {'perm': perm})

    def _reduce(self, kind, x, dims):
        dims = tuple(sorted(_ints(dims)))
        assert len(set(dims)) == len(dims) and all(
            0 <= d < x.rank for d in dims), (x, dims)
        if not dims:
            return x
        shape = tuple(n for i, n in enumerate(x.shape) if i not in dims)
        init = self.const(0.0 if kind == 'add' else float('-inf'), x.dtype)
        return self._new('reduce', shape, x.dtype, (x, init),
                         {'kind': kind, 'dims': dims})

    def reduce_sum(self, x, dims): return self._reduce('add', x, dims)
    def reduce_max(self, x, dims): return self._reduce('maximum', x, dims)

    def dot_general(self, a, b, contract, batch=((), ())):
        """Result dims: batch dims, then a's free dims, then b's free dims."""
        ac, bc = _ints(contract[0]), _ints(contract[1])
        ab, bb = _ints(batch[0]), _ints(batch[1])
        assert len(ac) == len(bc) and len(ab) == len(bb)
        assert a.dtype == b.dtype, (a, b)
        for i, j in zip(ac, bc):
            assert a.shape[i] == b.shape[j], (a, b, contract)
        for i, j in zip(ab, bb):
            assert a.shape[i] == b.shape[j], (a, b, batch)
        assert len(set(ac + ab)) == len(ac + ab)
        assert len(set(bc + bb)) == len(bc + bb)
        af = [i for i in range(a.rank) if i not in ac and i not in ab]
        bf = [i for i in range(b.rank) if i not in bc and i not in bb]
        shape = (tuple(a.shape[i] for i in ab) +
                 tuple(a.shape[i] for i in af) +
                 tuple(b.shape[i] for i in bf))
        return self._new('dot_general', shape, a.dtype, (a, b),
                         {'contract': (ac, bc), 'batch': (ab, bb)})

    def slice(self, x, start, limit, strides=None):
        start, limit = _ints(start), _ints(limit)
        strides = _ints(strides) if strides else (1,) * x.rank
        assert len(start) == len(limit) == len(strides) == x.rank
        shape = []
        for s, l, st, n in zip(start, limit, strides, x.shape):
            assert 0 <= s <= l <= n and st >= 1, (x, start, limit)
            shape.append((l - s + st - 1) // st)
        return self._new('slice', tuple(shape), x.dtype, (x,),
                         {'start': start, 'limit': limit, 'strides': strides})

    def concatenate(self, xs, dim):
        xs = list(xs)
        assert xs
        r = xs[0].rank
        for x in xs:
            assert x.rank == r and x.dtype == xs[0].dtype
            for i in range(r):
                assert i == dim or x.shape[i] == xs[0].shape[i], (xs, dim)
        shape = list(xs[0].shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        return self._new('concatenate', tuple(shape), xs[0].dtype, xs,
                         {'dim': dim})

    def pad(self, x, value, low, high, interior=None):
        low, high = _ints(low), _ints(high)
        interior = _ints(interior) if interior else (0,) * x.rank
        assert len(low) == len(high) == len(interior) == x.rank
        pv = value if isinstance(value, Value) else self.const(value,
                                                               x.dtype)
        assert pv.shape == () and pv.dtype == x.dtype
        shape = []
        for n, lo, hi, it in zip(x.shape, low, high, interior):
            assert it >= 0
            m = lo + hi + n + max(n - 1, 0) * it
            assert m >= 0
            shape.append(m)
        return self._new('pad', tuple(shape), x.dtype, (x, pv),
                         {'low': low, 'high': high, 'interior': interior})

    def reverse(self, x, dims):
        dims = tuple(sorted(_ints(dims)))
        if not dims:
            return x
        return self._new('reverse', x.shape, x.dtype, (x,), {'dims': dims})

    def dynamic_update_slice(self, x, update, starts):
        assert update.rank == x.rank and len(starts) == x.rank
        assert update.dtype == x.dtype
        for n, m in zip(x.shape, update.shape):
            assert m <= n
        for s in starts:
            assert s.shape == () and s.dtype == starts[0].dtype
        return self._new('dynamic_update_slice', x.shape, x.dtype,
                         (x, update) + tuple(starts))

    def dynamic_slice(self, x, starts, sizes):
        sizes = _ints(sizes)
        assert len(starts) == len(sizes) == x.rank, (x, starts, sizes)
        for n, m in zip(x.shape, sizes):
            assert 0 <= m <= n, (x, sizes)
        for s in starts:
            assert s.shape == () and s.dtype == starts[0].dtype
        return self._new('dynamic_slice', sizes, x.dtype,
                         (x,) + tuple(starts), {'sizes': sizes})

    # ------------------------------------------------------ control flow

    def block_arg(self, shape, dtype=None):
        """An argument of this graph used as a region (a loop's iterArg)."""
        v = self._new('arg', _ints(shape), dtype or self.dtype, (),
                      {'name': 'iterArg'})
        self.args.append(v)
        return v

    def while_loop(self, cond, body, inits):
        """stablehlo.while over the region graphs cond and body: both take
        one block_arg per init (same types); cond.outputs is one i1
        scalar, body.outputs the next values.  Returns (the op, its
        results); the op has no gradient unless attrs['vjp'] is set."""
        inits = list(inits)
        assert len(cond.args) == len(body.args) == len(inits) == \
            len(body.outputs), (len(cond.args), len(body.args), len(inits))
        for a, b, v, o in zip(cond.args, body.args, inits, body.outputs):
            assert a.shape == b.shape == v.shape == o.shape and \
                a.dtype == b.dtype == v.dtype == o.dtype, (a, b, v, o)
        c, = cond.outputs
        assert c.shape == () and c.dtype == 'i1', c
        w = self._new('while', (), 'tuple', inits,
                      {'cond': cond, 'body': body})
        return w, [self._new('result', v.shape, v.dtype, (w,), {'index': k})
                   for k, v in enumerate(inits)]

    # ------------------------------------------------- multi-result ops

    def _results(self, node, types):
        return [self._new('result', shape, dtype, (node,), {'index': k})
                for k, (shape, dtype) in enumerate(types)]

    def optimization_barrier(self, xs):
        """stablehlo.optimization_barrier of xs: the same values, across
        which XLA moves no computation (JAX's remat emits one so that the
        recomputation is not merged with the forward pass).  Returns its
        results."""
        xs = list(xs)
        assert xs
        b = self._new('optimization_barrier', (), 'tuple', xs)
        return self._results(b, [(x.shape, x.dtype) for x in xs])

    def custom_call(self, target, operands, results, attrs=()):
        """stablehlo.custom_call @target(operands) with results of the
        given (shape, dtype); attrs: (name, printed value) pairs, in the
        order printed.  Returns its results."""
        c = self._new('custom_call', (), 'tuple', list(operands),
                      {'target': target, 'results': list(results),
                       'attrs': list(attrs)})
        return self._results(c, results)

    def custom_vjp(self, out, inputs, vjp):
        """The value out, whose gradient is vjp(g, ct, need) -> one
        cotangent (or None) per input instead of the transpose of the ops
        from inputs to out (jax.custom_vjp; what jax.checkpoint does to
        its function).  Prints as nothing: its name is out's."""
        return self._new('custom_vjp', out.shape, out.dtype,
                         (out,) + tuple(inputs), {'vjp': vjp})

    def named(self, x, name):
        """x with its op located as loc("name"), and its cotangent's op as
        loc("transpose(jvp(name))"): what jax.named_scope leaves in the
        locations of the forward op and of the backward op that makes the
        cotangent, for a schedule to name (PartIR's tag).  Prints as
        nothing."""
        if x.op not in ('arg', 'constant'):
            x.attrs['loc'] = name
        return self._new('named', x.shape, x.dtype, (x,), {'name': name})

    def checkpoint_name(self, x, name):
        """jax.ad_checkpoint.checkpoint_name: names x for remat policies."""
        x.attrs['ckpt_name'] = name
        return x

    # ---------------------------------------------- gather / scatter rows

    def gather_rows(self, table, idx):
        """table[idx[..., 0]]: rows of dim 0 selected by idx [..., 1]."""
        assert idx.dtype == 'i32' and idx.shape and idx.shape[-1] == 1
        assert table.rank >= 1
        shape = idx.shape[:-1] + table.shape[1:]
        return self._new('gather', shape, table.dtype, (table, idx))

    def scatter_add_rows(self, operand, idx, updates):
        """operand with updates[i] added to row idx[i, 0]."""
        assert idx.dtype == 'i32' and idx.shape and idx.shape[-1] == 1
        assert updates.shape == idx.shape[:-1] + operand.shape[1:], \
            (operand, idx, updates)
        assert updates.dtype == operand.dtype
        return self._new('scatter', operand.shape, operand.dtype,
                         (operand, idx, updates))


    def cumsum(self, x, dim):
        """jnp.cumsum(x, axis=dim) as JAX lowers it (its reduce_window
        form): a stablehlo.reduce_window adding a window of the whole dim,
        padded by its length - 1 before.  No gradient."""
        n = x.shape[dim]
        win = tuple(n if d == dim else 1 for d in range(x.rank))
        pad = tuple((n - 1, 0) if d == dim else (0, 0) for d in range(x.rank))
        init = self.const(0.0 if x.dtype in FLOAT_TYPES else 0, x.dtype)
        return self._new('reduce_window', x.shape, x.dtype, (x, init),
                         {'window': win, 'padding': pad})

    # ------------------------------------------------------- convolution

    def conv(self, x, w, dn, strides=None, padding=None, lhs_dilation=None,
             rhs_dilation=None):
        """General convolution, feature and batch group count 1.

        dn = (lhs_spec, rhs_spec, out_spec) in JAX's ConvDimensionNumbers
        form: lhs_spec = (batch dim, feature dim, spatial dims...),
        rhs_spec = (out-feature dim, in-feature dim, spatial dims...),
        out_spec = (batch dim, feature dim, spatial dims...).
        """
        ls, rs, os_ = (_ints(s) for s in dn)
        r = x.rank
        assert w.rank == r and len(ls) == len(rs) == len(os_) == r
        ns = r - 2
        strides = _ints(strides or (1,) * ns)
        padding = tuple(_ints(p) for p in (padding or ((0, 0),) * ns))
        lhs_dilation = _ints(lhs_dilation or (1,) * ns)
        rhs_dilation = _ints(rhs_dilation or (1,) * ns)
        assert x.dtype == w.dtype
        assert x.shape[ls[1]] == w.shape[rs[1]], (x, w, dn)
        shape = [0] * r
        shape[os_[0]] = x.shape[ls[0]]
        shape[os_[1]] = w.shape[rs[0]]
        for k in range(ns):
            n = x.shape[ls[2 + k]]
            kk = w.shape[rs[2 + k]]
            nd = (n - 1) * lhs_dilation[k] + 1 if n else 0
            kd = (kk - 1) * rhs_dilation[k] + 1 if kk else 0
            padded = nd + padding[k][0] + padding[k][1]
            assert padded >= kd, (x, w, padding)
            shape[os_[2 + k]] = (padded - kd) // strides[k] + 1
        return self._new('convolution', tuple(shape), x.dtype, (x, w), {
            'dn': (ls, rs, os_), 'strides': strides, 'padding': padding,
            'lhs_dilation': lhs_dilation, 'rhs_dilation': rhs_dilation})

    # ---------------------------------------------------------- autodiff

    def grad(self, loss, wrt):
        """Gradients of scalar `loss` w.r.t. the Values in `wrt`.

        Emits the backward ops into this graph and returns one Value per
        entry of wrt (zeros where loss does not depend on it).
        """
        assert loss.shape == () and loss.dtype in FLOAT_TYPES
        return self.vjp([loss], [self.const(1.0, loss.dtype)], wrt)

    def vjp(self, outs, cts, wrt):
        """Cotangents of the Values in `wrt` given cotangents `cts` of the
        Values `outs` (distinct); the backward ops go into this graph."""
        ct = {}
        for o, c in zip(outs, cts):
            assert o.id not in ct and c.shape == o.shape, (o, c)
            ct[o.id] = c
        for node in reversed(self.nodes[:]):
            c = ct.pop(node.id, None)
            if c is None or not node.needs_grad:
                continue
            if node.op == 'result':
                # One result of a multi-result op: its cotangent joins the
                # op's {result index: cotangent}, handled at the op.
                d = ct.setdefault(node.operands[0].id, {})
                k = node.attrs['index']
                d[k] = c if k not in d else self.add(d[k], c)
                continue
            need = [o.needs_grad for o in node.operands]
            cts = VJP[node.op](self, node, c, need)
            for o, oc, nd in zip(node.operands, cts, need):
                if not nd or oc is None:
                    continue
                assert oc.shape == o.shape and oc.dtype == o.dtype, \
                    (node, o, oc)
                prev = ct.get(o.id)
                ct[o.id] = oc if prev is None else self.add(prev, oc)
        return [ct.get(w.id) or self.zeros_like(w) for w in wrt]


# ====================================================================
# Vector-Jacobian products: VJP[op](g, node, cotangent, need) returns one
# cotangent (or None) per operand; `need` says which operands want one.
# ====================================================================

VJP = {}


def _vjp(op):
    def deco(f):
        VJP[op] = f
        return f
    return deco


@_vjp('named')
def _(g, n, ct, need):
    if ct.op not in ('arg', 'constant') and 'loc' not in ct.attrs:
        ct.attrs['loc'] = 'transpose(jvp(%s))' % n.attrs['name']
    return [ct]


@_vjp('add')
def _(g, n, ct, need):
    return [ct, ct]


@_vjp('subtract')
def _(g, n, ct, need):
    return [ct, g.neg(ct) if need[1] else None]


@_vjp('multiply')
def _(g, n, ct, need):
    a, b = n.operands
    return [g.mul(ct, b) if need[0] else None,
            g.mul(a, ct) if need[1] else None]


@_vjp('divide')
def _(g, n, ct, need):
    a, b = n.operands
    return [g.div(ct, b) if need[0] else None,
            g.div(g.mul(g.neg(ct), a), g.mul(b, b)) if need[1] else None]


@_vjp('maximum')
def _(g, n, ct, need):
    a, b = n.operands
    pick_a = g.compare(a, b, 'GT')
    z = g.zeros_like(ct)
    return [g.select(pick_a, ct, z) if need[0] else None,
            g.select(pick_a, z, ct) if need[1] else None]


@_vjp('negate')
def _(g, n, ct, need):
    return [g.neg(ct)]


@_vjp('exponential')
def _(g, n, ct, need):
    return [g.mul(ct, n)]


@_vjp('log')
def _(g, n, ct, need):
    return [g.div(ct, n.operands[0])]


@_vjp('tanh')
def _(g, n, ct, need):
    return [g.mul(ct, g.sub(1.0, g.mul(n, n)))]


@_vjp('logistic')
def _(g, n, ct, need):
    return [g.mul(ct, g.mul(n, g.sub(1.0, n)))]


@_vjp('rsqrt')
def _(g, n, ct, need):
    x = n.operands[0]
    return [g.mul(ct, g.mul(g.full(x.shape, -0.5, x.dtype), g.div(n, x)))]


@_vjp('sqrt')
def _(g, n, ct, need):
    return [g.mul(ct, g.div(g.full(n.shape, 0.5, n.dtype), n))]


@_vjp('sine')
def _(g, n, ct, need):
    return [g.mul(ct, g.cosine(n.operands[0]))]


@_vjp('cosine')
def _(g, n, ct, need):
    return [g.neg(g.mul(ct, g.sine(n.operands[0])))]


@_vjp('convert')
def _(g, n, ct, need):
    return [g.convert(ct, n.operands[0].dtype)]


@_vjp('select')
def _(g, n, ct, need):
    p = n.operands[0]
    z = g.zeros_like(ct)
    return [None,
            g.select(p, ct, z) if need[1] else None,
            g.select(p, z, ct) if need[2] else None]


@_vjp('broadcast_in_dim')
def _(g, n, ct, need):
    x = n.operands[0]
    dims = n.attrs['dims']
    unit = [i for i, s in enumerate(x.shape)
            if s == 1 and n.shape[dims[i]] != 1]
    kept = [d for i, d in enumerate(dims) if i not in unit]
    axes = [d for d in range(n.rank) if d not in kept]
    r = g.reduce_sum(ct, axes)
    return [g.reshape(r, x.shape)]


@_vjp('reshape')
def _(g, n, ct, need):
    return [g.reshape(ct, n.operands[0].shape)]


@_vjp('transpose')
def _(g, n, ct, need):
    perm = n.attrs['perm']
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [g.transpose(ct, inv)]


@_vjp('reduce')
def _(g, n, ct, need):
    x = n.operands[0]
    assert n.attrs['kind'] == 'add', 'reduce max: use stop_gradient'
    kept = [i for i in range(x.rank) if i not in n.attrs['dims']]
    return [g.broadcast_in_dim(ct, x.shape, kept), None]


def _ranges_like(*xs):
    start = 0
    out = []
    for x in xs:
        out.append(list(range(start, start + len(x))))
        start += len(x)
    return out


def _argsort(xs):
    return sorted(range(len(xs)), key=lambda i: xs[i])


def _dot_transpose_lhs(g, ct, x, y, contract, batch, swap_ans=False):
    # As jax._src.lax.lax._dot_general_transpose_lhs.
    x_contract, y_contract = contract
    x_batch, y_batch = batch
    x_kept = [i for i in range(x.rank)
              if i not in x_contract and i not in x_batch]
    y_kept = [i for i in range(y.rank)
              if i not in y_contract and i not in y_batch]
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    order = _argsort(y_contract)
    x_contract_sorted_by_y = [x_contract[i] for i in order]
    out_axes = _argsort(list(x_batch) + x_kept + x_contract_sorted_by_y)
    d = g.dot_general(ct, y, (ans_y, y_kept), (ans_batch, y_batch))
    return g.transpose(d, out_axes)


@_vjp('dot_general')
def _(g, n, ct, need):
    x, y = n.operands
    (xc, yc), (xb, yb) = n.attrs['contract'], n.attrs['batch']
    gx = _dot_transpose_lhs(g, ct, x, y, (xc, yc), (xb, yb)) \
        if need[0] else None
    gy = _dot_transpose_lhs(g, ct, y, x, (yc, xc), (yb, xb), swap_ans=True) \
        if need[1] else None
    return [gx, gy]


@_vjp('slice')
def _(g, n, ct, need):
    x = n.operands[0]
    start, strides = n.attrs['start'], n.attrs['strides']
    low, high, interior = [], [], []
    for s, st, m, size in zip(start, strides, n.shape, x.shape):
        real_limit = s + ((m - 1) * st + 1 if m else 0)
        low.append(s)
        high.append(size - real_limit)
        interior.append(st - 1)
    return [g.pad(ct, 0.0, low, high, interior)]


@_vjp('pad')
def _(g, n, ct, need):
    x = n.operands[0]
    low, interior = n.attrs['low'], n.attrs['interior']
    assert min(low) >= 0 and min(n.attrs['high']) >= 0, 'negative pad'
    start = list(low)
    limit = [lo + sz + max(sz - 1, 0) * it
             for lo, sz, it in zip(low, x.shape, interior)]
    strides = [it + 1 for it in interior]
    gx = g.slice(ct, start, limit, strides)
    gp = None
    if need[1]:     # the padding value receives what gx did not
        gp = g.sub(g.reduce_sum(ct, range(ct.rank)),
                   g.reduce_sum(gx, range(gx.rank)))
    return [gx if need[0] else None, gp]


@_vjp('concatenate')
def _(g, n, ct, need):
    dim = n.attrs['dim']
    out = []
    off = 0
    for x, nd in zip(n.operands, need):
        if nd:
            start = [0] * n.rank
            limit = list(n.shape)
            start[dim] = off
            limit[dim] = off + x.shape[dim]
            out.append(g.slice(ct, start, limit))
        else:
            out.append(None)
        off += x.shape[dim]
    return out


@_vjp('reverse')
def _(g, n, ct, need):
    return [g.reverse(ct, n.attrs['dims'])]


@_vjp('stop_gradient')
def _(g, n, ct, need):
    return [None]


@_vjp('custom_vjp')
def _(g, n, ct, need):
    return [None] + list(n.attrs['vjp'](g, ct, need[1:]))


@_vjp('gather')
def _(g, n, ct, need):
    table, idx = n.operands
    return [g.scatter_add_rows(g.zeros_like(table), idx, ct), None]


@_vjp('scatter')
def _(g, n, ct, need):
    operand, idx, upd = n.operands
    return [ct if need[0] else None, None,
            g.gather_rows(ct, idx) if need[2] else None]


def _dilate_shape(shape, dil):
    return [0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dil)]


def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


@_vjp('convolution')
def _(g, n, ct, need):
    # As jax._src.lax.convolution._conv_general_dilated_transpose_lhs/rhs.
    x, w = n.operands
    a = n.attrs
    ls, rs, os_ = a['dn']
    strides, padding = a['strides'], a['padding']
    lhs_dil, rhs_dil = a['lhs_dilation'], a['rhs_dilation']
    in_sp = [x.shape[d] for d in ls[2:]]
    k_sp = [w.shape[d] for d in rs[2:]]
    out_sp = [n.shape[d] for d in os_[2:]]
    lhs_d = _dilate_shape(in_sp, lhs_dil)
    rhs_d = _dilate_shape(k_sp, rhs_dil)
    out_d = _dilate_shape(out_sp, strides)
    gx = gw = None
    if need[0]:
        before = [k - lo - 1 for k, (lo, _) in zip(rhs_d, padding)]
        after = [l + k - 1 - o - b
                 for l, k, o, b in zip(lhs_d, rhs_d, out_d, before)]
        gx = g.conv(ct, g.reverse(w, rs[2:]),
                    (os_, _spec_transpose(rs), ls),
                    strides=lhs_dil, padding=list(zip(before, after)),
                    lhs_dilation=strides, rhs_dilation=rhs_dil)
        assert gx.shape == x.shape, (gx, x)
    if need[1]:
        lo = [p[0] for p in padding]
        hi = [(o - l) + (k - p - 1)
              for o, l, k, p in zip(out_d, lhs_d, rhs_d, lo)]
        gw = g.conv(x, ct,
                    (_spec_transpose(ls), _spec_transpose(os_),
                     _spec_transpose(rs)),
                    strides=rhs_dil, padding=list(zip(lo, hi)),
                    lhs_dilation=lhs_dil, rhs_dilation=strides)
        assert gw.shape == w.shape, (gw, w)
    return [gx, gw]


# ====================================================================
# Scans: jax.lax.scan over the leading axis, as JAX lowers it
# ====================================================================

class _Aval:
    """A shape and element type (what an iterArg is made from)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def _index(r, i, n):
    """i < 0 ? i + n : i, the index normalization JAX's dynamic slicing
    emits for every traced start index (jax.lax.dynamic_index_in_dim)."""
    neg = r.compare(i, r.const(0, 'i32'), 'LT')
    return r.select(neg, r.add(i, r.const(n, 'i32')), i)


def index_in_dim(r, xs, i):
    """xs[i] of xs [L, ...] for a traced i: dynamic_slice + reshape."""
    idx = _index(r, i, xs.shape[0])
    zero = r.const(0, 'i32')
    s = r.dynamic_slice(xs, (idx,) + (zero,) * (xs.rank - 1),
                        (1,) + xs.shape[1:])
    return r.reshape(s, xs.shape[1:])


def update_index_in_dim(r, xs, y, i):
    """xs with xs[i] = y: broadcast_in_dim to [1, ...] +
    dynamic_update_slice (jax.lax.dynamic_update_index_in_dim)."""
    u = r.broadcast_in_dim(y, (1,) + y.shape, range(1, y.rank + 1))
    idx = _index(r, i, xs.shape[0])
    zero = r.const(0, 'i32')
    return r.dynamic_update_slice(xs, u, (idx,) + (zero,) * y.rank)


def _copier(r, env):
    """look(v): the Value of r standing for v of another graph: env[v.id],
    or v's scalar constant interned in r."""
    def look(v):
        if v.op == 'constant':
            return r.const(v.attrs['value'], v.dtype)
        return env[v.id]
    return look


def _copy(r, n, look):
    """Emits op n of another graph into r with its operands mapped."""
    return r._new(n.op, n.shape, n.dtype,
                  tuple(look(o) for o in n.operands), dict(n.attrs))


# ====================================================================
# Rematerialization: jax.checkpoint with a policy, as JAX lowers it
# ====================================================================

# Remat policies by what they let the forward pass save (jax.checkpoint's
# `policy`; 'none' is no checkpointing):
#   full           nothing (jax.checkpoint without a policy; MaxText "full")
#   dots           every dot_general result (checkpoint_dots)
#   dots_no_batch  dot_generals without batch dims, i.e. the projections
#                  by weights (dots_with_no_batch_dims_saveable; MaxText
#                  "minimal", PAXML's "save dots with no batch dims")
#   minimal_flash  those and the values named 'context' (the attention's
#                  output; MaxText "minimal_flash")
#   attn           everything but the values named 'attn_core' (scores
#                  and softmax: Korthikanti et al.'s selective
#                  recomputation)
#   sac            torchtitan's per-op selective activation checkpointing
#                  (selective_ac_option = 'op'): the fused attention's
#                  results and every other projection by a weight, the
#                  1st, 3rd, ... in forward order (its policy counts the
#                  block's aten.mm calls and recomputes the even ones)
REMAT = ('none', 'full', 'dots', 'dots_no_batch', 'minimal_flash', 'attn',
         'sac')


def _sac_saved(fwd):
    """The ids of the values torchtitan's per-op policy saves among a
    block's forward ops fwd: the results of a fused attention (cuDNN's
    fmha custom_call: torchtitan saves SDPA's outputs) and the odd-numbered projections by weights (dots
    without batch dims), counted in forward order from 1."""
    saved, mm = set(), 0
    for n in fwd:
        if n.op == 'result' and n.operands[0].op == 'custom_call' and \
                'fmha' in n.operands[0].attrs['target']:
            saved.add(n.id)
        elif n.op == 'dot_general' and not n.attrs['batch'][0]:
            mm += 1
            if mm % 2:
                saved.add(n.id)
    return saved


def _saveable(policy, v, sac=None):
    if v.dtype == 'tuple':              # a multi-result op itself
        return False
    name = v.attrs.get('ckpt_name')
    if policy == 'full':
        return False
    if policy == 'sac':
        return v.id in sac
    if policy == 'attn':
        return name != 'attn_core'
    dot = v.op == 'dot_general'
    if policy == 'dots':
        return dot
    no_batch = dot and not v.attrs['batch'][0]
    if policy == 'dots_no_batch':
        return no_batch
    assert policy == 'minimal_flash', policy
    return no_batch or name == 'context'


def _backward_reads(body, fwd, ins, grads):
    """The backward ops of a function traced into body (its forward ops
    fwd, its inputs ins, the cotangents grads of ins computed by
    body.vjp): (those ops, the forward values and inputs they read, the
    ids of the values that depend on the inputs)."""
    fwd_ids = set(n.id for n in fwd)
    varying = set(v.id for v in ins)
    for n in fwd:
        if any(o.id in varying for o in n.operands):
            varying.add(n.id)
    bnodes, _ = live_nodes(body, grads)
    bnodes = [n for n in bnodes if n.id not in fwd_ids]
    read = {}
    for v in [o for n in bnodes for o in n.operands] + list(grads):
        if v.id in fwd_ids or v.id in varying:
            read[v.id] = v
    return bnodes, list(read.values()), varying


def _remat_plan(read, varying, policy, fwd):
    """What a checkpointed function's backward gets from its forward pass:
    (the residuals, in creation order: the inputs and values it saves; the
    ids of the values it recomputes).  read: the values the backward ops
    read; varying: ids of the values that depend on the inputs.  Values
    that depend on no input (masks, iotas) are recomputed, never saved
    (JAX would save some); inputs are always residuals; policy None saves
    every value read (no remat).  fwd: the function's forward ops (the
    order that policy 'sac' counts in)."""
    sac = _sac_saved(fwd) if policy == 'sac' else None
    res, rec = {}, set()
    stack = list(read)
    while stack:
        v = stack.pop()
        if v.id in res or v.id in rec or v.op == 'constant':
            continue
        if v.op == 'arg':
            res[v.id] = v
        elif v.id not in varying or not (policy is None or
                                         _saveable(policy, v, sac)):
            rec.add(v.id)
            stack.extend(v.operands)
        else:
            res[v.id] = v
    return sorted(res.values(), key=lambda v: v.id), rec


def remat(g, body, ins, out, actual, policy):
    """jax.checkpoint(f, policy=policy)(*actual) for f traced once into
    the Graph body (its args ins, its result out): emits f's ops into g
    and returns its result, whose gradient is what JAX emits for a
    checkpointed function: a stablehlo.optimization_barrier over the
    residuals the policy saves (the inputs among them) and the cotangent,
    the recomputation from the barrier's results of the values the
    backward needs and the policy did not save, then the backward ops."""
    env = {b.id: v for b, v in zip(ins, actual)}
    look = _copier(g, env)
    fwd = body.nodes[:]
    for n in fwd:
        env[n.id] = _copy(g, n, look)

    def vjp(g2, ct, need):
        ct_in = body.arg('ct', out.shape, out.dtype)
        grads = body.vjp([out], [ct_in], ins)
        bnodes, read, varying = _backward_reads(body, fwd, ins, grads)
        resid, recompute = _remat_plan(read, varying, policy, fwd)
        bar = g2.optimization_barrier([look(v) for v in resid] + [ct])
        env2 = {v.id: b for v, b in zip(resid, bar)}
        env2[ct_in.id] = bar[-1]
        look2 = _copier(g2, env2)
        for n in fwd:
            if n.id in recompute:
                env2[n.id] = _copy(g2, n, look2)
        for n in bnodes:
            env2[n.id] = _copy(g2, n, look2)
        return [look2(d) if nd else None for d, nd in zip(grads, need)]

    return g.custom_vjp(look(out), actual, vjp)


def scan(g, body, carry, xs_in, out, init, xs, policy=None):
    """y = jax.lax.scan(f, init, xs)[0] for a body f traced once into the
    Graph `body` on one step's shapes: its args `carry` (requires_grad)
    and xs_in (one slice of each stacked xs), its result `out` (same type
    as carry).  Emits into g what jax.jit prints for the scan and, when
    differentiated, for its transpose:

    forward: one stablehlo.while carrying the counter i, the carry, one
    zero [L, ...] buffer per residual and the stacked xs (in this order,
    as recent JAX prints scans); cond `i < L`; the body reads each x[i]
    with dynamic_slice + reshape, runs f, writes each residual (a value
    the backward pass reads that changes from step to step) into its
    buffer with dynamic_update_slice, and returns i + 1.

    backward (built by the while's vjp when g.grad reaches it): a second
    while carrying the counter, the carry's cotangent, one zero [L, ...]
    gradient buffer per xs, the residual buffers and the stacked xs it
    reads; the body works on step L - 1 - i (the counter counts up, the
    layers are visited in reverse, as JAX's transposed scan does), reads
    that step's residuals, runs f's backward ops and writes the step's
    gradients with dynamic_update_slice.  Values of f that depend on
    neither the carry nor the xs (masks, broadcast constants) are
    recomputed in the backward body rather than stacked.  Every traced
    index goes through JAX's `i < 0 ? i + L : i`.

    policy: f is jax.checkpoint'ed with that remat policy (REMAT): the
    forward loop stacks only what the policy saves, and the backward body
    puts that step's residuals and the cotangent through an
    optimization_barrier, recomputes the rest, then runs the backward
    ops (see remat).  Returns y."""
    L = xs[0].shape[0]
    assert len(xs) == len(xs_in) and all(x.shape[0] == L for x in xs)
    for x, b in zip(xs, xs_in):
        assert x.shape[1:] == b.shape and x.dtype == b.dtype, (x, b)
    assert carry.shape == out.shape == init.shape and \
        carry.dtype == out.dtype == init.dtype, (carry, out, init)
    fwd = body.nodes[:]
    ct_in = body.arg('ct', out.shape, out.dtype)
    grads = body.vjp([out], [ct_in], [carry] + list(xs_in))
    xs_pos = {b.id: k for k, b in enumerate(xs_in)}
    bnodes, read, varying = _backward_reads(body, fwd, [carry] + xs_in,
                                            grads)
    resid, recompute = _remat_plan(read, varying, policy, fwd)
    used_xs = sorted(xs_pos[v.id] for v in resid if v.id in xs_pos)
    res = [v for v in resid if v.id not in xs_pos]  # the carry and values

    def iter_args(r, parts):
        return [[r.block_arg(v.shape, v.dtype) for v in part]
                for part in parts]

    counter = [_Aval((), 'i32')]
    # ---- forward loop: (i, carry, residual buffers, stacked xs)
    stacks_t = [_Aval((L,) + v.shape, v.dtype) for v in res]
    parts = [counter, [init], stacks_t, xs]
    fc = Graph(g.dtype)
    (ci,), _, _, _ = iter_args(fc, parts)
    fc.outputs = [fc.compare(ci, fc.const(L, 'i32'), 'LT')]
    fb = Graph(g.dtype)
    (bi,), (bc,), bs, bx = iter_args(fb, parts)
    env = {carry.id: bc}
    for k, b in enumerate(xs_in):
        env[b.id] = index_in_dim(fb, bx[k], bi)
    look = _copier(fb, env)
    for n in fwd:
        env[n.id] = _copy(fb, n, look)
    new_stacks = [update_index_in_dim(fb, s, look(v), bi)
                  for s, v in zip(bs, res)]
    fb.outputs = [fb.add(bi, fb.const(1, 'i32')), look(out)] + \
        new_stacks + bx
    inits = [g.const(0, 'i32'), init] + \
        [g.zeros(s.shape, s.dtype) for s in stacks_t] + list(xs)
    w, results = g.while_loop(fc, fb, inits)
    y = results[1]
    stacks = results[2:2 + len(res)]

    def vjp(g, node, cts, need):
        assert set(cts) == {1}, 'scan: only the carry has a gradient'
        ct_y = cts[1]
        # (i, the carry's cotangent, gradient buffers, residual buffers,
        # the stacked xs the backward reads)
        parts = [counter, [ct_y], xs, stacks, [xs[k] for k in used_xs]]
        bc_ = Graph(g.dtype)
        (ci,), _, _, _, _ = iter_args(bc_, parts)
        bc_.outputs = [bc_.compare(ci, bc_.const(L, 'i32'), 'LT')]
        bb = Graph(g.dtype)
        (bi,), (bct,), bg, br, bw = iter_args(bb, parts)
        rev = bb.sub(bb.sub(bb.const(L, 'i32'), bi), bb.const(1, 'i32'))
        saved = [v for v in res] + [xs_in[k] for k in used_xs]
        vals = [index_in_dim(bb, s, rev) for s in br] + \
            [index_in_dim(bb, w, rev) for w in bw] + [bct]
        if policy is not None:
            vals = bb.optimization_barrier(vals)
        env = {ct_in.id: vals[-1]}
        for v, x in zip(saved, vals):
            env[v.id] = x
        look = _copier(bb, env)
        for n in fwd:           # what the policy (or invariance) recomputes
            if n.id in recompute:
                env[n.id] = _copy(bb, n, look)
        for n in bnodes:
            env[n.id] = _copy(bb, n, look)
        gx = look(grads[0])
        new_g = [update_index_in_dim(bb, s, look(d), rev)
                 for s, d in zip(bg, grads[1:])]
        bb.outputs = [bb.add(bi, bb.const(1, 'i32')), gx] + new_g + br + bw
        binits = [g.const(0, 'i32'), ct_y] + \
            [g.zeros(x.shape, x.dtype) for x in xs] + stacks + parts[4]
        _, bres = g.while_loop(bc_, bb, binits)
        # Cotangents of the forward while's operands: i, init, buffers, xs.
        op_cts = [None, bres[1]] + [None] * len(stacks) + \
            list(bres[2:2 + len(xs)])
        return [c if nd else None for c, nd in zip(op_cts, need)]

    w.attrs['vjp'] = vjp
    return y




def fold(g, tb, carry_args, carry_outs, inits, x_args, xs, const_args,
         consts):
    """The forward-only jax.lax.scan whose body was traced into the Graph
    tb: its args carry_args (the carried values; carry_outs are their next
    values), x_args (one slice of each stacked xs) and const_args (values
    the body closes over: consts).  Emits one stablehlo.while carrying (i,
    the carries, xs, consts), whose body reads each x[i] with dynamic_slice
    + reshape and runs tb's ops; returns the final carries."""
    L = xs[0].shape[0]
    assert all(x.shape[0] == L and x.shape[1:] == a.shape
               for x, a in zip(xs, x_args))
    parts = [[_Aval((), 'i32')], inits, xs, consts]
    fc = Graph(g.dtype)
    ci = [fc.block_arg(v.shape, v.dtype) for part in parts for v in part][0]
    fc.outputs = [fc.compare(ci, fc.const(L, 'i32'), 'LT')]
    fb = Graph(g.dtype)
    (bi,), bc, bx, bk = [[fb.block_arg(v.shape, v.dtype) for v in part]
                         for part in parts]
    env = {a.id: v for a, v in zip(carry_args, bc)}
    env.update((a.id, v) for a, v in zip(const_args, bk))
    for a, x in zip(x_args, bx):
        env[a.id] = index_in_dim(fb, x, bi)
    look = _copier(fb, env)
    for n in tb.nodes:
        env[n.id] = _copy(fb, n, look)
    fb.outputs = [fb.add(bi, fb.const(1, 'i32'))] + \
        [look(o) for o in carry_outs] + bx + bk
    _, res = g.while_loop(fc, fb, [g.const(0, 'i32')] + list(inits) +
                          list(xs) + list(consts))
    return res[1:1 + len(inits)]


@_vjp('while')
def _(g, n, ct, need):
    assert 'vjp' in n.attrs, 'while: no gradient rule'
    return n.attrs['vjp'](g, n, ct, need)


# ====================================================================
# Text emission
# ====================================================================

def _bits_f32(v):
    return struct.unpack('<I', struct.pack('<f', v))[0]


def round_to(v, dtype):
    """v rounded to the precision of dtype (f64 result)."""
    if dtype == 'f64' or math.isinf(v) or math.isnan(v):
        return v
    if dtype == 'f32':
        return struct.unpack('<f', struct.pack('<f', v))[0]
    if dtype == 'f16':
        return struct.unpack('<e', struct.pack('<e', v))[0]
    if dtype == 'bf16':
        b = _bits_f32(v)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return struct.unpack('<f', struct.pack('<I', b))[0]
    raise ValueError(dtype)


_NEG_INF_HEX = {'f32': '0xFF800000', 'bf16': '0xFF80', 'f16': '0xFC00',
                'f64': '0xFFF0000000000000'}
_POS_INF_HEX = {'f32': '0x7F800000', 'bf16': '0x7F80', 'f16': '0x7C00',
                'f64': '0x7FF0000000000000'}
_DIGITS = {'f32': 9, 'bf16': 4, 'f16': 5, 'f64': 17}


def fmt_float(v, dtype):
    """A float literal as MLIR prints it: %.6e when that round-trips in
    dtype, else enough digits (APFloat style, e.g. -3.40282347E+38), and
    hex for infinities."""
    if math.isinf(v):
        return (_NEG_INF_HEX if v < 0 else _POS_INF_HEX)[dtype]
    assert not math.isnan(v)
    r = round_to(v, dtype)
    s = '%.6e' % r
    if round_to(float(s), dtype) == r:
        return s
    s = '%.*E' % (_DIGITS[dtype] - 1, r)
    mant, ex = s.split('E')
    if '.' in mant:
        mant = mant.rstrip('0')
        if mant.endswith('.'):
            mant += '0'
    e = int(ex)
    return '%sE%s%d' % (mant, '+' if e >= 0 else '-', abs(e))


def _lst(xs):
    return '[' + ', '.join(map(str, xs)) + ']'


def _fmt_unary_same(op):
    def f(n, N):
        return 'stablehlo.%s %s : %s' % (op, N(n.operands[0]), n.type)
    return f


def _fmt_binary_same(op):
    def f(n, N):
        a, b = n.operands
        return 'stablehlo.%s %s, %s : %s' % (op, N(a), N(b), n.type)
    return f


def _sig(n):
    return '(%s) -> %s' % (', '.join(o.type for o in n.operands), n.type)


_FMT = {}
for _op in ('add', 'subtract', 'multiply', 'divide', 'maximum', 'power'):
    _FMT[_op] = _fmt_binary_same(_op)
for _op in ('negate', 'exponential', 'log', 'tanh', 'logistic', 'rsqrt',
            'sqrt', 'sine', 'cosine'):
    _FMT[_op] = _fmt_unary_same(_op)


def _f(op):
    def deco(f):
        _FMT[op] = f
        return f
    return deco


@_f('convert')
def _(n, N):
    return 'stablehlo.convert %s : %s' % (N(n.operands[0]), _sig(n))


@_f('compare')
def _(n, N):
    a, b = n.operands
    kind = 'FLOAT' if a.dtype in FLOAT_TYPES else 'SIGNED'
    return 'stablehlo.compare  %s, %s, %s,  %s : %s' % (
        n.attrs['direction'], N(a), N(b), kind, _sig(n))


@_f('select')
def _(n, N):
    p, a, b = n.operands
    return 'stablehlo.select %s, %s, %s : %s, %s' % (
        N(p), N(a), N(b), p.type, n.type)


@_f('iota')
def _(n, N):
    return 'stablehlo.iota dim = %d : %s' % (n.attrs['dim'], n.type)


@_f('broadcast_in_dim')
def _(n, N):
    return 'stablehlo.broadcast_in_dim %s, dims = %s : %s' % (
        N(n.operands[0]), _lst(n.attrs['dims']), _sig(n))


@_f('reshape')
def _(n, N):
    return 'stablehlo.reshape %s : %s' % (N(n.operands[0]), _sig(n))


@_f('transpose')
def _(n, N):
    return 'stablehlo.transpose %s, dims = %s : %s' % (
        N(n.operands[0]), _lst(n.attrs['perm']), _sig(n))


@_f('reduce')
def _(n, N):
    x, init = n.operands
    return ('stablehlo.reduce(%s init: %s) applies stablehlo.%s across '
            'dimensions = %s : %s' % (N(x), N(init), n.attrs['kind'],
                                      _lst(n.attrs['dims']), _sig(n)))


@_f('dot_general')
def _(n, N):
    a, b = n.operands
    (ac, bc), (ab, bb) = n.attrs['contract'], n.attrs['batch']
    s = 'stablehlo.dot_general %s, %s, ' % (N(a), N(b))
    if ab:
        s += 'batching_dims = %s x %s, ' % (_lst(ab), _lst(bb))
    s += 'contracting_dims = %s x %s : %s' % (_lst(ac), _lst(bc), _sig(n))
    return s


@_f('slice')
def _(n, N):
    parts = []
    for s, l, st in zip(n.attrs['start'], n.attrs['limit'],
                        n.attrs['strides']):
        parts.append('%d:%d' % (s, l) if st == 1 else '%d:%d:%d' % (s, l, st))
    return 'stablehlo.slice %s [%s] : %s' % (
        N(n.operands[0]), ', '.join(parts), _sig(n))


@_f('concatenate')
def _(n, N):
    return 'stablehlo.concatenate %s, dim = %d : %s' % (
        ', '.join(N(o) for o in n.operands), n.attrs['dim'], _sig(n))


@_f('pad')
def _(n, N):
    x, v = n.operands
    return ('stablehlo.pad %s, %s, low = %s, high = %s, interior = %s : %s'
            % (N(x), N(v), _lst(n.attrs['low']), _lst(n.attrs['high']),
               _lst(n.attrs['interior']), _sig(n)))


@_f('reverse')
def _(n, N):
    return 'stablehlo.reverse %s, dims = %s : %s' % (
        N(n.operands[0]), _lst(n.attrs['dims']), n.type)


@_f('dynamic_update_slice')
def _(n, N):
    return 'stablehlo.dynamic_update_slice %s : %s' % (
        ', '.join(N(o) for o in n.operands), _sig(n))


@_f('dynamic_slice')
def _(n, N):
    return 'stablehlo.dynamic_slice %s, sizes = %s : %s' % (
        ', '.join(N(o) for o in n.operands), _lst(n.attrs['sizes']), _sig(n))


@_f('optimization_barrier')
def _(n, N):
    return 'stablehlo.optimization_barrier %s : %s' % (
        ', '.join(N(o) for o in n.operands),
        ', '.join(o.type for o in n.operands))


@_f('custom_call')
def _(n, N):
    res = [ttype(s, d) for s, d in n.attrs['results']]
    attrs = ''
    if n.attrs['attrs']:
        attrs = ' {%s}' % ', '.join('%s = %s' % kv for kv in n.attrs['attrs'])
    return 'stablehlo.custom_call @%s(%s)%s : (%s) -> %s' % (
        n.attrs['target'], ', '.join(N(o) for o in n.operands), attrs,
        ', '.join(o.type for o in n.operands),
        res[0] if len(res) == 1 else '(%s)' % ', '.join(res))


def mlir_string(s):
    """s as an MLIR string literal: printable ASCII as is, '"', '\\' and
    everything else as \\XX (two hex digits), as MLIR prints strings."""
    out = []
    for ch in s.encode():
        c = chr(ch)
        if 32 <= ch < 127 and c not in '"\\':
            out.append(c)
        else:
            out.append('\\%02X' % ch)
    return '"%s"' % ''.join(out)


def _row_dims(table, idx):
    k = idx.rank - 1
    rest = table.rank - 1
    return k, list(range(k, k + rest))


@_f('gather')
def _(n, N):
    table, idx = n.operands
    k, offset = _row_dims(table, idx)
    parts = []
    if offset:
        parts.append('offset_dims = %s' % _lst(offset))
    parts += ['collapsed_slice_dims = [0]', 'start_index_map = [0]',
              'index_vector_dim = %d' % k]
    return ('"stablehlo.gather"(%s, %s) <{dimension_numbers = '
            '#stablehlo.gather<%s>, slice_sizes = array<i64: %s>}> : %s' % (
                N(table), N(idx), ', '.join(parts),
                ', '.join(map(str, (1,) + table.shape[1:])), _sig(n)))


@_f('scatter')
def _(n, N, region=None, ind='    '):
    operand, idx, upd = n.operands
    k, window = _row_dims(operand, idx)
    parts = []
    if window:
        parts.append('update_window_dims = %s' % _lst(window))
    parts += ['inserted_window_dims = [0]',
              'scatter_dims_to_operand_dims = [0]',
              'index_vector_dim = %d' % k]
    a0, a1, r = region
    st = ttype((), n.dtype)
    return ('"stablehlo.scatter"(%s, %s, %s) <{scatter_dimension_numbers = '
            '#stablehlo.scatter<%s>}> ({\n'
            '%s^bb0(%s: %s, %s: %s):\n'
            '%s  %s = stablehlo.add %s, %s : %s\n'
            '%s  stablehlo.return %s : %s\n'
            '%s}) : %s' % (N(operand), N(idx), N(upd), ', '.join(parts),
                           ind, a0, st, a1, st, ind, r, a0, a1, st, ind, r, st,
                           ind, _sig(n)))


@_f('reduce_window')
def _(n, N, region=None, ind='    '):
    x, init = n.operands
    a0, a1, r = region
    st = ttype((), n.dtype)
    pad = '[%s]' % ', '.join('[%d, %d]' % p for p in n.attrs['padding'])
    return ('"stablehlo.reduce_window"(%s, %s) <{padding = dense<%s> : '
            'tensor<%dx2xi64>, window_dimensions = array<i64: %s>}> ({\n'
            '%s^bb0(%s: %s, %s: %s):\n'
            '%s  %s = stablehlo.add %s, %s : %s\n'
            '%s  stablehlo.return %s : %s\n'
            '%s}) : %s' % (N(x), N(init), pad, x.rank,
                           ', '.join(map(str, n.attrs['window'])),
                           ind, a0, st, a1, st, ind, r, a0, a1, st, ind, r, st,
                           ind, _sig(n)))


def _conv_dims(spec, letters):
    out = [''] * len(spec)
    out[spec[0]] = letters[0]
    out[spec[1]] = letters[1]
    for k, d in enumerate(spec[2:]):
        out[d] = str(k)
    return '[' + ', '.join(out) + ']'


@_f('convolution')
def _(n, N):
    x, w = n.operands
    a = n.attrs
    ls, rs, os_ = a['dn']
    win = []
    if any(s != 1 for s in a['strides']):
        win.append('stride = %s' % _lst(a['strides']))
    if any(p != (0, 0) for p in a['padding']):
        win.append('pad = [%s]' % ', '.join('[%d, %d]' % p
                                            for p in a['padding']))
    if any(d != 1 for d in a['lhs_dilation']):
        win.append('lhs_dilate = %s' % _lst(a['lhs_dilation']))
    if any(d != 1 for d in a['rhs_dilation']):
        win.append('rhs_dilate = %s' % _lst(a['rhs_dilation']))
    return ('stablehlo.convolution(%s, %s) dim_numbers = %sx%s->%s, '
            'window = {%s} {batch_group_count = 1 : i64, '
            'feature_group_count = 1 : i64} : %s' % (
                N(x), N(w), _conv_dims(ls, 'bf'), _conv_dims(rs, 'oi'),
                _conv_dims(os_, 'bf'), ', '.join(win), _sig(n)))


# Ops printed as nothing: their name is their first operand's.
_ALIASES = ('stop_gradient', 'custom_vjp', 'named')


def _n_results(n):
    """How many results op n has (a single-result op: 1)."""
    if n.op in ('while', 'optimization_barrier'):
        return len(n.operands)
    if n.op == 'custom_call':
        return len(n.attrs['results'])
    return 1


def live_nodes(graph, outputs):
    """The op nodes that the outputs depend on, in creation order."""
    live = set(o.id for o in outputs)
    out = []
    for n in reversed(graph.nodes):
        if n.id in live:
            out.append(n)
            for o in n.operands:
                live.add(o.id)
    out.reverse()
    return out, live


def _const_name(counters, prefix):
    """The next name for prefix: %prefix, %prefix_0, %prefix_1 ..."""
    k = counters.get(prefix, -1)
    counters[prefix] = k + 1
    return '%' + prefix + ('' if k < 0 else '_%d' % k)


def _emit_block(graph, outs, names, counters, num0, next_arg, ind):
    """The lines of the ops of graph that outs depend on (constants
    first), numbered from %num0, indented by ind; nested regions (a
    scatter's body, a while's cond and body) are numbered after all of
    this block's values and their block arguments %argN from next_arg,
    as MLIR prints them.  names (id -> text) and counters are updated."""
    nodes, live = live_nodes(graph, outs)
    lines = []
    for key in graph.consts:
        c = graph.consts[key]
        if c.id not in live:
            continue
        nm = _const_name(counters, 'cst' if c.dtype in FLOAT_TYPES else 'c')
        names[c.id] = nm
        v = c.attrs['value']
        lit = fmt_float(v, c.dtype) if c.dtype in FLOAT_TYPES else (
            ('true' if v else 'false') if c.dtype == 'i1' else str(v))
        lines.append('%s%s = stablehlo.constant dense<%s> : %s' % (
            ind, nm, lit, c.type))
    num = num0
    for n in nodes:
        if n.op in _ALIASES or n.op == 'result':
            continue
        names[n.id] = '%%%d' % num
        num += 1
    for n in nodes:
        if n.op in _ALIASES:
            names[n.id] = names[n.operands[0].id]
        elif n.op == 'result':
            op = n.operands[0]
            names[n.id] = names[op.id] if _n_results(op) == 1 else \
                '%s#%d' % (names[op.id], n.attrs['index'])

    def NN(v):
        return names[v.id]
    region = ('%%arg%d' % next_arg, '%%arg%d' % (next_arg + 1), '%%%d' % num)
    for n in nodes:
        if n.op in _ALIASES or n.op == 'result':
            continue
        if n.op == 'while':
            body = _fmt_while(n, names, counters, num, next_arg, ind)
        elif n.op in ('scatter', 'reduce_window'):
            body = _FMT[n.op](n, NN, region, ind)
        else:
            body = _FMT[n.op](n, NN)
        res = names[n.id]
        k = _n_results(n)
        if k != 1:
            res += ':%d' % k
        loc = n.attrs.get('loc')
        if loc:
            body += ' loc(%s)' % mlir_string(loc)
        lines.append('%s%s = %s' % (ind, res, body))
    return lines


def _fmt_while(n, names, counters, num, next_arg, ind):
    """`stablehlo.while(%iterArg = %x, ...) : types cond {...} do {...}`
    (the text after `%N:k = `); both regions name their block arguments
    %iterArg, %iterArg_0 ... and number their values from %num."""
    cond, body = n.attrs['cond'], n.attrs['body']
    inner = dict(counters)
    arg_names = [_const_name(inner, 'iterArg') for _ in n.operands]
    out = ['stablehlo.while(%s) : %s' % (
        ', '.join('%s = %s' % (a, names[o.id])
                  for a, o in zip(arg_names, n.operands)),
        ', '.join(o.type for o in n.operands))]
    for word, r in (('%s cond {' % ind, cond), ('%s} do {' % ind, body)):
        rn = dict(names)
        for a, nm in zip(r.args, arg_names):
            rn[a.id] = nm
        lines = _emit_block(r, r.outputs, rn, dict(inner), num, next_arg,
                            ind + '  ')
        lines.append('%s  stablehlo.return %s : %s' % (
            ind, ', '.join(rn[v.id] for v in r.outputs),
            ', '.join(v.type for v in r.outputs)))
        out.append(word)
        out += lines
    out.append('%s}' % ind)
    return '\n'.join(out)


def emit(graph, args, results, module='jit_train_step'):
    """Print the graph as a StableHLO module with one public @main.

    args: Values of op 'arg' in signature order; an arg's optional
    attrs['alias'] is the index of the result it is donated to.
    results: list of (Value, result_info).  Returns the text.
    """
    outs = [v for v, _ in results]
    names = {}
    for i, a in enumerate(args):
        assert a.op == 'arg'
        names[a.id] = '%%arg%d' % i
    # Scalar constants first, named as MLIR names them (%cst, %c ...).
    lines = _emit_block(graph, outs, names, {}, 0, len(args), '    ')

    def NN(v):
        return names[v.id]
    arg_txt = []
    for i, a in enumerate(args):
        attr = ''
        if a.attrs.get('alias') is not None:
            attr = ' {tf.aliasing_output = %d : i32}' % a.attrs['alias']
        arg_txt.append('%%arg%d: %s%s loc("%s")' % (
            i, a.type, attr, a.attrs['name']))
    res_txt = ['%s {jax.result_info = "%s"}' % (v.type, info)
               for v, info in results]
    head = [
        'module @%s attributes {mhlo.num_partitions = 1 : i32, '
        'mhlo.num_replicas = 1 : i32} {' % module,
        '  func.func public @main(%s) -> (%s) {' % (
            ', '.join(arg_txt), ', '.join(res_txt)),
    ]
    tail = [
        '    return %s : %s' % (', '.join(NN(v) for v in outs),
                                ', '.join(v.type for v in outs)),
        '  }',
        '}',
        '',
    ]
    return '\n'.join(head + lines + tail)


def count_ops(text):
    """Ops in printed text: lines with `= stablehlo.`, `"stablehlo.`,
    `stablehlo.return` or a `return` (the README's op-count rule)."""
    n = 0
    for line in text.split('\n'):
        s = line.strip()
        if ('= stablehlo.' in s or '"stablehlo.' in s or
                s.startswith('stablehlo.return') or s.startswith('return ')):
            n += 1
    return n
