#!/usr/bin/env python3
"""shlo_check.py: structural checker for the StableHLO text modelgen prints.

Independent of the generator: it re-reads the text, and for every op
checks that each %name is defined before use (once), that the operand
types in the op's signature are the types the names were defined with,
and re-derives the result type from the operands and the printed
attributes (dot_general, broadcast_in_dim, reduce, transpose, reshape,
slice, pad, concatenate, gather, scatter, convolution, dynamic_slice ...).
A stablehlo.while is checked as a unit: operand types, iterArg names,
each region in its own scope (names defined there are not visible after
it; sibling regions may reuse them; values numbered after all of the
enclosing block's), cond returning one i1, body returning the carried
types, results %N#k.  It also checks the function header:
tf.aliasing_output targets have the argument's type, the return types
equal the declared result types.

    shlo_check.py FILE...      prints `FILE: ok (N ops)` or the errors.
"""

import re
import sys

_TYPE = re.compile(r'tensor<(?:([0-9x]*)x)?((?:f|bf|i|ui)[0-9]+)>')
_NAME = re.compile(r'%[A-Za-z0-9_#.]+')
FLOATS = ('f32', 'bf16', 'f16', 'f64')


class CheckError(Exception):
    pass


def parse_type(s):
    s = s.strip()
    m = _TYPE.fullmatch(s)
    if not m:
        raise CheckError('bad type %r' % s)
    dims = m.group(1)
    shape = tuple(int(d) for d in dims.split('x') if d) if dims else ()
    return (shape, m.group(2))


def split_top(s, sep=','):
    """Split on sep outside of <>, [], (), {}."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in '<[({':
            depth += 1
        elif ch in '>])}':
            depth -= 1
        if ch == sep and depth == 0:
            out.append(''.join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur or out:
        out.append(''.join(cur))
    return [x.strip() for x in out]


def parse_sig(sig):
    """'(T1, T2) -> R' or 'T' or 'P, T' -> (operand types or None, result)."""
    sig = sig.strip()
    if sig.startswith('('):
        depth = 0
        for i, ch in enumerate(sig):
            if ch == '(':
                depth += 1
            elif ch == ')':
                depth -= 1
                if depth == 0:
                    break
        ins = [parse_type(t) for t in split_top(sig[1:i]) if t]
        rest = sig[i + 1:].strip()
        if not rest.startswith('->'):
            raise CheckError('bad signature %r' % sig)
        return ins, parse_type(rest[2:])
    parts = split_top(sig)
    if len(parts) == 2:                  # select: P, T
        return ('select', parse_type(parts[0])), parse_type(parts[1])
    return None, parse_type(sig)


def ints(s):
    s = s.strip()
    assert s.startswith('[') and s.endswith(']'), s
    body = s[1:-1].strip()
    return [int(x) for x in body.split(',')] if body else []


def attr(body, key):
    """The value of `key = [...]` (a list) or `key = N` in body."""
    m = re.search(r'\b%s = (\[[^\]]*\]|-?\d+)' % re.escape(key), body)
    if not m:
        return None
    v = m.group(1)
    return ints(v) if v.startswith('[') else int(v)


def _expect(cond, msg):
    if not cond:
        raise CheckError(msg)


def infer(op, body, ins, res):
    """Check the result type of op (text body) from operand types."""
    E = _expect
    if op in ('add', 'subtract', 'multiply', 'divide', 'maximum', 'power',
              'negate', 'exponential', 'log', 'tanh', 'logistic', 'rsqrt',
              'sqrt', 'sine', 'cosine', 'reverse'):
        for t in ins:
            E(t == res, '%s operand %s != result %s' % (op, t, res))
        if op not in ('add', 'subtract', 'multiply', 'maximum', 'reverse'):
            E(res[1] in FLOATS, '%s on non-float' % op)
        if op == 'reverse':
            d = attr(body, 'dims')
            E(all(0 <= x < len(res[0]) for x in d), 'reverse dims')
        return
    if op == 'convert':
        E(ins[0][0] == res[0], 'convert shape')
        return
    if op == 'compare':
        E(ins[0] == ins[1], 'compare operand types differ')
        E(res == (ins[0][0], 'i1'), 'compare result')
        kind = 'FLOAT' if ins[0][1] in FLOATS else 'SIGNED'
        E(body.rstrip().endswith(kind), 'compare type %s' % kind)
        return
    if op == 'select':
        p, a, b = ins
        E(p == (res[0], 'i1') and a == res and b == res, 'select types')
        return
    if op == 'iota':
        E(0 <= attr(body, 'dim') < len(res[0]), 'iota dim')
        return
    if op == 'constant':
        E(res[0] == (), 'non-scalar constant')
        return
    if op == 'broadcast_in_dim':
        dims = attr(body, 'dims')
        (xs, xd), = ins
        E(xd == res[1] and len(dims) == len(xs), 'broadcast rank')
        E(dims == sorted(set(dims)), 'broadcast dims not increasing')
        for i, d in enumerate(dims):
            E(0 <= d < len(res[0]) and xs[i] in (1, res[0][d]),
              'broadcast dim %d' % i)
        return
    if op == 'reshape':
        (xs, xd), = ins
        E(xd == res[1] and prod(xs) == prod(res[0]), 'reshape size')
        return
    if op == 'transpose':
        perm = attr(body, 'dims')
        (xs, xd), = ins
        E(sorted(perm) == list(range(len(xs))), 'transpose perm')
        E(res == (tuple(xs[p] for p in perm), xd), 'transpose result')
        return
    if op == 'reduce':
        dims = attr(body, 'dimensions')
        (xs, xd), init = ins
        E(init == ((), xd), 'reduce init type')
        E(dims == sorted(set(dims)), 'reduce dims')
        E(res == (tuple(n for i, n in enumerate(xs) if i not in dims), xd),
          'reduce result')
        E(re.search(r'applies stablehlo\.(add|maximum) ', body), 'reducer')
        return
    if op == 'dot_general':
        (a, ad), (b, bd) = ins
        m = re.search(r'batching_dims = (\[[^\]]*\]) x (\[[^\]]*\])', body)
        ab, bb = (ints(m.group(1)), ints(m.group(2))) if m else ([], [])
        m = re.search(r'contracting_dims = (\[[^\]]*\]) x (\[[^\]]*\])', body)
        ac, bc = ints(m.group(1)), ints(m.group(2))
        E(ad == bd == res[1], 'dot element types')
        E(len(ab) == len(bb) and len(ac) == len(bc), 'dot dims count')
        for i, j in zip(ab + ac, bb + bc):
            E(a[i] == b[j], 'dot dim size %d vs %d' % (i, j))
        af = [a[i] for i in range(len(a)) if i not in ab and i not in ac]
        bf = [b[i] for i in range(len(b)) if i not in bb and i not in bc]
        E(res[0] == tuple([a[i] for i in ab] + af + bf),
          'dot result %s' % (res[0],))
        return
    if op == 'slice':
        (xs, xd), = ins
        m = re.search(r'\[([0-9:, ]*)\]$', body)
        shape = []
        for part, n in zip(m.group(1).split(','), xs):
            f = [int(v) for v in part.strip().split(':')]
            s, l = f[0], f[1]
            st = f[2] if len(f) > 2 else 1
            E(0 <= s <= l <= n, 'slice bounds')
            shape.append((l - s + st - 1) // st)
        E(len(shape) == len(xs) and res == (tuple(shape), xd), 'slice result')
        return
    if op == 'concatenate':
        d = attr(body, 'dim')
        shape = list(ins[0][0])
        for s, dt in ins[1:]:
            E(len(s) == len(shape) and dt == ins[0][1], 'concat rank')
            for i in range(len(s)):
                if i != d:
                    E(s[i] == shape[i], 'concat dims')
            shape[d] += s[d]
        E(res == (tuple(shape), ins[0][1]), 'concat result')
        return
    if op == 'pad':
        (xs, xd), pv = ins
        lo, hi, it = (attr(body, k) for k in ('low', 'high', 'interior'))
        E(pv == ((), xd), 'pad value')
        shape = tuple(l + h + n + max(n - 1, 0) * i
                      for n, l, h, i in zip(xs, lo, hi, it))
        E(res == (shape, xd), 'pad result')
        return
    if op == 'dynamic_slice':
        (xs, xd) = ins[0]
        sizes = attr(body, 'sizes')
        E(len(sizes) == len(xs) and all(0 <= m <= n for m, n in
                                        zip(sizes, xs)), 'dynamic_slice sizes')
        E(len(ins) - 1 == len(xs) and all(t == ins[1] and t[0] == () and
                                          t[1] in ('i32', 'i64')
                                          for t in ins[1:]),
          'dynamic_slice indices')
        E(res == (tuple(sizes), xd), 'dynamic_slice result')
        return
    if op == 'dynamic_update_slice':
        (xs, xd), (us, ud) = ins[:2]
        E(res == (xs, xd) and ud == xd and len(us) == len(xs), 'dus types')
        E(all(u <= x for u, x in zip(us, xs)), 'dus update larger')
        E(len(ins) - 2 == len(xs) and all(t[0] == () for t in ins[2:]),
          'dus indices')
        return
    if op == 'gather':
        (os_, od), (isz, idt) = ins
        off = attr(body, 'offset_dims') or []
        col = attr(body, 'collapsed_slice_dims') or []
        sim = attr(body, 'start_index_map')
        ivd = attr(body, 'index_vector_dim')
        ss = [int(x) for x in re.search(r'slice_sizes = array<i64: ([0-9, ]*)>',
                                        body).group(1).split(',')]
        E(idt == 'i32' and od == res[1], 'gather types')
        E(len(ss) == len(os_) and all(s <= n for s, n in zip(ss, os_)),
          'gather slice sizes')
        nidx = isz[ivd] if ivd < len(isz) else 1
        E(len(sim) == nidx, 'gather start_index_map')
        batch = [n for i, n in enumerate(isz) if i != ivd]
        offs = [s for i, s in enumerate(ss) if i not in col]
        E(all(ss[c] == 1 for c in col), 'gather collapsed size')
        rank = len(batch) + len(offs)
        shape = []
        bi = oi = 0
        for i in range(rank):
            if i in off:
                shape.append(offs[oi])
                oi += 1
            else:
                shape.append(batch[bi])
                bi += 1
        E(res == (tuple(shape), od), 'gather result %s' % (tuple(shape),))
        return
    if op == 'reduce_window':         # an add over windows, stride 1
        (xs, xd), init = ins
        E(init == ((), xd) and res[1] == xd, 'reduce_window types')
        win = [int(v) for v in re.search(
            r'window_dimensions = array<i64: ([0-9, ]*)>', body).group(1)
            .split(',')]
        pads = [(int(a), int(b)) for a, b in re.findall(
            r'\[(\d+), (\d+)\]', re.search(r'padding = dense<(.*?)> :',
                                            body).group(1))]
        E(len(win) == len(pads) == len(xs), 'reduce_window rank')
        E(res[0] == tuple(n + lo + hi - w + 1 for n, w, (lo, hi) in
                          zip(xs, win, pads)), 'reduce_window result')
        return
    if op == 'scatter':
        (os_, od), (isz, idt), (us, ud) = ins
        uwd = attr(body, 'update_window_dims') or []
        iwd = attr(body, 'inserted_window_dims') or []
        ivd = attr(body, 'index_vector_dim')
        E(res == (os_, od) and ud == od and idt == 'i32', 'scatter types')
        win = [n for i, n in enumerate(os_) if i not in iwd]
        batch = [n for i, n in enumerate(isz) if i != ivd]
        shape = []
        wi = bi = 0
        for i in range(len(us)):
            if i in uwd:
                shape.append(win[wi])
                wi += 1
            else:
                shape.append(batch[bi])
                bi += 1
        E(tuple(shape) == us, 'scatter updates %s' % (tuple(shape),))
        return
    if op == 'convolution':
        (xs, xd), (ws, wd) = ins
        m = re.search(r'dim_numbers = \[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]',
                      body)
        lhs, rhs, out = ([s.strip() for s in g.split(',')]
                         for g in m.groups())
        ns = len(xs) - 2
        win = re.search(r'window = \{([^}]*)\}', body).group(1)

        def wattr(k, default):
            if k == 'pad':
                mm = re.search(r'\bpad = \[(.*?)\]\]', win)
                if not mm:
                    return default
                return [(int(a), int(b)) for a, b in re.findall(
                    r'\[(-?\d+), (-?\d+)', mm.group(1))]
            mm = re.search(r'\b%s = (\[[^\]]*\])' % k, win)
            return ints(mm.group(1)) if mm else default
        stride = wattr('stride', [1] * ns)
        pad = wattr('pad', [(0, 0)] * ns)
        ld = wattr('lhs_dilate', [1] * ns)
        rd = wattr('rhs_dilate', [1] * ns)
        E(xd == wd == res[1], 'conv element types')
        E('feature_group_count = 1 : i64' in body and
          'batch_group_count = 1 : i64' in body, 'conv group counts')
        E(xs[lhs.index('f')] == ws[rhs.index('i')], 'conv feature mismatch')
        shape = [0] * len(xs)
        shape[out.index('b')] = xs[lhs.index('b')]
        shape[out.index('f')] = ws[rhs.index('o')]
        for k in range(ns):
            n = xs[lhs.index(str(k))]
            kk = ws[rhs.index(str(k))]
            nd = (n - 1) * ld[k] + 1
            kd = (kk - 1) * rd[k] + 1
            padded = nd + pad[k][0] + pad[k][1]
            E(padded >= kd, 'conv window larger than input')
            shape[out.index(str(k))] = (padded - kd) // stride[k] + 1
        E(res == (tuple(shape), xd), 'conv result %s' % (tuple(shape),))
        return
    raise CheckError('unknown op %s' % op)


def prod(xs):
    r = 1
    for x in xs:
        r *= x
    return r


_HEAD_ARG = re.compile(
    r'%arg(\d+): (tensor<[^>]*>)(?: \{tf\.aliasing_output = (\d+) : i32\})?'
    r' loc\("([^"]*)"\)')
_HEAD_RES = re.compile(r'(tensor<[^>]*>) \{jax\.result_info = "([^"]*)"\}')


def check(text):
    """Check a module; returns a dict of facts, raises CheckError."""
    lines = text.split('\n')
    E = _expect
    E(lines[0].startswith('module @') and
      'mhlo.num_partitions = 1 : i32' in lines[0], 'module line')
    head = lines[1]
    E(head.startswith('  func.func public @main('), 'func line')
    args_part, res_part = head.split(') -> (', 1)
    args = _HEAD_ARG.findall(args_part)
    E(len(args) == args_part.count('%arg'), 'unparsed argument')
    results = _HEAD_RES.findall(res_part)
    E(len(results) == res_part.count('tensor<'), 'unparsed result')
    env = {}
    arg_info = []
    for i, (num, t, alias, loc) in enumerate(args):
        E(int(num) == i, 'argument numbering')
        env['%arg' + num] = parse_type(t)
        arg_info.append((loc, parse_type(t),
                         int(alias) if alias else None))
    res_types = [parse_type(t) for t, _ in results]
    aliased = set()
    for loc, t, alias in arg_info:
        if alias is not None:
            E(0 <= alias < len(res_types), 'alias out of range: ' + loc)
            E(res_types[alias] == t, 'alias type mismatch: ' + loc)
            E(alias not in aliased, 'result aliased twice')
            aliased.add(alias)
    st = {'nops': 0, 'used': set()}
    i, types, _ = _check_block(lines, 2, '    ', env, st, True)
    E(types == res_types, 'return types %s, declared %s' % (types, res_types))
    E(lines[i:] == ['  }', '}', ''], 'text after the return')
    unused = [loc for (loc, _, _), k in zip(arg_info, range(len(arg_info)))
              if '%%arg%d' % k not in st['used']]
    return {'ops': st['nops'], 'args': len(arg_info),
            'results': len(res_types),
            'arg_locs': [a[0] for a in arg_info],
            'aliases': [a[2] for a in arg_info],
            'result_infos': [r[1] for r in results], 'unused_args': unused}


_OP_LOC = re.compile(r' loc\("(?:[^"\\]|\\[0-9A-F]{2})*"\)$')


def _check_block(lines, i, ind, env, st, is_main):
    """Checks one block: the op lines from lines[i] on, each indented by
    exactly ind, up to its terminator (`return` in main, `stablehlo.return`
    in a region).  env maps the visible names to types; names defined here
    are added to it (a region gets a copy, so siblings may reuse names).
    Values are numbered %0, %1 ... in main and consecutively from the first
    number in a region; regions nested here must start numbering after all
    of this block's values, as MLIR prints them.  st holds the op count
    and the used names.  Returns (index after the terminator, the returned
    types, the first number defined here or None)."""
    E = _expect
    first = 0 if is_main else None
    count = 0
    child_firsts = []
    while True:
        E(i < len(lines), 'block not terminated')
        line = lines[i]
        i += 1
        E(line.startswith(ind) and not line.startswith(ind + ' '),
          'indentation: %r' % line[:60])
        s = line.strip()
        m = _OP_LOC.search(s)
        if m:       # an op's location (JAX's name scope): checked as a string
            s = s[:m.start()]
        if s.startswith('return ') or s.startswith('stablehlo.return '):
            E(s.startswith('return ') == is_main,
              'terminator %r in the wrong place' % s.split(' ')[0])
            names_part, types_part = s.split(' ', 1)[1].split(' : ', 1)
            names = [n.strip() for n in names_part.split(',')]
            types = [parse_type(t) for t in split_top(types_part)]
            E(len(names) == len(types), 'return arity')
            for n, t in zip(names, types):
                E(n in env and env[n] == t, 'return type of %s' % n)
                st['used'].add(n)
            st['nops'] += 1
            for c in child_firsts:
                E(c == (first or 0) + count,
                  'region numbered from %%%d, not after its parent\'s %d '
                  'values' % (c, count))
            return i, types, first
        m = re.match(r'(%[A-Za-z0-9_]+)(?::(\d+))? = (.*)$', s)
        E(m, 'not an op line: %r' % s[:60])
        name, nres, rest = m.groups()
        E(name not in env, 'redefinition of %s' % name)
        if re.fullmatch(r'%\d+', name):
            if first is None:
                first = int(name[1:])
            E(int(name[1:]) == first + count, 'numbering: %s' % name)
            count += 1
        multi = re.match(r'stablehlo\.(optimization_barrier|custom_call) ',
                         rest)
        E(nres is None or rest.startswith('stablehlo.while(') or multi,
          '%s: result count' % name)
        if rest.startswith('stablehlo.while('):
            E(nres is not None, '%s: result count' % name)
            i = _check_while(lines, i, ind, env, st, name, int(nres), rest,
                             child_firsts)
            continue
        if multi:
            _check_multi(multi.group(1), rest, env, st, name,
                         int(nres) if nres else 1)
            continue
        if rest.startswith('"stablehlo.'):
            op = rest[len('"stablehlo.'):rest.index('"', 1)]
            if op in ('scatter', 'reduce_window'):
                E(rest.endswith('({'), 'scatter region start')
                # ^bb0 line, add, return, close
                bb = lines[i].strip()
                mm = re.fullmatch(r'\^bb0\((%\w+): (tensor<\w+>), (%\w+): '
                                  r'(tensor<\w+>)\):', bb)
                E(mm, 'scatter block args')
                a0, a1 = mm.group(1), mm.group(3)
                E(a0 not in env and a1 not in env, 'region arg shadows')
                add = lines[i + 1].strip()
                mm2 = re.fullmatch(r'(%\d+) = stablehlo\.add (%\w+), (%\w+) : '
                                   r'(tensor<\w+>)', add)
                E(mm2 and mm2.group(2) == a0 and mm2.group(3) == a1,
                  'scatter body')
                ret = lines[i + 2].strip()
                E(ret == 'stablehlo.return %s : %s' % (mm2.group(1),
                                                       mm2.group(4)),
                  'scatter return')
                child_firsts.append(int(mm2.group(1)[1:]))
                close = lines[i + 3].strip()
                E(close.startswith('}) : '), 'scatter close')
                sig = close[len('}) : '):]
                i += 4
                st['nops'] += 3    # the op, the add and stablehlo.return
                body = rest
                ops_part = rest[rest.index('(') + 1:rest.index(')')]
                scal = parse_type(mm.group(2))
            else:
                body, sig = rest.rsplit(' : ', 1)
                ops_part = rest[rest.index('(') + 1:rest.index(')')]
                st['nops'] += 1
        else:
            mm = re.match(r'stablehlo\.([a-z_]+)', rest)
            E(mm, 'unknown op text %r' % rest[:40])
            op = mm.group(1)
            body, sig = rest.rsplit(' : ', 1)
            ops_part = body[len(mm.group(0)):]
            st['nops'] += 1
        operands = _NAME.findall(ops_part) if op != 'constant' else []
        ins, res = parse_sig(sig)
        for n in operands:
            E(n in env and not isinstance(env[n], list),
              'use of undefined %s in %s' % (n, name))
            st['used'].add(n)
        if ins is None:                    # short form: all types equal res
            ins = [res] * len(operands)
        elif isinstance(ins, tuple) and ins[0] == 'select':
            ins = [ins[1], res, res]
        E(len(ins) == len(operands), '%s: %d operands, %d types' % (
            name, len(operands), len(ins)))
        for n, t in zip(operands, ins):
            E(env[n] == t, '%s: operand %s has type %s, declared %s' % (
                name, n, env[n], t))
        if op in ('scatter', 'reduce_window'):
            E(scal == ((), res[1]), '%s block arg type' % op)
        try:
            infer(op, body, ins, res)
        except CheckError as e:
            raise CheckError('%s (%s): %s' % (name, op, e))
        env[name] = res


def _check_multi(op, rest, env, st, name, k):
    """`%N:k = stablehlo.optimization_barrier %a, ... : T1, ...` (results
    of the operands' types) or `%N:k = stablehlo.custom_call @target(%a,
    ...) {attrs} : (T1, ...) -> (R1, ...)` (for cuDNN's fused attention,
    result shapes re-derived from q, k, v); defines %N#j (or %N when k is
    1)."""
    E = _expect
    body, sig = rest.rsplit(' : ', 1)
    if op == 'optimization_barrier':
        operands = _NAME.findall(body[len('stablehlo.optimization_barrier'):])
        ins = [parse_type(t) for t in split_top(sig)]
        res = ins
    else:
        m = re.match(r'stablehlo\.custom_call @([\w$.]+)\(([^)]*)\)', body)
        E(m, '%s: custom_call syntax' % name)
        target, operands = m.group(1), _NAME.findall(m.group(2))
        ins, _ = parse_sig(sig.split(' -> ')[0] + ' -> tensor<i1>')
        out = sig.split(' -> ', 1)[1].strip()
        res = [parse_type(t) for t in split_top(
            out[1:-1] if out.startswith('(') else out)]
        if target.startswith('__cudnn$fmha'):
            _check_fmha(target, ins, res, body)
    E(len(operands) == len(ins), '%s: %d operands, %d types' % (
        name, len(operands), len(ins)))
    E(len(res) == k, '%s: %d results declared, %d types' % (name, k, len(res)))
    for n, t in zip(operands, ins):
        E(n in env and not isinstance(env[n], list) and env[n] == t,
          '%s: operand %s has type %s, declared %s' % (name, n, env.get(n), t))
        st['used'].add(n)
    st['nops'] += 1
    if k == 1:
        env[name] = res[0]
        return
    env[name] = list(res)
    for j, t in enumerate(res):
        env['%s#%d' % (name, j)] = t


def _check_fmha(target, ins, res, body):
    """cuDNN's fused attention as JAX emits it (layout BTNH)."""
    E = _expect
    E(len(ins) >= 3, 'fmha operands')
    (b, s, h, d), dt = ins[0]
    (_, t, kv, _), _ = ins[1]
    E(ins[1] == ins[2] == ((b, t, kv, d), dt) and h % kv == 0, 'fmha q, k, v')
    E('backend_config = "' in body and 'cudnn_fmha_backend_config' in body,
      'fmha backend_config')
    if target == '__cudnn$fmhaSoftmax':
        E(len(ins) == 3 and res == [((b, h, s, d), dt), ((b, h, s), 'f32'),
                                    ((0,), 'ui8')], 'fmha forward types')
    else:
        E(target == '__cudnn$fmhaSoftmaxBackward', 'fmha target')
        E(ins[3:] == [((b, h, s), 'f32'), ((b, s, h, d), dt),
                      ((b, s, h, d), dt)], 'fmha backward operands')
        E(res == [((b, h, s, d), dt), ((b, kv, t, d), dt),
                  ((b, kv, t, d), dt), ((0,), 'ui8')], 'fmha backward types')


def _check_while(lines, i, ind, env, st, name, k, rest, child_firsts):
    """`%N:k = stablehlo.while(%iterArg = %x, ...) : T1, ..., Tk`, then
    ` cond {` (returns one i1), `} do {` (returns T1 ... Tk), `}`: the
    operands have the declared types, the iterArgs are new names, and the
    results %N#0 ... %N#k-1 get the types.  Returns the index after it."""
    E = _expect
    hdr = rest[len('stablehlo.while('):]
    depth = 0
    for close, ch in enumerate(hdr):
        depth += ch in '(<[{'
        depth -= ch in ')>]}'
        if depth < 0:
            break
    E(depth < 0 and hdr[close + 1:].startswith(' : '), 'while header')
    pairs = split_top(hdr[:close])
    types = [parse_type(t) for t in split_top(hdr[close + 4:])]
    E(len(pairs) == len(types) == k, '%s: %d results, %d operands, %d types'
      % (name, k, len(pairs), len(types)))
    iter_names = []
    for p, t in zip(pairs, types):
        a, _, v = p.partition(' = ')
        E(v in env and env[v] == t, '%s: while operand %s has type %s, '
          'declared %s' % (name, v, env.get(v), t))
        st['used'].add(v)
        E(re.fullmatch(r'%iterArg(_\d+)?', a) and a not in env and
          a not in iter_names, '%s: bad or repeated iterArg %s' % (name, a))
        iter_names.append(a)
    for word, want in ((' cond {', [((), 'i1')]), ('} do {', types)):
        E(lines[i] == ind + word, '%s: expected %r' % (name, ind + word))
        renv = dict(env)
        renv.update(zip(iter_names, types))
        i, got, first = _check_block(lines, i + 1, ind + '  ', renv, st,
                                     False)
        E(got == want, '%s: region returns %s, expected %s' % (
            name, got, want))
        if first is not None:
            child_firsts.append(first)
    E(lines[i] == ind + '}', '%s: while not closed' % name)
    st['nops'] += 1
    env[name] = list(types)          # the op itself: only %N#j are values
    for j, t in enumerate(types):
        env['%s#%d' % (name, j)] = t
    return i + 1


def main(argv):
    rc = 0
    for path in argv[1:]:
        try:
            with open(path) as f:
                info = check(f.read())
            extra = ''
            if info['unused_args']:
                extra = ', unused args: %s' % ', '.join(info['unused_args'])
            print('%s: ok (%d ops, %d args, %d results%s)' % (
                path, info['ops'], info['args'], info['results'], extra))
        except CheckError as e:
            print('%s: error: %s' % (path, e))
            rc = 1
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv))
