"""models.py: the model zoo traced with shlo, and its registry.

Each builder takes a config dict and returns a Built (graph, argument
list in signature order, results with their result_info, module name).
The transformer family lives in transformer.py, the shared layers and
the training-step layout in nn.py; here are the U-Net, the GNS, the MLP,
the registry of models and configs and the key=value overrides.
"""

import math

import transformer
from nn import Built, Params, Progress, bcast_last, dense, mse, norm_params, \
    relu, silu, train_step
from shlo import Graph
from transformer import attention

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
    'transformer': (transformer.build_transformer, 'transformer training '
                    'step (scan=1: layers stacked and run by a while loop)', {
        name: c for name, (c, _, _) in transformer.PRESETS.items()}),
    'transformer_infer': (transformer.build_transformer_infer,
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
INT, INT0, FLAG, FLOAT = (transformer.INT, transformer.INT0, transformer.FLAG,
                         transformer.FLOAT)


class ConfigError(ValueError):
    pass


def published(model, config):
    """The published parameter count of a preset, or None."""
    if model != 'transformer' or config not in transformer.PRESETS:
        return None
    return transformer.PRESETS[config][1]


def keys_of(model):
    """{key: (kind or tuple of values, help)} of a model's overrides."""
    if model == 'transformer':
        return transformer.KEYS
    first = next(iter(MODELS[model][2].values()))
    return {k: ((DTYPES, 'element type of every float tensor')
                if k == 'dtype' else (INT, '')) for k in first}


def describe_key(kind):
    if kind == INT:
        return 'a positive integer'
    if kind == INT0:
        return 'an integer >= 0'
    if kind == FLOAT:
        return 'a positive number'
    if kind == FLAG:
        return '0 or 1'
    return '|'.join(kind)


def parse_value(key, kind, v):
    """The value of key=v; raises ConfigError naming the valid ones."""
    if kind == INT:
        try:
            iv = int(v)
        except ValueError:
            iv = 0
        if iv <= 0:
            raise ConfigError('bad value %r for %s: expected a positive '
                              'integer' % (v, key))
        return iv
    if kind == INT0:
        try:
            iv = int(v)
        except ValueError:
            iv = -1
        if iv < 0:
            raise ConfigError('bad value %r for %s: expected an integer >= 0'
                              % (v, key))
        return iv
    if kind == FLOAT:
        try:
            fv = float(v)
        except ValueError:
            fv = 0.0
        if not fv > 0 or fv == float('inf'):
            raise ConfigError('bad value %r for %s: expected a positive '
                              'number' % (v, key))
        return fv
    if kind == FLAG:
        if v not in ('0', '1'):
            raise ConfigError('bad value %r for %s: expected 0 or 1' % (v, key))
        return int(v)
    if v not in kind:
        raise ConfigError('bad value %r for %s (choose from %s)' % (
            v, key, ', '.join(kind)))
    return v


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
    keys = keys_of(model)
    cfg = dict(configs[config])
    for ov in overrides:
        if '=' not in ov:
            raise ConfigError('bad override %r: expected key=value' % ov)
        k, v = ov.split('=', 1)
        if k not in keys:
            raise ConfigError('unknown override key %r for %s (keys: %s)' % (
                k, model, ', '.join(keys)))
        cfg[k] = parse_value(k, keys[k][0], v)
    if model == 'transformer':
        try:
            cfg = transformer.resolve(cfg)
        except ValueError as e:
            raise ConfigError('inconsistent config for %s: %s' % (model, e))
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
