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
        out = s[:pos] + (rng.choice(DIMS),) + s[pos:]
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


def program(seed, n_ops=14):
    """(text, args): a module whose @main takes 2-4 f32 arguments and returns
    the last 1-3 values made; args is [(name, shape)]."""
    rng = random.Random(seed)
    b = _Builder(rng)
    args = []
    for i in range(rng.randint(2, 4)):
        shape = tuple(rng.choice(DIMS) for _ in range(rng.randint(1, 3)))
        args.append(('%%arg%d' % i, shape))
        b.pool.append(args[-1])
    made = 0
    while made < n_ops:
        made += _op(b, rng.choice(OPS))
    res = [v for v in b.pool if v[0].startswith('%v')][-rng.randint(1, 3):]
    rt = ', '.join(ttype(s) for _, s in res)
    text = ('module @randprog {\n'
            '  sdy.mesh @mesh = <["x"=1]>\n'
            '  func.func @main(%s) -> (%s) {\n' % (', '.join('%s: %s' % (n, ttype(s)) for n, s in args), rt) +
            '\n'.join(b.lines) + '\n'
            '    return %s : %s\n  }\n}\n' % (', '.join(n for n, _ in res), rt))
    return text, args


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
