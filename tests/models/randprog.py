"""Random StableHLO programs, and random schedules over them, for the
seeded property test of partitioning (test_randprog.py).

The zoo's models are real training steps but few shapes; the programs here
are small chains of the ops the partitioner has tile-mapping rules for,
over arguments of random rank (1 to 3) and dims from {1, 2, 3, 4, 6, 8,
12}, in combinations no model writes: a reduction over several dims, a
dot_general with a batch dim that was transposed or broadcast, a reshape
that splits or merges a dim after a pad or a strided slice, a dynamic slice
at a constant index past the end (clamped), a round trip through bf16, an
iota added, a compare and select, and Shardy's sharding constraint (a JAX
export's with_sharding_constraint).  Every op's result type is worked out
here, so the text is valid by construction.

With extra=True the programs also draw the ops no model of the zoo writes
in these shapes (OPS_EXTRA): gather and scatter with batching dims, the
index vector anywhere (or implicit) and offset / window dims among the
batch dims; scatter adding, replacing, taking the max, into zeros too; sort
of up to three operands (iota indices among them); reduce_window with
strides, padding and dilations; select_and_scatter; convolution with
shuffled dim labels, feature or batch groups, dilations; a scan (while)
stepping through a stacked argument, a case of 2-3 branches, both reading
values of the function; dynamic_update_slice at clamped or runtime
indices; negative padding; a variadic argmax; bitcast_convert (to a wider
rank too); integer ops; size-1 broadcasts and reshapes; dot_general over
two contracting dims; reductions with a non-identity init; a Sharding
custom_call; what a program written for one device reads of it
(partition_id, replica_id, its own collective_permute and all_reduce over
that device); dims with primes (DIMS_EXTRA).

A schedule tiles arguments (mostly on a dim the axis divides, sometimes
not: the tile is then refused), deep-tiles, makes arguments atomic, runs
the paper's `manual` tactic, and propagates, over meshes of 1 to 4 axes of
sizes 1 to 6.  Only the standard library is used.
"""

import random

DIMS = (1, 2, 3, 4, 6, 8, 12)
OPS = ('un', 'bin', 'bin', 'bcast', 'transpose', 'reshape', 'reduce', 'dot',
       'dot', 'concat', 'slice', 'pad', 'reverse', 'select', 'convert',
       'dslice', 'iota', 'constraint')


def ttype(shape, et='f32'):
    return 'tensor<' + ''.join('%dx' % d for d in shape) + et + '>'


def ints(xs):
    return ', '.join(str(x) for x in xs)


class _Builder:
    def __init__(self, rng):
        self.rng = rng
        self.lines = []
        self.pool = []   # (name, shape) of the f32 values ops may take
        self.n = 0
        self.args = []   # (name, shape) of the arguments
        self.arg_et = {}  # element types of the arguments that are not f32
        self.r = 0       # names of values inside regions: %rN
        self.channel = 100  # the last channel handle a collective took

    def new_arg(self, shape, et='f32'):
        """A new argument of @main (not in the pool)."""
        name = '%%arg%d' % len(self.args)
        self.args.append((name, tuple(shape)))
        if et != 'f32':
            self.arg_et[name] = et
        return name

    def rname(self):
        self.r += 1
        return '%%r%d' % self.r

    def emit_multi(self, text, k):
        """Adds `%vN:k = text`; returns the k result names."""
        name = '%%v%d' % self.n
        self.n += 1
        self.lines.append('    %s:%d = %s' % (name, k, text))
        return ['%s#%d' % (name, i) for i in range(k)]

    def emit(self, text, shape=None):
        """Adds `%vN = text`; the value joins the pool when shape is given."""
        name = '%%v%d' % self.n
        self.n += 1
        self.lines.append('    %s = %s' % (name, text))
        if shape is not None:
            self.pool.append((name, tuple(shape)))
        return name

    def pick(self, pred=None):
        c = [v for v in self.pool if pred is None or pred(v[1])]
        return self.rng.choice(c) if c else None


def _op(b, kind):
    """Emits one op of `kind` on values of the pool; False when the pick
    does not suit it."""
    rng = b.rng
    name, s = b.pick()
    r = len(s)
    t = ttype(s)
    if kind == 'un':
        op = rng.choice(('negate', 'exponential', 'tanh', 'abs', 'sine', 'logistic'))
        b.emit('stablehlo.%s %s : %s' % (op, name, t), s)
    elif kind == 'bin':
        w = b.pick(lambda u: u == s)
        op = rng.choice(('add', 'multiply', 'subtract', 'maximum', 'minimum'))
        b.emit('stablehlo.%s %s, %s : %s' % (op, name, w[0], t), s)
    elif kind == 'bcast' and r < 4:
        pos = rng.randint(0, r)
        out = s[:pos] + (rng.choice(b.dims),) + s[pos:]
        dims = [i if i < pos else i + 1 for i in range(r)]
        b.emit('stablehlo.broadcast_in_dim %s, dims = [%s] : (%s) -> %s' % (name, ints(dims), t, ttype(out)), out)
    elif kind == 'transpose' and r >= 2:
        perm = list(range(r))
        rng.shuffle(perm)
        out = tuple(s[p] for p in perm)
        b.emit('stablehlo.transpose %s, dims = [%s] : (%s) -> %s' % (name, ints(perm), t, ttype(out)), out)
    elif kind == 'reshape' and r >= 1:
        if r >= 2 and rng.random() < 0.5:   # merge two dims
            i = rng.randrange(r - 1)
            out = s[:i] + (s[i] * s[i + 1],) + s[i + 2:]
        else:                                # split one
            i = rng.randrange(r)
            fs = [f for f in range(2, s[i]) if s[i] % f == 0]
            if not fs or r >= 4:
                return False
            f = rng.choice(fs)
            out = s[:i] + (f, s[i] // f) + s[i + 1:]
        b.emit('stablehlo.reshape %s : (%s) -> %s' % (name, t, ttype(out)), out)
    elif kind == 'reduce' and r >= 1:
        rd = sorted(rng.sample(range(r), rng.randint(1, r)))
        out = tuple(s[i] for i in range(r) if i not in rd)
        op = rng.choice(('add', 'maximum'))
        z = b.emit('stablehlo.constant dense<%s> : tensor<f32>' % ('0.0' if op == 'add' else '0xFF800000'))
        b.emit('stablehlo.reduce(%s init: %s) applies stablehlo.%s across dimensions = [%s] : (%s, tensor<f32>) -> %s'
               % (name, z, op, ints(rd), t, ttype(out)), out)
    elif kind == 'dot' and r >= 1:
        ci = rng.randrange(r)
        w = b.pick(lambda u: s[ci] in u and len(u) <= 3)
        if w is None:
            return False
        wn, ws = w
        cj = rng.choice([j for j, d in enumerate(ws) if d == s[ci]])
        bl, br = [], []
        pairs = [(i, j) for i in range(r) for j in range(len(ws)) if i != ci and j != cj and s[i] == ws[j]]
        if pairs and rng.random() < 0.4:
            bi, bj = rng.choice(pairs)
            bl, br = [bi], [bj]
        lf = [i for i in range(r) if i != ci and i not in bl]
        rf = [j for j in range(len(ws)) if j != cj and j not in br]
        out = tuple([s[i] for i in bl] + [s[i] for i in lf] + [ws[j] for j in rf])
        if len(out) > 4:
            return False
        batch = 'batching_dims = [%s] x [%s], ' % (ints(bl), ints(br)) if bl else ''
        b.emit('stablehlo.dot_general %s, %s, %scontracting_dims = [%d] x [%d] : (%s, %s) -> %s'
               % (name, wn, batch, ci, cj, t, ttype(ws), ttype(out)), out)
    elif kind == 'concat' and r >= 1:
        d = rng.randrange(r)
        wn, ws = b.pick(lambda u: len(u) == r and all(u[i] == s[i] for i in range(r) if i != d))
        out = s[:d] + (s[d] + ws[d],) + s[d + 1:]
        b.emit('stablehlo.concatenate %s, %s, dim = %d : (%s, %s) -> %s' % (name, wn, d, t, ttype(ws), ttype(out)), out)
    elif kind == 'slice' and r >= 1:
        parts, out = [], []
        for d in s:
            lo = rng.randrange(d)
            hi = rng.randint(lo + 1, d)
            st = rng.choice((1, 1, 2))
            parts.append('%d:%d' % (lo, hi) + (':%d' % st if st != 1 else ''))
            out.append((hi - lo + st - 1) // st)
        b.emit('stablehlo.slice %s [%s] : (%s) -> %s' % (name, ', '.join(parts), t, ttype(out)), out)
    elif kind == 'pad' and r >= 1:
        lo = [rng.randint(0, 2) for _ in s]
        hi = [rng.randint(0, 2) for _ in s]
        it = [rng.choice((0, 0, 1)) for _ in s]
        out = [d + a + c + max(d - 1, 0) * i for d, a, c, i in zip(s, lo, hi, it)]
        z = b.emit('stablehlo.constant dense<5.000000e-01> : tensor<f32>')
        b.emit('stablehlo.pad %s, %s, low = [%s], high = [%s], interior = [%s] : (%s, tensor<f32>) -> %s'
               % (name, z, ints(lo), ints(hi), ints(it), t, ttype(out)), out)
    elif kind == 'reverse' and r >= 1:
        ds = sorted(rng.sample(range(r), rng.randint(1, r)))
        b.emit('stablehlo.reverse %s, dims = [%s] : %s' % (name, ints(ds), t), s)
    elif kind == 'select':
        wn, _ = b.pick(lambda u: u == s)
        p = b.emit('stablehlo.compare GT, %s, %s : (%s, %s) -> %s' % (name, wn, t, t, ttype(s, 'i1')))
        b.emit('stablehlo.select %s, %s, %s : %s, %s' % (p, name, wn, ttype(s, 'i1'), t), s)
    elif kind == 'convert':
        h = b.emit('stablehlo.convert %s : (%s) -> %s' % (name, t, ttype(s, 'bf16')))
        b.emit('stablehlo.convert %s : (%s) -> %s' % (h, ttype(s, 'bf16'), t), s)
    elif kind == 'dslice' and r >= 1:
        sizes = [rng.randint(1, d) for d in s]
        idx = [b.emit('stablehlo.constant dense<%d> : tensor<i32>' % rng.randrange(d + 2)) for d in s]
        b.emit('stablehlo.dynamic_slice %s, %s, sizes = [%s] : (%s, %s) -> %s'
               % (name, ', '.join(idx), ints(sizes), t, ', '.join(['tensor<i32>'] * r), ttype(sizes)), sizes)
    elif kind == 'iota' and r >= 1:
        io = b.emit('stablehlo.iota dim = %d : %s' % (rng.randrange(r), t))
        b.emit('stablehlo.add %s, %s : %s' % (name, io, t), s)
    elif kind == 'constraint':
        b.emit('sdy.sharding_constraint %s <@mesh, [%s]> : %s' % (name, ', '.join(['{}'] * r), t), s)
    else:
        return False
    return True


def _nested(shape, flat):
    """A dense literal's nested lists of flat, for shape."""
    if not shape:
        return str(flat[0])
    k = len(flat) // shape[0]
    return '[' + ', '.join(_nested(shape[1:], flat[i * k:(i + 1) * k]) for i in range(shape[0])) + ']'


def _const_i32(b, shape, lo, hi):
    """A constant i32 tensor of values drawn in [lo, hi]."""
    n = 1
    for d in shape:
        n *= d
    flat = [b.rng.randint(lo, hi) for _ in range(n)]
    return b.emit('stablehlo.constant dense<%s> : %s' % (_nested(shape, flat), ttype(shape, 'i32')))


def _indices(b, shape, bounds):
    """Start indices of shape (..., len(bounds)): a constant of values up to
    one past each bound (clamped or skipped by the op), or an i32 argument
    (check draws [0, 8))."""
    if b.rng.random() < 0.25:
        return b.new_arg(shape, 'i32')
    n = 1
    for d in shape:
        n *= d
    flat = [b.rng.randint(-1, bounds[i % len(bounds)]) for i in range(n)]
    return b.emit('stablehlo.constant dense<%s> : %s' % (_nested(shape, flat), ttype(shape, 'i32')))


def _region2(b, body):
    """A two-argument scalar f32 region: body(x, y) -> lines, result."""
    x, y = b.rname(), b.rname()
    lines, res = body(x, y)
    return ('({\n    ^bb0(%s: tensor<f32>, %s: tensor<f32>):\n' % (x, y) + ''.join('      %s\n' % l for l in lines) +
            '      stablehlo.return %s : %s\n    })' % res)


def _combiner(b, op):
    if op == 'replace':
        return _region2(b, lambda x, y: ([], (y, 'tensor<f32>')))
    z = b.rname()
    return _region2(b, lambda x, y: (['%s = stablehlo.%s %s, %s : tensor<f32>' % (z, op, x, y)], (z, 'tensor<f32>')))


def _window(b, s, dilate):
    """Window dims, strides, dilations, padding and the result shape of a
    window over shape s."""
    rng = b.rng
    win, st, bd, wd, pad, out = [], [], [], [], [], []
    for d in s:
        w, t = rng.choice((1, 1, 2, 3)), rng.choice((1, 1, 2))
        lo, hi = rng.choice((0, 0, 1)), rng.choice((0, 0, 1))
        x = 2 if dilate and rng.random() < 0.1 else 1
        y = 2 if dilate and rng.random() < 0.1 else 1
        padded, eff = (d - 1) * x + 1 + lo + hi, (w - 1) * y + 1
        if d == 0 or padded < eff:
            w, y, eff = 1, 1, 1
        win.append(w)
        st.append(t)
        bd.append(x)
        wd.append(y)
        pad.append((lo, hi))
        out.append((padded - eff) // t + 1 if d else 0)
    ptxt = 'dense<[%s]> : tensor<%dx2xi64>' % (', '.join('[%d, %d]' % lh for lh in pad), len(s))
    return win, st, bd, wd, ptxt, tuple(out)


def _index_layout(rng, bdims, m, inner):
    """Where an op of gather's kind puts things: the indices' shape (the
    batch dims bdims with the index vector of m, at a random position or,
    for m == 1, implicit), index_vector_dim, the position of bdims[0] among
    the indices' dims, and the result (or updates) shape with the inner
    (offset / window) dims at random positions among the batch dims, and
    those positions."""
    bd = list(bdims)
    if m == 1 and rng.random() < 0.25:
        ish, ivd = tuple(bd), len(bd)
    else:
        ivd = rng.randint(0, len(bd))
        ish = tuple(bd[:ivd] + [m] + bd[ivd:])
    b0 = 0 if ivd > 0 else 1
    rank = len(bd) + len(inner)
    pos = sorted(rng.sample(range(rank), len(inner)))
    bi, ii = iter(bd), iter(inner)
    out = tuple(next(ii) if p in pos else next(bi) for p in range(rank))
    return ish, ivd, b0, out, pos


DIMS_EXTRA = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12)
OPS_EXTRA = OPS + ('gather', 'scatter', 'sort', 'rwindow', 'sas', 'conv', 'conv', 'scan', 'scan', 'case', 'dus',
                   'npad', 'argmax', 'bitcast', 'intops', 'fops', 'bcast1', 'reshape1', 'dot2', 'reduce2',
                   'concat3', 'ccall', 'devid')


def _extra_op(b, kind):
    """Emits one op of the kinds only OPS_EXTRA draws: gather and scatter
    (with batching dims), sort of several operands, reduce_window and
    select_and_scatter, convolution with feature and batch groups, a scan
    (while) and a case capturing values, dynamic_update_slice, negative
    padding, a variadic argmax, bitcast_convert, integer ops, a Sharding
    custom_call; False when the pick does not suit it."""
    rng = b.rng
    name, s = b.pick()
    r = len(s)
    t = ttype(s)
    if kind == 'gather' and r >= 1:
        batching = r >= 2 and rng.random() < 0.4
        cands = list(range(1, r)) if batching else list(range(r))
        idx = [rng.choice(cands)]
        if len(cands) >= 2 and rng.random() < 0.3:
            idx.append(rng.choice([d for d in cands if d != idx[0]]))
        sizes, collapsed = list(s), []
        for d in idx:
            if rng.random() < 0.7:
                sizes[d] = 1
                collapsed.append(d)
            else:
                sizes[d] = rng.randint(min(1, s[d]), s[d])
        for d in range(r):
            if d not in idx and rng.random() < 0.15:
                sizes[d] = rng.randint(min(1, s[d]), s[d])
        n = rng.choice((1, 2, 3, 5))
        if batching:
            sizes[0] = 1
        bdims = (s[0], n) if batching else (n,)
        offset = [d for d in range(r) if d not in collapsed and not (batching and d == 0)]
        ish, ivd, b0, out, opos = _index_layout(rng, bdims, len(idx), [sizes[d] for d in offset])
        if len(out) > 4:
            return False
        ind = _indices(b, ish, [max(s[d] for d in idx)])
        dn = []
        if offset:
            dn.append('offset_dims = [%s]' % ints(opos))
        if collapsed:
            dn.append('collapsed_slice_dims = [%s]' % ints(sorted(collapsed)))
        if batching:
            dn.append('operand_batching_dims = [0], start_indices_batching_dims = [%d]' % b0)
        dn.append('start_index_map = [%s], index_vector_dim = %d' % (ints(idx), ivd))
        b.emit('"stablehlo.gather"(%s, %s) {dimension_numbers = #stablehlo.gather<%s>, slice_sizes = array<i64: %s>, '
               'indices_are_sorted = false} : (%s, %s) -> %s'
               % (name, ind, ', '.join(dn), ints(sizes), t, ttype(ish, 'i32'), ttype(out)), out)
    elif kind == 'scatter' and r >= 1:
        batching = r >= 2 and rng.random() < 0.35
        k = rng.choice(list(range(1, r)) if batching else list(range(r)))
        n = rng.choice((1, 2, 3, 4))
        bdims = (s[0], n) if batching else (n,)
        window = [d for d in range(r) if d != k and not (batching and d == 0)]
        wsizes = [s[d] if rng.random() < 0.85 else rng.randint(min(1, s[d]), s[d]) for d in window]
        ish, ivd, b0, ush, wpos = _index_layout(rng, bdims, 1, wsizes)
        if len(ush) > 4:
            return False
        comb = rng.choice(('add', 'add', 'replace', 'maximum', 'multiply'))
        opnd = name
        if rng.random() < 0.35:
            opnd = b.emit('stablehlo.constant dense<0.0> : %s' % t)
        ind = _indices(b, ish, [s[k]])
        u = b.pick(lambda v: v == ush)
        upd = u[0] if u and rng.random() < 0.6 else b.new_arg(ush)
        dn = []
        if window:
            dn.append('update_window_dims = [%s]' % ints(wpos))
        dn.append('inserted_window_dims = [%d]' % k)
        if batching:
            dn.append('input_batching_dims = [0], scatter_indices_batching_dims = [%d]' % b0)
        dn.append('scatter_dims_to_operand_dims = [%d], index_vector_dim = %d' % (k, ivd))
        b.emit('"stablehlo.scatter"(%s, %s, %s) %s {scatter_dimension_numbers = #stablehlo.scatter<%s>, '
               'indices_are_sorted = false, unique_indices = false} : (%s, %s, %s) -> %s'
               % (opnd, ind, upd, _combiner(b, comb), ', '.join(dn), t, ttype(ish, 'i32'), ttype(ush), t), s)
    elif kind == 'sort' and r >= 1:
        d = rng.randrange(r)
        ops = [(name, 'f32')]
        for _ in range(rng.randint(0, 2)):
            if rng.random() < 0.5:
                ops.append((b.emit('stablehlo.iota dim = %d : %s' % (rng.randrange(r), ttype(s, 'i32'))), 'i32'))
            else:
                ops.append((b.pick(lambda u: u == s)[0], 'f32'))
        args = []
        for _, et in ops:
            args += ['%s: tensor<%s>' % (b.rname(), et), '%s: tensor<%s>' % (b.rname(), et)]
        a0, a1 = args[0].split(':')[0], args[1].split(':')[0]
        c = b.rname()
        cmp_ = rng.choice(('LT', 'GT'))
        tys = ', '.join(ttype(s, et) for _, et in ops)
        res = b.emit_multi('"stablehlo.sort"(%s) ({\n    ^bb0(%s):\n      %s = stablehlo.compare %s, %s, %s : '
                           '(tensor<f32>, tensor<f32>) -> tensor<i1>\n      stablehlo.return %s : tensor<i1>\n    }) '
                           '{dimension = %d : i64, is_stable = %s} : (%s) -> (%s)'
                           % (', '.join(n for n, _ in ops), ', '.join(args), c, cmp_, a0, a1, c, d,
                              rng.choice(('true', 'false')), tys, tys), len(ops))
        for rn, (_, et) in zip(res, ops):
            if et == 'f32':
                b.pool.append((rn, s))
            else:
                b.emit('stablehlo.convert %s : (%s) -> %s' % (rn, ttype(s, 'i32'), t), s)
    elif kind == 'rwindow' and r >= 1:
        win, st, bd, wd, ptxt, out = _window(b, s, True)
        op, init = rng.choice((('add', '0.0'), ('maximum', '0xFF800000'), ('add', '1.0'), ('minimum', '0x7F800000')))
        z = b.emit('stablehlo.constant dense<%s> : tensor<f32>' % init)
        b.emit('"stablehlo.reduce_window"(%s, %s) %s {window_dimensions = array<i64: %s>, window_strides = array<i64: %s>, '
               'base_dilations = array<i64: %s>, window_dilations = array<i64: %s>, padding = %s} : (%s, tensor<f32>) -> %s'
               % (name, z, _combiner(b, op), ints(win), ints(st), ints(bd), ints(wd), ptxt, t, ttype(out)), out)
    elif kind == 'sas' and r >= 1 and 0 not in s:
        win, st, _, _, ptxt, out = _window(b, s, False)
        u = b.pick(lambda v: v == out)
        src = u[0] if u and rng.random() < 0.5 else b.new_arg(out)
        z = b.emit('stablehlo.constant dense<0.0> : tensor<f32>')
        c = b.rname()
        sel = _region2(b, lambda x, y: (['%s = stablehlo.compare %s, %s, %s : (tensor<f32>, tensor<f32>) -> tensor<i1>'
                                         % (c, rng.choice(('GE', 'LE')), x, y)], (c, 'tensor<i1>')))
        b.emit('"stablehlo.select_and_scatter"(%s, %s, %s) %s, %s {window_dimensions = array<i64: %s>, '
               'window_strides = array<i64: %s>, padding = %s} : (%s, %s, tensor<f32>) -> %s'
               % (name, src, z, sel[:-1], _combiner(b, 'add')[1:], ints(win), ints(st), ptxt, t, ttype(out), t), s)
    elif kind == 'conv':
        if r != 3 or 0 in s:
            return False
        il = ['b', '0', 'f']
        rng.shuffle(il)
        nb, sp, nf = s[il.index('b')], s[il.index('0')], s[il.index('f')]
        G = BG = 1
        mode = rng.random()
        if mode < 0.3:
            G = rng.choice([g for g in range(1, nf + 1) if nf % g == 0])
        elif mode < 0.5:
            BG = rng.choice([g for g in range(1, nb + 1) if nb % g == 0])
        o = rng.choice((1, 2, 3)) * G * BG
        ki = nf // G
        kw, stv, lo, hi = rng.choice((1, 2, 3)), rng.choice((1, 1, 2)), rng.choice((0, 0, 1)), rng.choice((0, 0, 1))
        ld, rd = rng.choice((1, 1, 1, 2)), rng.choice((1, 1, 2))
        padded, eff = (sp - 1) * ld + 1 + lo + hi, (kw - 1) * rd + 1
        if padded < eff:
            kw, rd, eff = 1, 1, 1
        osp = (padded - eff) // stv + 1
        kl = ['0', 'i', 'o']
        rng.shuffle(kl)
        ksh = tuple({'0': kw, 'i': ki, 'o': o}[x] for x in kl)
        ol = ['b', '0', 'f']
        rng.shuffle(ol)
        out = tuple({'b': nb // BG, '0': osp, 'f': o}[x] for x in ol)
        u = b.pick(lambda v: v == ksh)
        k = u[0] if u and rng.random() < 0.3 else b.new_arg(ksh)
        b.emit('stablehlo.convolution(%s, %s) dim_numbers = [%s]x[%s]->[%s], window = {stride = [%d], pad = [[%d, %d]], '
               'lhs_dilate = [%d], rhs_dilate = [%d]} {batch_group_count = %d : i64, feature_group_count = %d : i64} : '
               '(%s, %s) -> %s' % (name, k, ', '.join(il), ', '.join(kl), ', '.join(ol), stv, lo, hi, ld, rd, BG, G, t,
                                   ttype(ksh), ttype(out)), out)
    elif kind == 'scan' and 1 <= r <= 3:
        T = rng.choice((2, 3))
        dot = r == 2 and rng.random() < 0.4
        w = b.new_arg((T, s[1], s[1]) if dot else (T,) + s)
        cap = b.pick(lambda u: u == s) if rng.random() < 0.5 else None
        i0 = b.emit('stablehlo.constant dense<0> : tensor<i32>')
        ys0 = b.emit('stablehlo.constant dense<0.0> : %s' % ttype((T,) + s))
        ri, rh, ry = b.rname(), b.rname(), b.rname()
        tys = ttype((T,) + s)
        L = []
        n_, c_ = b.rname(), b.rname()
        z, wl, wr, h2, hu, ys2, one, i2 = (b.rname() for _ in range(8))
        wsh = (s[1], s[1]) if dot else s
        L.append('%s = stablehlo.constant dense<0> : tensor<i32>' % z)
        L.append('%s = stablehlo.dynamic_slice %s, %s, %s, sizes = [1, %s] : (%s, %s) -> %s'
                 % (wl, w, ri, ', '.join([z] * len(wsh)), ints(wsh), ttype((T,) + wsh),
                    ', '.join(['tensor<i32>'] * (len(wsh) + 1)), ttype((1,) + wsh)))
        L.append('%s = stablehlo.reshape %s : (%s) -> %s' % (wr, wl, ttype((1,) + wsh), ttype(wsh)))
        if dot:
            L.append('%s = stablehlo.dot_general %s, %s, contracting_dims = [1] x [0] : (%s, %s) -> %s'
                     % (h2, rh, wr, t, ttype(wsh), t))
        else:
            L.append('%s = stablehlo.%s %s, %s : %s' % (h2, rng.choice(('add', 'multiply', 'maximum')), rh, wr, t))
        if cap:
            h3 = b.rname()
            L.append('%s = stablehlo.add %s, %s : %s' % (h3, h2, cap[0], t))
            h2 = h3
        if rng.random() < 0.5:
            h3 = b.rname()
            L.append('%s = stablehlo.tanh %s : %s' % (h3, h2, t))
            h2 = h3
        L.append('%s = stablehlo.reshape %s : (%s) -> %s' % (hu, h2, t, ttype((1,) + s)))
        L.append('%s = stablehlo.dynamic_update_slice %s, %s, %s, %s : (%s, %s, %s) -> %s'
                 % (ys2, ry, hu, ri, ', '.join([z] * r), tys, ttype((1,) + s), ', '.join(['tensor<i32>'] * (r + 1)), tys))
        L.append('%s = stablehlo.constant dense<1> : tensor<i32>' % one)
        L.append('%s = stablehlo.add %s, %s : tensor<i32>' % (i2, ri, one))
        res = b.emit_multi('stablehlo.while(%s = %s, %s = %s, %s = %s) : tensor<i32>, %s, %s\n     cond {\n'
                           '      %s = stablehlo.constant dense<%d> : tensor<i32>\n'
                           '      %s = stablehlo.compare LT, %s, %s : (tensor<i32>, tensor<i32>) -> tensor<i1>\n'
                           '      stablehlo.return %s : tensor<i1>\n    } do {\n%s'
                           '      stablehlo.return %s, %s, %s : tensor<i32>, %s, %s\n    }'
                           % (ri, i0, rh, name, ry, ys0, t, tys, n_, T, c_, ri, n_, c_,
                              ''.join('      %s\n' % l for l in L), i2, h2, ys2, t, tys), 3)
        b.pool.append((res[1], s))
        if r < 3:
            b.pool.append((res[2], (T,) + s))
    elif kind == 'case':
        nb_ = rng.randint(2, 3)
        if rng.random() < 0.5:
            idx = b.new_arg((), 'i32')
        else:
            idx = b.emit('stablehlo.constant dense<%d> : tensor<i32>' % rng.randint(-1, nb_))
        outs = [(name, s)] + ([b.pick()] if rng.random() < 0.5 else [])
        brs = []
        for _ in range(nb_):
            L, ys = [], []
            for vn, vs in outs:
                x = rng.random()
                if x < 0.3:
                    ys.append(vn)
                    continue
                y = b.rname()
                if x < 0.65:
                    L.append('%s = stablehlo.%s %s : %s' % (y, rng.choice(('negate', 'tanh', 'exponential')), vn, ttype(vs)))
                else:
                    w = b.pick(lambda u: u == vs)
                    L.append('%s = stablehlo.%s %s, %s : %s' % (y, rng.choice(('add', 'multiply', 'subtract')), vn, w[0],
                                                                ttype(vs)))
                ys.append(y)
            brs.append('{\n%s      stablehlo.return %s : %s\n    }'
                       % (''.join('      %s\n' % l for l in L), ', '.join(ys), ', '.join(ttype(vs) for _, vs in outs)))
        text = '"stablehlo.case"(%s) (%s) : (tensor<i32>) -> (%s)' % (idx, ', '.join(brs),
                                                                       ', '.join(ttype(vs) for _, vs in outs))
        if len(outs) == 1:
            b.emit(text, s)
        else:
            for rn, (_, vs) in zip(b.emit_multi(text, len(outs)), outs):
                b.pool.append((rn, vs))
    elif kind == 'dus' and r >= 1 and 0 not in s:
        us = tuple(rng.randint(1, d) if rng.random() < 0.6 else d for d in s)
        u = b.pick(lambda v: v == us)
        if u is None:
            upd = b.emit('stablehlo.slice %s [%s] : (%s) -> %s' % (name, ', '.join('0:%d' % d for d in us), t, ttype(us)),
                         us)
        else:
            upd = u[0]
        if rng.random() < 0.3:
            idx = [b.new_arg((), 'i32') for _ in s]
        else:
            idx = [b.emit('stablehlo.constant dense<%d> : tensor<i32>' % rng.randint(-1, d - e + 1)) for d, e in zip(s, us)]
        b.emit('stablehlo.dynamic_update_slice %s, %s, %s : (%s, %s, %s) -> %s'
               % (name, upd, ', '.join(idx), t, ttype(us), ', '.join(['tensor<i32>'] * r), t), s)
    elif kind == 'npad' and r >= 1:
        lo = [rng.choice((-2, -1, 0, 0, 1, 2)) for _ in s]
        hi = [rng.choice((-2, -1, 0, 0, 1, 2)) for _ in s]
        it = [rng.choice((0, 0, 1)) for _ in s]
        out = []
        for i, d in enumerate(s):
            o = d + lo[i] + hi[i] + max(d - 1, 0) * it[i]
            if o < 1 or d == 0:
                lo[i], hi[i] = 0, 0
                o = d + max(d - 1, 0) * it[i]
            out.append(o)
        z = b.emit('stablehlo.constant dense<-1.500000e+00> : tensor<f32>')
        b.emit('stablehlo.pad %s, %s, low = [%s], high = [%s], interior = [%s] : (%s, tensor<f32>) -> %s'
               % (name, z, ints(lo), ints(hi), ints(it), t, ttype(out)), out)
    elif kind == 'argmax' and r >= 1:
        d = rng.randrange(r)
        out = s[:d] + s[d + 1:]
        io = b.emit('stablehlo.iota dim = %d : %s' % (d, ttype(s, 'i32')))
        ninf = b.emit('stablehlo.constant dense<0xFF800000> : tensor<f32>')
        zi = b.emit('stablehlo.constant dense<0> : tensor<i32>')
        a, c, bb, dd, g, v, i = (b.rname() for _ in range(7))
        res = b.emit_multi('stablehlo.reduce(%s init: %s), (%s init: %s) across dimensions = [%d] : (%s, %s, tensor<f32>, '
                           'tensor<i32>) -> (%s, %s)\n     reducer(%s: tensor<f32>, %s: tensor<f32>) (%s: tensor<i32>, '
                           '%s: tensor<i32>) {\n      %s = stablehlo.compare %s, %s, %s : (tensor<f32>, tensor<f32>) -> '
                           'tensor<i1>\n      %s = stablehlo.select %s, %s, %s : tensor<i1>, tensor<f32>\n'
                           '      %s = stablehlo.select %s, %s, %s : tensor<i1>, tensor<i32>\n'
                           '      stablehlo.return %s, %s : tensor<f32>, tensor<i32>\n    }'
                           % (name, ninf, io, zi, d, t, ttype(s, 'i32'), ttype(out), ttype(out, 'i32'), a, c, bb, dd, g,
                              rng.choice(('GT', 'GE')), a, c, v, g, a, c, i, g, bb, dd, v, i), 2)
        b.pool.append((res[0], out))
        b.emit('stablehlo.convert %s : (%s) -> %s' % (res[1], ttype(out, 'i32'), ttype(out)), out)
    elif kind == 'bitcast':
        if r < 4 and rng.random() < 0.4:
            h = b.emit('stablehlo.bitcast_convert %s : (%s) -> %s' % (name, t, ttype(s + (2,), 'bf16')))
            b.emit('stablehlo.bitcast_convert %s : (%s) -> %s' % (h, ttype(s + (2,), 'bf16'), t), s)
        else:
            # (no bit masking between: truncating a mantissa turns a sum
            # added in another order, one ulp off, into 2^-11 off, beyond
            # check's tolerance: a difference the state means)
            h = b.emit('stablehlo.bitcast_convert %s : (%s) -> %s' % (name, t, ttype(s, 'i32')))
            b.emit('stablehlo.bitcast_convert %s : (%s) -> %s' % (h, ttype(s, 'i32'), t), s)
    elif kind == 'intops':
        ti = ttype(s, 'i32')
        k = b.emit('stablehlo.constant dense<4.0> : %s' % t)
        x = b.emit('stablehlo.multiply %s, %s : %s' % (name, k, t))
        xi = b.emit('stablehlo.convert %s : (%s) -> %s' % (x, t, ti))
        w = b.pick(lambda u: u == s)
        wi = b.emit('stablehlo.convert %s : (%s) -> %s' % (w[0], t, ti))
        op = rng.choice(('add', 'multiply', 'maximum', 'xor', 'and', 'remainder', 'shift_right_arithmetic'))
        if op in ('remainder', 'shift_right_arithmetic'):
            wi = b.emit('stablehlo.constant dense<%d> : %s' % (rng.randint(1, 3), ti))
        y = b.emit('stablehlo.%s %s, %s : %s' % (op, xi, wi, ti))
        if r >= 1 and rng.random() < 0.4:
            rd = sorted(rng.sample(range(r), rng.randint(1, r)))
            out = tuple(s[i] for i in range(r) if i not in rd)
            z = b.emit('stablehlo.constant dense<0> : tensor<i32>')
            y = b.emit('stablehlo.reduce(%s init: %s) applies stablehlo.%s across dimensions = [%s] : (%s, tensor<i32>) -> %s'
                       % (y, z, rng.choice(('add', 'maximum')), ints(rd), ti, ttype(out, 'i32')))
            s, ti = out, ttype(out, 'i32')
        b.emit('stablehlo.convert %s : (%s) -> %s' % (y, ti, ttype(s)), s)
    elif kind == 'fops':
        w = b.pick(lambda u: u == s)[0]
        op = rng.choice(('clamp', 'power', 'atan2', 'remainder', 'sign', 'floor', 'rsqrt', 'log_plus_one', 'divide',
                         'sqrt', 'finite'))
        if op == 'clamp':
            lo = b.emit('stablehlo.negate %s : %s' % (w, t))
            b.emit('stablehlo.clamp %s, %s, %s : %s' % (lo, name, w, t), s)
        elif op in ('power', 'divide', 'remainder', 'atan2'):
            a = b.emit('stablehlo.abs %s : %s' % (w, t))
            one = b.emit('stablehlo.constant dense<1.0> : %s' % t)
            d = b.emit('stablehlo.add %s, %s : %s' % (a, one, t))
            x = name
            if op == 'power':
                ax = b.emit('stablehlo.abs %s : %s' % (name, t))
                x = b.emit('stablehlo.add %s, %s : %s' % (ax, one, t))
            b.emit('stablehlo.%s %s, %s : %s' % (op, x, d, t), s)
        elif op in ('rsqrt', 'log_plus_one', 'sqrt'):
            a = b.emit('stablehlo.abs %s : %s' % (name, t))
            b.emit('stablehlo.%s %s : %s' % (op, a, t), s)
        elif op == 'finite':
            d = b.emit('stablehlo.divide %s, %s : %s' % (name, w, t))
            f = b.emit('stablehlo.is_finite %s : (%s) -> %s' % (d, t, ttype(s, 'i1')))
            b.emit('stablehlo.select %s, %s, %s : %s, %s' % (f, d, name, ttype(s, 'i1'), t), s)
        else:
            b.emit('stablehlo.%s %s : %s' % (op, name, t), s)
    elif kind == 'bcast1':
        c = b.pick(lambda u: 1 in u and len(u) <= 3)
        if c is None:
            return False
        name, s = c
        r = len(s)
        out = list(s)
        for i, d in enumerate(s):
            if d == 1 and rng.random() < 0.7:
                out[i] = rng.choice(b.dims)
        dims = list(range(r))
        if r < 3 and rng.random() < 0.5:
            pos = rng.randint(0, r)
            out.insert(pos, rng.choice(b.dims))
            dims = [i if i < pos else i + 1 for i in range(r)]
        b.emit('stablehlo.broadcast_in_dim %s, dims = [%s] : (%s) -> %s' % (name, ints(dims), ttype(s), ttype(out)), out)
    elif kind == 'reshape1':
        if 1 in s and rng.random() < 0.5:
            i = rng.choice([i for i, d in enumerate(s) if d == 1])
            out = s[:i] + s[i + 1:]
        elif r < 4:
            i = rng.randint(0, r)
            out = s[:i] + (1,) + s[i:]
        else:
            return False
        b.emit('stablehlo.reshape %s : (%s) -> %s' % (name, t, ttype(out)), out)
    elif kind == 'dot2' and r >= 2:
        cs = rng.sample(range(r), 2)
        bs = [d for d in range(r) if d not in cs]
        bi = [rng.choice(bs)] if bs and rng.random() < 0.5 else []
        m = rng.choice(b.dims)
        wl = [('b', s[bi[0]])] if bi else []
        wl += [('c0', s[cs[0]]), ('c1', s[cs[1]]), ('m', m)]
        rng.shuffle(wl)
        ws = tuple(x for _, x in wl)
        pos = {k: i for i, (k, _) in enumerate(wl)}
        free = [d for d in range(r) if d not in cs and d not in bi]
        out = tuple([s[d] for d in bi] + [s[d] for d in free] + [m])
        if len(out) > 4:
            return False
        u = b.pick(lambda v: v == ws)
        w = u[0] if u and rng.random() < 0.3 else b.new_arg(ws)
        batch = 'batching_dims = [%d] x [%d], ' % (bi[0], pos['b']) if bi else ''
        b.emit('stablehlo.dot_general %s, %s, %scontracting_dims = [%d, %d] x [%d, %d] : (%s, %s) -> %s'
               % (name, w, batch, cs[0], cs[1], pos['c0'], pos['c1'], t, ttype(ws), ttype(out)), out)
    elif kind == 'reduce2' and r >= 1:
        rd = sorted(rng.sample(range(r), rng.randint(1, r)))
        out = tuple(s[i] for i in range(r) if i not in rd)
        op, init = rng.choice((('multiply', '1.0'), ('minimum', '0x7F800000'), ('add', '1.0'), ('maximum', '0.0'),
                               ('add', '-0.0')))
        z = b.emit('stablehlo.constant dense<%s> : tensor<f32>' % init)
        b.emit('stablehlo.reduce(%s init: %s) applies stablehlo.%s across dimensions = [%s] : (%s, tensor<f32>) -> %s'
               % (name, z, op, ints(rd), t, ttype(out)), out)
    elif kind == 'concat3' and r >= 1:
        d = rng.randrange(r)
        ws = [b.pick(lambda u: len(u) == r and all(u[i] == s[i] for i in range(r) if i != d)) for _ in range(2)]
        out = s[:d] + (s[d] + ws[0][1][d] + ws[1][1][d],) + s[d + 1:]
        b.emit('stablehlo.concatenate %s, %s, %s, dim = %d : (%s, %s, %s) -> %s'
               % (name, ws[0][0], ws[1][0], d, t, ttype(ws[0][1]), ttype(ws[1][1]), ttype(out)), out)
    elif kind == 'devid':
        # what a program written for one device reads of it: its id (0),
        # the one replica's, its own collectives over that one device
        x = rng.random()
        if x < 0.3:
            op = rng.choice(('partition_id', 'replica_id'))
            i = b.emit('stablehlo.%s : tensor<ui32>' % op)
            f = b.emit('stablehlo.convert %s : (tensor<ui32>) -> tensor<f32>' % i)
            fb = b.emit('stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> %s' % (f, t))
            b.emit('stablehlo.add %s, %s : %s' % (name, fb, t), s)
            return True
        b.channel += 1
        ch = 'channel_handle = #stablehlo.channel_handle<handle = %d, type = 1>, ' % b.channel
        if x < 0.6:
            b.emit('"stablehlo.collective_permute"(%s) {%ssource_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>} : '
                   '(%s) -> %s' % (name, rng.choice((ch, '')), t, t), s)
        else:
            groups = rng.choice(('dense<[[0]]> : tensor<1x1xi64>, use_global_device_ids',
                                 'dense<[[0]]> : tensor<1x1xi64>', 'dense<> : tensor<0x0xi64>'))
            b.emit('"stablehlo.all_reduce"(%s) %s {%sreplica_groups = %s} : (%s) -> %s'
                   % (name, _combiner(b, 'add'), rng.choice((ch, '')) if 'global' not in groups else ch, groups, t, t),
                   s)
    elif kind == 'ccall':
        b.emit('stablehlo.custom_call @Sharding(%s) {mhlo.sharding = "{replicated}"} : (%s) -> %s' % (name, t, t), s)
    elif kind in OPS:
        return _op(b, kind)
    else:
        return False
    return True


def program(seed, n_ops=14, extra=False, control=True):
    """(text, args): a module whose @main takes 2-4 f32 arguments (and, with
    extra, the arguments its extra ops add: kernels, updates, indices) and
    returns the last 1-3 values made; args is [(name, shape)].  extra draws
    from OPS_EXTRA and dims from DIMS_EXTRA (primes 5 and 7); control=False
    leaves out the while and the case (the fast scorer covers neither)."""
    rng = random.Random(seed)
    b = _Builder(rng)
    b.dims = DIMS_EXTRA if extra else DIMS
    for i in range(rng.randint(2, 4)):
        shape = tuple(rng.choice(b.dims) for _ in range(rng.randint(1, 3)))
        b.args.append(('%%arg%d' % i, shape))
        b.pool.append(b.args[-1])
    made = 0
    while made < n_ops:
        if extra:
            kind = rng.choice(OPS_EXTRA)
            made += (control or kind not in ('scan', 'case')) and _extra_op(b, kind)
        else:
            made += _op(b, rng.choice(OPS))
    res = [v for v in b.pool if v[0].startswith('%v')][-rng.randint(1, 3):]
    rt = ', '.join(ttype(s) for _, s in res)
    sig = ', '.join('%s: %s' % (n, ttype(s, b.arg_et.get(n, 'f32'))) for n, s in b.args)
    text = ('module @randprog {\n'
            '  sdy.mesh @mesh = <["x"=1]>\n'
            '  func.func @main(%s) -> (%s) {\n' % (sig, rt) +
            '\n'.join(b.lines) + '\n'
            '    return %s : %s\n  }\n}\n' % (', '.join(n for n, _ in res), rt))
    return text, b.args


def mesh(rng):
    """(text, {axis: size}): 1 to 4 axes of sizes 1 to 6, at most 48 devices."""
    while True:
        sizes = [rng.choice((1, 2, 2, 3, 4, 5, 6)) for _ in range(rng.randint(1, 4))]
        n = 1
        for x in sizes:
            n *= x
        if n <= 48:
            names = 'abcd'[:len(sizes)]
            return ','.join('%s=%d' % kv for kv in zip(names, sizes)), dict(zip(names, sizes))


def schedule(rng, args, axes):
    """Up to 7 actions ending in propagate: mostly a tile on a dim the axis
    divides (deep tiles count what earlier tiles left), now and then an
    indivisible one, atomic, or a manual tactic."""
    local = {n: list(s) for n, s in args}
    used = {n: set() for n, _ in args}
    acts = []
    for _ in range(rng.randint(1, 7)):
        fit = [(n, a, d) for n, _ in args for a in axes if a not in used[n]
               for d, l in enumerate(local[n]) if l > 1 and l % axes[a] == 0]
        r = rng.random()
        if fit and r < 0.75:
            n, a, d = rng.choice(fit)
            local[n][d] //= axes[a]
            used[n].add(a)
            acts.append('tile %s %d %s' % (n, d, a))
        elif fit and r < 0.82:
            n, a, d = rng.choice(fit)
            local[n][d] //= axes[a]
            used[n].add(a)
            acts.append('manual %s %s=%d' % (a, n, d))
        elif r < 0.92:
            n, s = rng.choice(args)
            a = rng.choice(sorted(axes))
            used[n].add(a)
            acts.append('atomic %s %s' % (n, a))
        else:
            n, s = rng.choice(args)
            acts.append('tile %s %d %s' % (n, rng.randrange(len(s)), rng.choice(sorted(axes))))
        if rng.random() < 0.3:
            acts.append('propagate')
    acts.append('propagate')
    return '; '.join(acts)
