"""refeval.py: pure-Python float64 reference evaluator for shlo graphs.

Used only by the tests (gradient checks against finite differences, Adam,
KV-cache consistency, scanned against unrolled layers).  A tensor is a
pair (shape tuple, flat row-major list).  Slow, but exact enough on the
tiny configs.
"""

import itertools
import json
import math
import operator

import shlo


def strides_of(shape):
    st = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        st[i] = st[i + 1] * shape[i + 1]
    return st


def positions(shape, strides, offset=0):
    """Flat source positions visited by a row-major walk over `shape`
    where moving along dim i advances strides[i] in the source."""
    pos = [offset]
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        rng = [i * s for i in range(n)]
        pos = [p + r for p in pos for r in rng]
    if 0 in shape:
        return []
    return pos


def take(data, pos):
    return [data[p] for p in pos]


def transpose(t, perm):
    shape, data = t
    st = strides_of(shape)
    return (tuple(shape[p] for p in perm),
            take(data, positions([shape[p] for p in perm],
                                 [st[p] for p in perm])))


def _logistic(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


_UNARY = {
    'negate': operator.neg,
    'exponential': _exp,
    'log': lambda x: math.log(x) if x > 0 else (
        -math.inf if x == 0 else math.nan),
    'tanh': math.tanh,
    'logistic': _logistic,
    'rsqrt': lambda x: 1.0 / math.sqrt(x),
    'sqrt': math.sqrt,
    'sine': math.sin,
    'cosine': math.cos,
}

_BINARY = {
    'add': operator.add,
    'subtract': operator.sub,
    'multiply': operator.mul,
    'divide': operator.truediv,
    'maximum': max,
    'power': lambda a, b: a ** b,
}

_CMP = {'EQ': operator.eq, 'NE': operator.ne, 'LT': operator.lt,
        'LE': operator.le, 'GT': operator.gt, 'GE': operator.ge}


def _conv(x, w, n):
    """General convolution with feature/batch group count 1."""
    ls, rs, os_ = n.attrs['dn']
    a = n.attrs
    xs, xd = transpose(x, ls)            # [N, C, spatial...]
    ws, wd = transpose(w, rs)            # [O, I, kernel...]
    nb, c = xs[0], xs[1]
    o_, i_ = ws[0], ws[1]
    assert c == i_
    in_sp, k_sp = xs[2:], ws[2:]
    out_sp = [n.shape[d] for d in os_[2:]]
    # For each spatial dim: table[y][k] = input index or -1.
    tables = []
    for d in range(len(in_sp)):
        tab = []
        for y in range(out_sp[d]):
            row = []
            for k in range(k_sp[d]):
                p = (y * a['strides'][d] + k * a['rhs_dilation'][d] -
                     a['padding'][d][0])
                ld = a['lhs_dilation'][d]
                if p < 0 or p % ld or p // ld >= in_sp[d]:
                    row.append(-1)
                else:
                    row.append(p // ld)
            tab.append(row)
        tables.append(tab)
    xst = strides_of(xs)
    ksize = 1
    for k in k_sp:
        ksize *= k
    # Weight rows: for each o, flat over (i, kernel...) in row-major order.
    wrows = [wd[o * i_ * ksize:(o + 1) * i_ * ksize] for o in range(o_)]
    out = []   # canonical [N, O, out spatial...]
    canon = {}
    for b in range(nb):
        for ys in itertools.product(*[range(m) for m in out_sp]):
            patch = []
            for ci in range(c):
                base = b * xst[0] + ci * xst[1]
                for ks in itertools.product(*[range(m) for m in k_sp]):
                    p = base
                    ok = True
                    for d, (y, k) in enumerate(zip(ys, ks)):
                        q = tables[d][y][k]
                        if q < 0:
                            ok = False
                            break
                        p += q * xst[2 + d]
                    patch.append(xd[p] if ok else 0.0)
            for o in range(o_):
                canon[(b, o) + ys] = sum(map(operator.mul, patch, wrows[o]))
    cshape = [nb, o_] + out_sp
    for idx in itertools.product(*[range(m) for m in cshape]):
        out.append(canon[idx])
    # canonical dim j is result dim os_[j]
    inv = [0] * len(os_)
    for j, d in enumerate(os_):
        inv[d] = j
    return transpose((tuple(cshape), out), inv)


def _eval_node(n, env):
    ops = [env[o.id] for o in n.operands]
    op = n.op
    if op in _UNARY:
        f = _UNARY[op]
        return (n.shape, [f(v) for v in ops[0][1]])
    if op in _BINARY:
        f = _BINARY[op]
        return (n.shape, list(map(f, ops[0][1], ops[1][1])))
    if op == 'convert':
        if n.dtype in shlo.FLOAT_TYPES:
            return (n.shape, [float(v) for v in ops[0][1]])
        if n.dtype == 'i1':
            return (n.shape, [bool(v) for v in ops[0][1]])
        return (n.shape, [int(v) for v in ops[0][1]])
    if op == 'compare':
        f = _CMP[n.attrs['direction']]
        return (n.shape, list(map(f, ops[0][1], ops[1][1])))
    if op == 'select':
        return (n.shape, [a if p else b for p, a, b in
                          zip(ops[0][1], ops[1][1], ops[2][1])])
    if op in ('stop_gradient', 'reshape', 'custom_vjp', 'named'):
        return (n.shape, ops[0][1])
    if op == 'iota':
        d = n.attrs['dim']
        st = [0] * len(n.shape)
        st[d] = 1
        vals = positions(n.shape, st)
        if n.dtype in shlo.FLOAT_TYPES:
            vals = [float(v) for v in vals]
        return (n.shape, vals)
    if op == 'broadcast_in_dim':
        xshape, xdata = ops[0]
        xst = strides_of(xshape)
        st = [0] * len(n.shape)
        for i, d in enumerate(n.attrs['dims']):
            if xshape[i] == n.shape[d]:
                st[d] = xst[i]
        return (n.shape, take(xdata, positions(n.shape, st)))
    if op == 'transpose':
        return transpose(ops[0], n.attrs['perm'])
    if op == 'reduce':
        xshape, xdata = ops[0]
        init = ops[1][1][0]
        dims = n.attrs['dims']
        kept = [i for i in range(len(xshape)) if i not in dims]
        _, td = transpose(ops[0], kept + list(dims))
        chunk = 1
        for d in dims:
            chunk *= xshape[d]
        out = []
        if n.attrs['kind'] == 'add':
            for i in range(0, len(td), chunk):
                out.append(init + math.fsum(td[i:i + chunk]))
        else:
            for i in range(0, len(td), chunk):
                out.append(max([init] + td[i:i + chunk]))
        return (n.shape, out)
    if op == 'dot_general':
        (ac, bc), (ab, bb) = n.attrs['contract'], n.attrs['batch']
        a, b = ops
        af = [i for i in range(len(a[0])) if i not in ac and i not in ab]
        bf = [i for i in range(len(b[0])) if i not in bc and i not in bb]
        _, ad = transpose(a, list(ab) + af + list(ac))
        _, bd = transpose(b, list(bb) + bf + list(bc))
        nb = 1
        for i in ab:
            nb *= a[0][i]
        m = 1
        for i in af:
            m *= a[0][i]
        k = 1
        for i in ac:
            k *= a[0][i]
        nn = 1
        for i in bf:
            nn *= b[0][i]
        out = []
        for bi in range(nb):
            cols = [bd[(bi * nn + j) * k:(bi * nn + j + 1) * k]
                    for j in range(nn)]
            for i in range(m):
                row = ad[(bi * m + i) * k:(bi * m + i + 1) * k]
                for col in cols:
                    out.append(math.fsum(map(operator.mul, row, col)))
        return (n.shape, out)
    if op == 'slice':
        xshape, xdata = ops[0]
        xst = strides_of(xshape)
        off = sum(s * t for s, t in zip(n.attrs['start'], xst))
        st = [t * s for t, s in zip(xst, n.attrs['strides'])]
        return (n.shape, take(xdata, positions(n.shape, st, off)))
    if op == 'reverse':
        xshape, xdata = ops[0]
        xst = strides_of(xshape)
        off = 0
        st = list(xst)
        for d in n.attrs['dims']:
            off += (xshape[d] - 1) * xst[d]
            st[d] = -xst[d]
        return (n.shape, take(xdata, positions(xshape, st, off)))
    if op == 'concatenate':
        dim = n.attrs['dim']
        outer = 1
        for s in n.shape[:dim]:
            outer *= s
        out = []
        chunks = []
        for shp, data in ops:
            inner = 1
            for s in shp[dim:]:
                inner *= s
            chunks.append((inner, data))
        for i in range(outer):
            for inner, data in chunks:
                out.extend(data[i * inner:(i + 1) * inner])
        return (n.shape, out)
    if op == 'pad':
        xshape, xdata = ops[0]
        pv = ops[1][1][0]
        out = [pv] * shlo.prod(n.shape)
        ost = strides_of(n.shape)
        low, it = n.attrs['low'], n.attrs['interior']
        for idx, v in zip(itertools.product(*[range(s) for s in xshape]),
                          xdata):
            p = 0
            for d, i in enumerate(idx):
                q = low[d] + i * (it[d] + 1)
                if q < 0 or q >= n.shape[d]:
                    p = -1
                    break
                p += q * ost[d]
            if p >= 0:
                out[p] = v
        return (n.shape, out)
    if op == 'dynamic_update_slice':
        (xshape, xdata), (ushape, udata) = ops[0], ops[1]
        starts = [min(max(int(s[1][0]), 0), xs - us)
                  for s, xs, us in zip(ops[2:], xshape, ushape)]
        out = list(xdata)
        xst = strides_of(xshape)
        off = sum(s * t for s, t in zip(starts, xst))
        for p, v in zip(positions(ushape, xst, off), udata):
            out[p] = v
        return (n.shape, out)
    if op == 'dynamic_slice':
        xshape, xdata = ops[0]
        sizes = n.attrs['sizes']
        starts = [min(max(int(s[1][0]), 0), xs - m)
                  for s, xs, m in zip(ops[1:], xshape, sizes)]
        xst = strides_of(xshape)
        off = sum(s * t for s, t in zip(starts, xst))
        return (n.shape, take(xdata, positions(sizes, xst, off)))
    if op == 'gather':
        (tshape, tdata), (ishape, idata) = ops
        row = shlo.prod(tshape[1:])
        out = []
        for i in idata:
            i = min(max(int(i), 0), tshape[0] - 1)
            out.extend(tdata[i * row:(i + 1) * row])
        return (n.shape, out)
    if op == 'scatter':
        (oshape, odata), (ishape, idata), (ushape, udata) = ops
        row = shlo.prod(oshape[1:])
        out = list(odata)
        for j, i in enumerate(idata):
            i = int(i)
            if 0 <= i < oshape[0]:
                for r in range(row):
                    out[i * row + r] += udata[j * row + r]
        return (n.shape, out)
    if op == 'convolution':
        return _conv(ops[0], ops[1], n)
    if op == 'reduce_window':          # an add over a window (cumsum)
        (xshape, xdata), init = ops[0], ops[1][1][0]
        xst = strides_of(xshape)
        out = []
        for idx in itertools.product(*[range(m) for m in xshape]):
            acc = init
            for off in itertools.product(*[range(w) for w in
                                           n.attrs['window']]):
                src = [i + o - lo for i, o, (lo, _) in
                       zip(idx, off, n.attrs['padding'])]
                if all(0 <= p < m for p, m in zip(src, xshape)):
                    acc += xdata[sum(p * t for p, t in zip(src, xst))]
            out.append(acc)
        return (n.shape, out)
    raise NotImplementedError(op)


# ------------------------------------------------ cuDNN fused attention

def _fmha_parse(n):
    cfg = json.loads(_unescape(dict(n.attrs['attrs'])['backend_config']))
    c = cfg['cudnn_fmha_backend_config']
    return c['fmha_scale'], c['mask_type'] == 'CAUSAL'


def _unescape(lit):
    body = lit[1:-1]
    out, i = bytearray(), 0
    while i < len(body):
        if body[i] == '\\':
            out.append(int(body[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(ord(body[i]))
            i += 1
    return out.decode()


def fmha_reference(q, k, v, scale, causal):
    """(out [b, h, s, hd], logsumexp [b, h, s]) of BTNH q, k, v as flat
    lists (refeval's tensors), in f64."""
    (b, s, h, hd), qd = q
    (_, t, nkv, _), kd = k
    vd = v[1]
    grp = h // nkv
    out = [0.0] * (b * h * s * hd)
    lse = [0.0] * (b * h * s)
    for bi in range(b):
        for n in range(h):
            kn = n // grp
            for i in range(s):
                qo = ((bi * s + i) * h + n) * hd
                qi = qd[qo:qo + hd]
                sc = []
                for j in range(t if not causal else min(i + 1, t)):
                    ko = ((bi * t + j) * nkv + kn) * hd
                    sc.append(scale * math.fsum(
                        a * c for a, c in zip(qi, kd[ko:ko + hd])))
                m = max(sc)
                e = [math.exp(x - m) for x in sc]
                tot = math.fsum(e)
                lse[(bi * h + n) * s + i] = m + math.log(tot)
                oo = ((bi * h + n) * s + i) * hd
                for d in range(hd):
                    out[oo + d] = math.fsum(
                        e[j] * vd[((bi * t + j) * nkv + kn) * hd + d]
                        for j in range(len(e))) / tot
    return out, lse


def _fmha_fwd_eval(n, ops):
    q, k, v = ops
    scale, causal = _fmha_parse(n)
    out, lse = fmha_reference(q, k, v, scale, causal)
    (shp_o, _), (shp_s, _), (shp_w, _) = n.attrs['results']
    return [(shp_o, out), (shp_s, lse), (shp_w, [])]


def _fmha_bwd_eval(n, ops):
    """The gradients from the definition: P = exp(scores - lse), dV = P^T
    dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = scale dS K, dK = scale
    dS^T Q (summed over the query heads of a group)."""
    (q, k, v, st, do, o) = ops
    scale, causal = _fmha_parse(n)
    (b, s, h, hd), qd = q
    (_, t, nkv, _), kd = k
    vd, lse, dod, od = v[1], st[1], do[1], o[1]
    grp = h // nkv
    dq = [0.0] * (b * h * s * hd)
    dk = [0.0] * (b * nkv * t * hd)
    dv = [0.0] * (b * nkv * t * hd)
    for bi in range(b):
        for n_ in range(h):
            kn = n_ // grp
            for i in range(s):
                qo = ((bi * s + i) * h + n_) * hd
                qi, doi, oi = qd[qo:qo + hd], dod[qo:qo + hd], od[qo:qo + hd]
                di = math.fsum(a * c for a, c in zip(doi, oi))
                for j in range(t if not causal else min(i + 1, t)):
                    ko = ((bi * t + j) * nkv + kn) * hd
                    kj, vj = kd[ko:ko + hd], vd[ko:ko + hd]
                    p = math.exp(scale * math.fsum(
                        a * c for a, c in zip(qi, kj)) -
                        lse[(bi * h + n_) * s + i])
                    dp = math.fsum(a * c for a, c in zip(doi, vj))
                    ds = p * (dp - di)
                    go = ((bi * nkv + kn) * t + j) * hd
                    qo2 = ((bi * h + n_) * s + i) * hd
                    for d in range(hd):
                        dv[go + d] += p * doi[d]
                        dk[go + d] += scale * ds * qi[d]
                        dq[qo2 + d] += scale * ds * kj[d]
    shapes = [r[0] for r in n.attrs['results']]
    return [(shapes[0], dq), (shapes[1], dk), (shapes[2], dv), (shapes[3], [])]


# Reference kernels of custom calls: target -> f(node, operands) -> the
# list of results.
CUSTOM_CALLS = {'__cudnn$fmhaSoftmax': _fmha_fwd_eval,
                '__cudnn$fmhaSoftmaxBackward': _fmha_bwd_eval}


def _eval_while(n, env, rounded):
    """The results of a stablehlo.while: the body's outputs, run until the
    cond region gives false."""
    cond, body = n.attrs['cond'], n.attrs['body']
    vals = [env[o.id] for o in n.operands]
    while True:
        (_, c), = evaluate(cond, {a.id: v for a, v in zip(cond.args, vals)},
                           cond.outputs, rounded)
        if not c[0]:
            return vals
        vals = evaluate(body, {a.id: v for a, v in zip(body.args, vals)},
                        body.outputs, rounded)


def _round(t, dtype):
    if dtype not in shlo.FLOAT_TYPES or dtype == 'f64':
        return t
    return (t[0], [shlo.round_to(x, dtype) for x in t[1]])


def evaluate(graph, inputs, outputs, rounded=False):
    """Values of `outputs` given inputs {arg Value id: (shape, list)}.
    graph may be a region (a while's cond or body) with its block args
    as inputs.  rounded: every float result rounded to its element type
    (f32, bf16, f16) once computed in float64 (sums of products too), as
    the C interpreter does: the same arithmetic run twice gives the same
    bits, which is what the remat tests compare."""
    nodes, live = shlo.live_nodes(graph, outputs)
    env = {}
    for a in graph.args:
        if a.id in live:
            t = inputs[a.id]
            assert tuple(t[0]) == a.shape, (a, t[0])
            env[a.id] = (a.shape, list(t[1]))
    for c in graph.consts.values():
        env[c.id] = ((), [c.attrs['value']])
        if rounded:
            env[c.id] = _round(env[c.id], c.dtype)
    for n in nodes:
        if n.op == 'while':
            env[n.id] = _eval_while(n, env, rounded)
            continue
        if n.op == 'optimization_barrier':
            env[n.id] = [env[o.id] for o in n.operands]
            continue
        if n.op == 'custom_call':
            env[n.id] = CUSTOM_CALLS[n.attrs['target']](
                n, [env[o.id] for o in n.operands])
            if rounded:
                env[n.id] = [_round(t, dt) for t, (_, dt) in
                             zip(env[n.id], n.attrs['results'])]
            continue
        if n.op == 'result':
            r = env[n.operands[0].id][n.attrs['index']]
        else:
            r = _eval_node(n, env)
            if rounded:
                r = _round(r, n.dtype)
        assert tuple(r[0]) == n.shape and len(r[1]) == shlo.prod(n.shape), \
            (n, r[0], len(r[1]))
        env[n.id] = r
    return [env[o.id] for o in outputs]
