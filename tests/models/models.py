"""models.py: the model zoo traced with shlo.

Each builder takes a config dict and returns a Built (graph, argument
list in signature order, results with their result_info, module name).
The training steps share train_step(): forward loss, reverse-mode
gradients, Adam, the argument order params / opt_state.mu /
opt_state.nu / batch / step and the donation (tf.aliasing_output) of
every parameter, moment and the step to its updated result.

Parameters are declared lazily by the forward pass (Params), so their
order is the order of first use, which is the documented order.
"""

import math
import sys
import time

from shlo import Graph, emit, prod, scan

# ---------------------------------------------------------------- helpers


def path(*keys):
    return ''.join("['%s']" % k for k in keys)


class Params:
    """Parameter arguments, created on first use; order = first use."""

    def __init__(self, g, requires_grad=True):
        self.g = g
        self.requires_grad = requires_grad
        self.order = []          # (path, Value)
        self.by_path = {}

    def __call__(self, shape, *keys):
        p = path(*keys)
        v = self.by_path.get(p)
        if v is None:
            v = self.g.arg('params' + p, shape,
                           requires_grad=self.requires_grad)
            self.by_path[p] = v
            self.order.append((p, v))
        assert v.shape == tuple(shape), (p, v.shape, shape)
        return v


class LayerParams:
    """The parameters of one layer inside a scan body: arguments of the
    body graph, found by their path below the layer (the first key, e.g.
    'block_0', dropped), in order of first use.  The scan stacks each as
    params['blocks'][...] with a leading layer dim, as Flax's nn.scan
    (variable_axes={'params': 0}) over a module named 'blocks' does."""

    def __init__(self, g):
        self.g = g
        self.order = []          # (keys below the layer, Value)
        self.by_path = {}

    def __call__(self, shape, *keys):
        keys = keys[1:]
        p = path(*keys)
        v = self.by_path.get(p)
        if v is None:
            v = self.g.arg('layer' + p, shape, requires_grad=True)
            self.by_path[p] = v
            self.order.append((keys, v))
        assert v.shape == tuple(shape), (p, v.shape, shape)
        return v


class Progress:
    """Progress lines on stderr, only once generation has taken >1 s."""

    def __init__(self, label, quiet=False):
        self.label = label
        self.quiet = quiet
        self.t0 = time.time()
        self.last = 0.0

    def __call__(self, msg, force=False):
        if self.quiet:
            return
        now = time.time()
        if now - self.t0 > 1.0 and (force or now - self.last > 0.5):
            sys.stderr.write('modelgen: %s: %s\n' % (self.label, msg))
            sys.stderr.flush()
            self.last = now


class Built:
    def __init__(self, graph, args, results, module, params):
        self.graph = graph
        self.args = args          # arg Values in signature order
        self.results = results    # [(Value, result_info)]
        self.module = module
        self.params = params      # [(path, Value)]

    def text(self):
        return emit(self.graph, self.args, self.results, self.module)


def bcast_last(g, v, shape):
    """Broadcast a vector over the last dim of shape."""
    return g.broadcast_in_dim(v, shape, (len(shape) - 1,))


def dense(g, P, x, n_out, *keys, bias=True):
    """x [..., n_in] @ w [n_in, n_out] (+ b)."""
    w = P((x.shape[-1], n_out), *keys, 'w')
    y = g.dot_general(x, w, ((x.rank - 1,), (0,)))
    if bias:
        y = g.add(y, bcast_last(g, P((n_out,), *keys, 'b'), y.shape))
    return y


def normalize(g, x, dims, scale=None, bias=None, eps=1e-5):
    """(x - mean) * rsqrt(var + eps) over dims, then * scale + bias
    (scale/bias over the last dim)."""
    n = float(prod(x.shape[d] for d in dims))
    kept = [i for i in range(x.rank) if i not in dims]
    mean = g.div(g.reduce_sum(x, dims), n)
    xc = g.sub(x, g.broadcast_in_dim(mean, x.shape, kept))
    var = g.div(g.reduce_sum(g.mul(xc, xc), dims), n)
    inv = g.rsqrt(g.add(var, eps))
    y = g.mul(xc, g.broadcast_in_dim(inv, x.shape, kept))
    if scale is not None:
        y = g.mul(y, bcast_last(g, scale, x.shape))
    if bias is not None:
        y = g.add(y, bcast_last(g, bias, x.shape))
    return y


def norm_params(g, P, x, dims, *keys):
    c = x.shape[-1]
    return normalize(g, x, dims, P((c,), *keys, 'scale'),
                     P((c,), *keys, 'bias'))


def gelu_tanh(g, x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x3 = g.mul(g.mul(x, x), x)
    inner = g.mul(g.add(x, g.mul(x3, 0.044715)), math.sqrt(2.0 / math.pi))
    return g.mul(g.mul(x, 0.5), g.add(g.tanh(inner), 1.0))


def silu(g, x):
    return g.mul(x, g.logistic(x))


def relu(g, x):
    return g.maximum(x, 0.0)


def mse(g, pred, target):
    d = g.sub(pred, target)
    return g.div(g.reduce_sum(g.mul(d, d), range(d.rank)),
                 float(prod(d.shape)))


ADAM = {'lr': 3e-4, 'b1': 0.9, 'b2': 0.999, 'eps': 1e-8}


def adam(g, params, grads, mus, nus, step, hp=ADAM):
    """optax.adam: returns (new params, new mu, new nu, new step)."""
    step1 = g.add(step, g.const(1, 'i32'))
    t = g.convert(step1, g.dtype)
    bc1 = g.sub(1.0, g.power(g.const(hp['b1']), t))
    bc2 = g.sub(1.0, g.power(g.const(hp['b2']), t))
    new_p, new_m, new_n = [], [], []
    for p, gr, m, v in zip(params, grads, mus, nus):
        m2 = g.add(g.mul(m, hp['b1']), g.mul(gr, 1.0 - hp['b1']))
        v2 = g.add(g.mul(v, hp['b2']), g.mul(g.mul(gr, gr), 1.0 - hp['b2']))
        mhat = g.div(m2, g.broadcast_in_dim(bc1, p.shape, ()))
        vhat = g.div(v2, g.broadcast_in_dim(bc2, p.shape, ()))
        upd = g.div(mhat, g.add(g.sqrt(vhat), hp['eps']))
        new_p.append(g.sub(p, g.mul(upd, hp['lr'])))
        new_m.append(m2)
        new_n.append(v2)
    return new_p, new_m, new_n, step1


def train_step(g, P, loss, batch_args, progress, module='jit_train_step'):
    """Gradients + Adam; assembles arguments and results as documented."""
    progress('backward pass', force=True)
    names = [p for p, _ in P.order]
    params = [v for _, v in P.order]
    grads = g.grad(loss, params)
    mus = [g.arg('opt_state.mu' + p, v.shape, v.dtype) for p, v in P.order]
    nus = [g.arg('opt_state.nu' + p, v.shape, v.dtype) for p, v in P.order]
    step = g.arg('step', (), 'i32')
    progress('optimizer', force=True)
    new_p, new_m, new_n, new_step = adam(g, params, grads, mus, nus, step)
    n = len(params)
    results = [(loss, '[0]')]
    results += [(v, 'grads' + p) for p, v in zip(names, grads)]
    results += [(v, 'params' + p) for p, v in zip(names, new_p)]
    results += [(v, 'opt_state.mu' + p) for p, v in zip(names, new_m)]
    results += [(v, 'opt_state.nu' + p) for p, v in zip(names, new_n)]
    results.append((new_step, 'step'))
    for i in range(n):
        params[i].attrs['alias'] = 1 + n + i
        mus[i].attrs['alias'] = 1 + 2 * n + i
        nus[i].attrs['alias'] = 1 + 3 * n + i
    step.attrs['alias'] = 1 + 4 * n
    args = params + mus + nus + list(batch_args) + [step]
    return Built(g, args, results, module, list(P.order))


# ------------------------------------------------------------ transformer


def attention(g, P, keys, x, heads, head_dim, causal, kv=None):
    """Multi-head attention of x [b, s, d]; w_qkv [d, 3, h, hd], w_out
    [h, hd, d].  kv = (cache_k, cache_v, pos) for a decode step: the new
    k, v are written at pos and the query attends to positions <= pos.
    Returns (out [b, s, d], (new cache_k, new cache_v) or None)."""
    b, s, d = x.shape
    h, hd = heads, head_dim
    w_qkv = P((d, 3, h, hd), *keys, 'w_qkv')
    qkv = g.dot_general(x, w_qkv, ((2,), (0,)))             # [b,s,3,h,hd]

    def part(j):
        return g.reshape(g.slice(qkv, (0, 0, j, 0, 0), (b, s, j + 1, h, hd)),
                         (b, s, h, hd))
    q, k, v = part(0), part(1), part(2)
    new_kv = None
    if kv is not None:
        cache_k, cache_v, pos = kv
        zero = g.const(0, 'i32')
        k = g.dynamic_update_slice(cache_k, k, (zero, pos, zero, zero))
        v = g.dynamic_update_slice(cache_v, v, (zero, pos, zero, zero))
        new_kv = (k, v)
    t = k.shape[1]
    scores = g.dot_general(q, k, ((3,), (3,)), ((0, 2), (0, 2)))  # [b,h,s,t]
    scores = g.mul(scores, 1.0 / math.sqrt(hd))
    mask = None
    if kv is not None:
        keypos = g.iota((t,), 0)
        mask = g.compare(keypos, g.broadcast_in_dim(pos, (t,), ()), 'LE')
        mask = g.broadcast_in_dim(mask, scores.shape, (3,))
    elif causal:
        mask = g.compare(g.iota((s, t), 0), g.iota((s, t), 1), 'GE')
        mask = g.broadcast_in_dim(mask, scores.shape, (2, 3))
    if mask is not None:
        scores = g.select(mask, scores, g.full(scores.shape, float('-inf')))
    m = g.stop_gradient(g.reduce_max(scores, (3,)))
    e = g.exp(g.sub(scores, g.broadcast_in_dim(m, scores.shape, (0, 1, 2))))
    den = g.reduce_sum(e, (3,))
    p = g.div(e, g.broadcast_in_dim(den, scores.shape, (0, 1, 2)))
    o = g.dot_general(p, v, ((3,), (1,)), ((0, 1), (0, 2)))  # [b,h,s,hd]
    w_out = P((h, hd, d), *keys, 'w_out')
    out = g.dot_general(o, w_out, ((1, 3), (0, 1)))          # [b,s,d]
    return out, new_kv


def transformer_block(g, P, i, x, cfg, kv=None):
    blk = 'block_%d' % i
    d = x.shape[2]
    h = normalize(g, x, (2,), P((d,), blk, 'ln1', 'scale'),
                  P((d,), blk, 'ln1', 'bias'))
    a, new_kv = attention(g, P, (blk, 'attn'), h, cfg['heads'],
                          cfg['head_dim'], causal=True, kv=kv)
    x = g.add(x, a)
    h = normalize(g, x, (2,), P((d,), blk, 'ln2', 'scale'),
                  P((d,), blk, 'ln2', 'bias'))
    w_up = P((d, cfg['d_ff']), blk, 'mlp', 'w_up')
    u = g.dot_general(h, w_up, ((2,), (0,)))
    u = g.add(u, bcast_last(g, P((cfg['d_ff'],), blk, 'mlp', 'b_up'),
                            u.shape))
    u = gelu_tanh(g, u)
    w_down = P((cfg['d_ff'], d), blk, 'mlp', 'w_down')
    x = g.add(x, g.dot_general(u, w_down, ((2,), (0,))))
    return x, new_kv


def scanned_blocks(g, P, x, cfg):
    """The blocks as jax.lax.scan over stacked per-layer weights: the block
    is traced once on one layer's weights, which become
    params['blocks'][...] of shape [layers, ...]."""
    body = Graph(g.dtype)
    LP = LayerParams(body)
    carry = body.arg('carry', x.shape, x.dtype, requires_grad=True)
    out, _ = transformer_block(body, LP, 0, carry, cfg)
    L = cfg['layers']
    stacked = [P((L,) + v.shape, 'blocks', *keys) for keys, v in LP.order]
    return scan(g, body, carry, [v for _, v in LP.order], out, x, stacked)


def embed_tokens(g, P, tokens, cfg):
    embed = P((cfg['vocab'], cfg['d_model']), 'embed')
    idx = g.reshape(tokens, tokens.shape + (1,))
    return g.gather_rows(embed, idx), embed


def transformer_logits(g, P, tokens, cfg, progress=None, caches=None,
                       pos=None):
    """Logits [b, s, vocab] of tokens [b, s]; with caches (a list of
    (k, v) per block) also returns the updated caches."""
    x, embed = embed_tokens(g, P, tokens, cfg)
    new_caches = []
    if cfg.get('scan') and caches is None:
        x = scanned_blocks(g, P, x, cfg)
        if progress:
            progress('scanned %d layers' % cfg['layers'])
    for i in range(0 if cfg.get('scan') and caches is None
                   else cfg['layers']):
        kv = None if caches is None else (caches[i][0], caches[i][1], pos)
        x, nk = transformer_block(g, P, i, x, cfg, kv)
        new_caches.append(nk)
        if progress:
            progress('%d/%d layers' % (i + 1, cfg['layers']))
    x = normalize(g, x, (2,))                 # final parameter-free norm
    logits = g.dot_general(x, embed, ((2,), (1,)))
    return logits, new_caches


def softmax_xent(g, logits, targets):
    """Mean over batch and sequence of -log softmax(logits)[target]."""
    b, s, v = logits.shape
    m = g.stop_gradient(g.reduce_max(logits, (2,)))
    sh = g.sub(logits, g.broadcast_in_dim(m, logits.shape, (0, 1)))
    lse = g.log(g.reduce_sum(g.exp(sh), (2,)))
    logp = g.sub(sh, g.broadcast_in_dim(lse, logits.shape, (0, 1)))
    onehot = g.compare(g.iota(logits.shape, 2),
                       g.broadcast_in_dim(targets, logits.shape, (0, 1)),
                       'EQ')
    onehot = g.convert(onehot, logits.dtype)
    nll = g.neg(g.reduce_sum(g.mul(onehot, logp), (0, 1, 2)))
    return g.div(nll, float(b * s))


def build_transformer(cfg, progress):
    g = Graph(cfg['dtype'])
    P = Params(g)
    b, s = cfg['batch'], cfg['seq']
    inputs = g.arg("batch['inputs']", (b, s), 'i32')
    targets = g.arg("batch['targets']", (b, s), 'i32')
    logits, _ = transformer_logits(g, P, inputs, cfg, progress)
    loss = softmax_xent(g, logits, targets)
    return train_step(g, P, loss, [inputs, targets], progress)


def build_transformer_infer(cfg, progress):
    g = Graph(cfg['dtype'])
    P = Params(g, requires_grad=False)
    b, t = cfg['batch'], cfg['max_seq']
    h, hd = cfg['heads'], cfg['head_dim']
    tokens = g.arg("batch['tokens']", (b, 1), 'i32')
    pos = g.arg('pos', (), 'i32')
    caches = []
    for i in range(cfg['layers']):
        caches.append((g.arg("cache['block_%d']['k']" % i, (b, t, h, hd)),
                       g.arg("cache['block_%d']['v']" % i, (b, t, h, hd))))
    logits, new = transformer_logits(g, P, tokens, cfg, progress, caches,
                                     pos)
    results = [(logits, 'logits')]
    for i, (nk, nv) in enumerate(new):
        caches[i][0].attrs['alias'] = len(results)
        results.append((nk, "cache['block_%d']['k']" % i))
        caches[i][1].attrs['alias'] = len(results)
        results.append((nv, "cache['block_%d']['v']" % i))
    args = [v for _, v in P.order] + [a for kv in caches for a in kv] + \
        [tokens, pos]
    return Built(g, args, results, 'jit_decode_step', list(P.order))


# ------------------------------------------------------------------- unet

NHWC = ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))   # [b,0,1,f]x[0,1,i,o]


def conv2d(g, P, x, c_out, k, *keys, stride=1):
    """k x k 'SAME' convolution (NHWC, HWIO kernel) plus bias."""
    w = P((k, k, x.shape[3], c_out), *keys, 'kernel')
    p = (k - 1) // 2
    y = g.conv(x, w, NHWC, strides=(stride, stride),
               padding=((p, k - 1 - p), (p, k - 1 - p)))
    return g.add(y, bcast_last(g, P((c_out,), *keys, 'bias'), y.shape))


def resblock(g, P, x, temb, c_out, name):
    """norm-silu-conv(c -> 4 c_out) + time embedding, norm-silu-conv
    (-> c_out), plus the input (through a 1x1 conv if channels change)."""
    c_in = x.shape[3]
    hid = 4 * c_out
    h = conv2d(g, P, silu(g, norm_params(g, P, x, (1, 2, 3), name, 'norm1')),
               hid, 3, name, 'conv1')
    t = dense(g, P, temb, hid, name, 'temb')                 # [B, hid]
    h = g.add(h, g.broadcast_in_dim(t, h.shape, (0, 3)))
    h = conv2d(g, P, silu(g, norm_params(g, P, h, (1, 2, 3), name, 'norm2')),
               c_out, 3, name, 'conv2')
    skip = x if c_in == c_out else conv2d(g, P, x, c_out, 1, name, 'skip')
    return g.add(skip, h)


def attn_block(g, P, x, name, heads):
    b, hh, ww, c = x.shape
    h = norm_params(g, P, x, (1, 2, 3), name, 'norm')
    h = g.reshape(h, (b, hh * ww, c))
    a, _ = attention(g, P, (name,), h, heads, c // heads, causal=False)
    return g.add(x, g.reshape(a, x.shape))


def upsample(g, P, x, name):
    """Nearest-neighbour 2x (broadcast + reshape), then a 3x3 conv."""
    b, h, w, c = x.shape
    u = g.broadcast_in_dim(x, (b, h, 2, w, 2, c), (0, 1, 3, 5))
    u = g.reshape(u, (b, 2 * h, 2 * w, c))
    return conv2d(g, P, u, c, 3, name, 'conv')


def build_unet(cfg, progress):
    g = Graph(cfg['dtype'])
    P = Params(g)
    B, H, W, C = cfg['batch'], cfg['height'], cfg['width'], \
        cfg['in_channels']
    base, levels, blocks = cfg['channels'], cfg['levels'], cfg['blocks']
    assert H % (1 << (levels - 1)) == 0 and W % (1 << (levels - 1)) == 0, \
        'height and width must be divisible by 2**(levels-1)'
    mult = [1] + [2] * (levels - 1)
    assert (base * mult[-1]) % cfg['heads'] == 0, \
        'heads must divide the lowest-level channels'
    x_t = g.arg("batch['noisy']", (B, H, W, C))
    ts = g.arg("batch['timesteps']", (B,), 'i32')
    noise = g.arg("batch['noise']", (B, H, W, C))
    table = P((cfg['timesteps'], base), 'time_embed', 'table')
    temb = g.gather_rows(table, g.reshape(ts, (B, 1)))        # [B, base]
    temb = dense(g, P, temb, 4 * base, 'time_mlp', 'layer_0')
    temb = dense(g, P, silu(g, temb), 4 * base, 'time_mlp', 'layer_1')
    temb = silu(g, temb)
    h = conv2d(g, P, x_t, base, 3, 'conv_in')
    hs = [h]
    k = 0
    total = levels * blocks + 2 + levels * (blocks + 1)
    done = 0
    for lvl in range(levels):
        for _ in range(blocks):
            h = resblock(g, P, h, temb, base * mult[lvl], 'down_%d' % k)
            hs.append(h)
            k += 1
            done += 1
            progress('%d/%d residual blocks' % (done, total))
        if lvl != levels - 1:
            h = conv2d(g, P, h, h.shape[3], 3, 'downsample_%d' % lvl, 'conv',
                       stride=2)
            hs.append(h)
    ch = base * mult[-1]
    h = resblock(g, P, h, temb, ch, 'mid_0')
    h = attn_block(g, P, h, 'mid_attn', cfg['heads'])
    h = resblock(g, P, h, temb, ch, 'mid_1')
    done += 2
    k = 0
    u = 0
    for lvl in reversed(range(levels)):
        for _ in range(blocks + 1):
            h = g.concatenate([h, hs.pop()], 3)
            h = resblock(g, P, h, temb, base * mult[lvl], 'up_%d' % k)
            k += 1
            done += 1
            progress('%d/%d residual blocks' % (done, total))
        if lvl != 0:
            h = upsample(g, P, h, 'upsample_%d' % u)
            u += 1
    assert not hs
    h = silu(g, norm_params(g, P, h, (1, 2, 3), 'out_norm'))
    out = conv2d(g, P, h, C, 3, 'conv_out')
    loss = mse(g, out, noise)
    return train_step(g, P, loss, [x_t, ts, noise], progress)


# -------------------------------------------------------------------- gns


def mlp_stack(g, P, x, hidden, n_out, layers, keys, norm=True):
    """`layers` dense layers (relu between), optional LayerNorm after."""
    for j in range(layers):
        last = j == layers - 1
        x = dense(g, P, x, n_out if last else hidden, *keys,
                  'layer_%d' % j)
        if not last:
            x = relu(g, x)
    if norm:
        x = norm_params(g, P, x, (x.rank - 1,), *keys, 'norm')
    return x


def build_gns(cfg, progress):
    g = Graph(cfg['dtype'])
    P = Params(g)
    n, e = cfg['nodes'], cfg['edges']
    lat, hid, L = cfg['latent'], cfg['hidden'], cfg['mlp_layers']
    nodes = g.arg("batch['nodes']", (n, cfg['node_in']))
    edges = g.arg("batch['edges']", (e, cfg['edge_in']))
    senders = g.arg("batch['senders']", (e,), 'i32')
    receivers = g.arg("batch['receivers']", (e,), 'i32')
    targets = g.arg("batch['targets']", (n, cfg['out']))
    s_idx = g.reshape(senders, (e, 1))
    r_idx = g.reshape(receivers, (e, 1))
    v = mlp_stack(g, P, nodes, hid, lat, L, ('encoder', 'node_mlp'))
    x = mlp_stack(g, P, edges, hid, lat, L, ('encoder', 'edge_mlp'))
    for m in range(cfg['steps']):
        mp = 'mp_%d' % m
        ein = g.concatenate([x, g.gather_rows(v, s_idx),
                             g.gather_rows(v, r_idx)], 1)
        msg = mlp_stack(g, P, ein, hid, lat, L, (mp, 'edge_mlp'))
        agg = g.scatter_add_rows(g.zeros((n, lat)), r_idx, msg)
        vin = g.concatenate([v, agg], 1)
        v = g.add(v, mlp_stack(g, P, vin, hid, lat, L, (mp, 'node_mlp')))
        x = g.add(x, msg)
        progress('%d/%d message-passing steps' % (m + 1, cfg['steps']))
    out = mlp_stack(g, P, v, hid, cfg['out'], L, ('decoder',), norm=False)
    loss = mse(g, out, targets)
    return train_step(g, P, loss, [nodes, edges, senders, receivers,
                                   targets], progress)


# -------------------------------------------------------------------- mlp


def build_mlp(cfg, progress):
    g = Graph(cfg['dtype'])
    P = Params(g)
    b = cfg['batch']
    x = g.arg("batch['inputs']", (b, cfg['inputs']))
    y = g.arg("batch['targets']", (b, cfg['outputs']))
    h = x
    for j in range(cfg['layers']):
        last = j == cfg['layers'] - 1
        h = dense(g, P, h, cfg['outputs'] if last else cfg['hidden'],
                  'layer_%d' % j)
        if not last:
            h = relu(g, h)
    loss = mse(g, h, y)
    return train_step(g, P, loss, [x, y], progress)


# ---------------------------------------------------------------- registry

_T = ('layers', 'd_model', 'heads', 'head_dim', 'd_ff', 'batch', 'seq',
      'vocab')


def _cfg(keys, vals, **extra):
    d = dict(zip(keys, vals))
    d['dtype'] = 'f32'
    d.update(extra)
    return d


_TI = ('layers', 'd_model', 'heads', 'head_dim', 'd_ff', 'batch', 'max_seq',
       'vocab')
_U = ('batch', 'height', 'width', 'in_channels', 'channels', 'levels',
      'blocks', 'heads', 'timesteps')
_G = ('nodes', 'edges', 'node_in', 'edge_in', 'out', 'latent', 'hidden',
      'mlp_layers', 'steps')
_M = ('batch', 'inputs', 'hidden', 'layers', 'outputs')

MODELS = {
    'transformer': (build_transformer, 'transformer training step '
                    '(scan=1: layers stacked and run by a while loop)', {
        't32': _cfg(_T, (32, 4096, 32, 128, 16384, 48, 2048, 32000), scan=0),
        't48': _cfg(_T, (48, 8192, 64, 128, 32768, 64, 2048, 32000), scan=0),
        'small': _cfg(_T, (4, 256, 4, 64, 1024, 8, 128, 1000), scan=0),
        'tiny': _cfg(_T, (2, 16, 2, 8, 32, 2, 4, 11), scan=0),
    }),
    'transformer_infer': (build_transformer_infer,
                          'transformer decode step with a key-value cache', {
        'it32': _cfg(_TI, (32, 4096, 32, 128, 16384, 48, 2048, 32000)),
        'small': _cfg(_TI, (4, 256, 4, 64, 1024, 8, 128, 1000)),
        'tiny': _cfg(_TI, (2, 16, 2, 8, 32, 2, 4, 11)),
    }),
    'unet': (build_unet, 'U-Net diffusion denoiser training step', {
        'paper': _cfg(_U, (32, 64, 32, 4, 128, 3, 3, 16, 1000)),
        'tiny': _cfg(_U, (2, 8, 4, 2, 2, 3, 1, 2, 10)),
    }),
    'gns': (build_gns, 'graph network simulator training step', {
        'paper': _cfg(_G, (2048, 8192, 128, 16, 3, 512, 1024, 5, 24)),
        'tiny': _cfg(_G, (5, 8, 3, 2, 2, 4, 6, 2, 2)),
    }),
    'mlp': (build_mlp, 'MLP regression training step', {
        'small': _cfg(_M, (256, 512, 2048, 4, 128)),
        'tiny': _cfg(_M, (3, 4, 5, 3, 2)),
    }),
}

DTYPES = ('f32', 'bf16', 'f16', 'f64')
FLAGS = ('scan',)            # keys that take 0 or 1


class ConfigError(ValueError):
    pass


def make_config(model, config, overrides=()):
    """The config dict of model/config with key=value overrides applied;
    raises ConfigError with a one-line message."""
    if model not in MODELS:
        raise ConfigError('unknown model %r (choose from %s)' % (
            model, ', '.join(MODELS)))
    configs = MODELS[model][2]
    if config not in configs:
        raise ConfigError('unknown config %r for %s (choose from %s)' % (
            config, model, ', '.join(configs)))
    cfg = dict(configs[config])
    for ov in overrides:
        if '=' not in ov:
            raise ConfigError('bad override %r: expected key=value' % ov)
        k, v = ov.split('=', 1)
        if k not in cfg:
            raise ConfigError('unknown override key %r for %s (keys: %s)' % (
                k, model, ', '.join(cfg)))
        if k == 'dtype':
            if v not in DTYPES:
                raise ConfigError('bad dtype %r (choose from %s)' % (
                    v, ', '.join(DTYPES)))
            cfg[k] = v
        elif k in FLAGS:
            if v not in ('0', '1'):
                raise ConfigError('bad value %r for %s: expected 0 or 1' % (
                    v, k))
            cfg[k] = int(v)
        else:
            try:
                iv = int(v)
            except ValueError:
                iv = 0
            if iv <= 0:
                raise ConfigError('bad value %r for %s: expected a positive '
                                  'integer' % (v, k))
            cfg[k] = iv
    return cfg


def build(model, cfg, progress=None):
    """Trace model with cfg; raises ConfigError for inconsistent sizes."""
    progress = progress or Progress(model, quiet=True)
    try:
        return MODELS[model][0](cfg, progress)
    except AssertionError as e:
        msg = e.args[0] if e.args and isinstance(e.args[0], str) else \
            'shape mismatch %s' % (e.args[0] if e.args else '')
        raise ConfigError('inconsistent config for %s: %s' % (
            model, ' '.join(str(msg).split())[:300]))
