"""transformer.py: the decoder-only transformer family of the zoo.

One builder writes the training steps people run today from a config of
architectural knobs (see KEYS and tests/models/README.md): LayerNorm or
RMSNorm, GELU / ReLU / SwiGLU MLPs, learned, rotary or no positions, tied
or separate output projection, biases, grouped-query attention with a
fused or split q/k/v projection, mixed precision, remat policies, cuDNN's
fused attention, gradient accumulation and routed experts; and presets
of real models (PRESETS).  The zoo's original transformer (T32 of
the PartIR paper) is the config with norm=layer bias=mlp mlp=gelu
pos=none tied=1 fused_qkv=1, and its text is byte for byte what it was
before these knobs existed.

Names follow the zoo's layout: params['embed'], params['block_<i>'][...]
(or stacked params['blocks'][...] with scan=1), params['final_norm'],
params['unembed'].
"""

import json
import math

from nn import Built, Params, LayerParams, bcast_last, gelu_tanh, normalize, \
    relu, silu, train_step
from shlo import REMAT, Graph, fold, mlir_string, remat, scan

# ------------------------------------------------------------ the knobs

INT, INT0, FLAG, FLOAT = 'int', 'int0', 'flag', 'float'

# key: (kind or the tuple of its values, what it means)
KEYS = {
    'layers': (INT, 'transformer blocks'),
    'd_model': (INT, 'width of the residual stream'),
    'heads': (INT, 'query heads'),
    'kv_heads': (INT, 'key/value heads (grouped-query attention when '
                 'fewer than heads; default: heads)'),
    'head_dim': (INT, 'width of one head'),
    'd_ff': (INT, 'hidden width of the MLP'),
    'vocab': (INT, 'vocabulary size'),
    'batch': (INT, 'sequences per step'),
    'seq': (INT, 'tokens per sequence'),
    'mlp': (('gelu', 'relu', 'swiglu'), 'MLP: tanh-GELU or ReLU of one '
            'up-projection, or SwiGLU (silu(x w_gate) * x w_up)'),
    'norm': (('layer', 'rms'), 'LayerNorm or RMSNorm, before attention '
             'and MLP and at the end'),
    'pos': (('none', 'learned', 'rope'), 'positions: none, a learned '
            '[seq, d_model] table added to the embedding, or rotary '
            'embeddings of q and k'),
    'rope_theta': (INT, 'base of the rotary frequencies'),
    'tied': (FLAG, '1: the logits use the embedding table; 0: a separate '
             'params[\'unembed\'] [d_model, vocab]'),
    'bias': (('0', '1', 'mlp'), '0: no biases (norms without bias too); '
             '1: every projection and norm; mlp: the zoo\'s original '
             'layout (norm biases and the MLP\'s up-projection bias only, '
             'parameter-free final norm)'),
    'fused_qkv': (FLAG, '1: one w_qkv [d_model, 3, heads, head_dim] '
                  '(needs kv_heads = heads); 0: w_q, w_k, w_v'),
    'dtype': (('f32', 'bf16', 'f16', 'f64'), 'element type of the '
              'activations and matmul inputs'),
    'param_dtype': (('f32', 'bf16', 'f16', 'f64'), 'element type of the '
                    'parameters, gradients and optimizer state (default: '
                    'dtype); when it differs from dtype the step converts as '
                    'JAX mixed precision does (params converted at each use, '
                    'norm statistics and the loss in f32)'),
    'scan': (FLAG, '1: layers stacked [layers, ...] and run by while '
             'loops, as jax.lax.scan'),
    'remat': (REMAT, 'jax.checkpoint of each block with a policy: full '
              'saves nothing, dots every dot, dots_no_batch the weight '
              'projections (MaxText minimal), minimal_flash those and the '
              'attention output, attn all but the scores and softmax, sac '
              'torchtitan\'s per-op selective checkpointing (the fused '
              'attention and every other projection)'),
    'microbatches': (INT, 'gradient accumulation: the batch split into '
                     'this many micro-batches, forward and backward run on '
                     'each in a scan, the optimizer once on the mean'),
    'experts': (INT0, 'mixture of experts: experts per MoE layer (0: '
                'dense MLPs only)'),
    'topk': (INT, 'experts each token is routed to'),
    'moe_every': (INT, 'every N-th block has the MoE layer (the others a '
                  'dense MLP); with scan=1 the scanned unit is N blocks'),
    'capacity': (FLOAT, 'capacity factor: each expert takes at most '
                 'int(seq * topk / experts * capacity) tokens of a sequence, '
                 'the rest are dropped (MaxText\'s dropping implementation)'),
    'attention': (('dot', 'flash'), 'dot: scores and softmax written '
                  'out; flash: the cuDNN fused attention custom call JAX '
                  'emits (__cudnn$fmhaSoftmax and its backward)'),
    'names': (FLAG, '1: the residual stream\'s values of each block '
              'located by name, as MaxText\'s decoder layer constrains '
              'them (block_<i>/lnx, attention_lnx, intermediate, '
              'lnx_mlp, mlp_lnx, layer_output), and the logits, for a '
              'schedule to name '
              '(schedules/mp_embed.txt)'),
    'act_grad': (('jax', 'torch'), 'how the MLP\'s GELU or SiLU is '
                 'differentiated: jax op by op (tanh\'s or the sigmoid\'s '
                 'output saved for the backward), torch as PyTorch\'s '
                 'GeluBackward / SiluBackward and Megatron\'s bias_gelu '
                 '(only the input saved, the rest recomputed in the '
                 'backward); the forward is the same'),
}

# The zoo's original layout: what a config says when it does not name a
# knob (the decode step's configs use only this).
LEGACY = {'mlp': 'gelu', 'norm': 'layer', 'pos': 'none', 'rope_theta': 10000,
          'tied': 1, 'bias': 'mlp', 'fused_qkv': 1, 'scan': 0, 'remat': 'none',
          'attention': 'dot', 'microbatches': 1, 'experts': 0, 'topk': 2,
          'moe_every': 1, 'capacity': 1.25, 'names': 0, 'act_grad': 'jax'}


def config(layers, d_model, heads, head_dim, d_ff, batch, seq, vocab,
           **knobs):
    """A transformer config: the sizes, then the knobs (LEGACY where not
    given; kv_heads None means 'as heads')."""
    c = {'layers': layers, 'd_model': d_model, 'heads': heads,
         'kv_heads': None, 'head_dim': head_dim, 'd_ff': d_ff,
         'vocab': vocab, 'batch': batch, 'seq': seq}
    c.update(LEGACY)
    c['dtype'] = 'f32'
    c['param_dtype'] = None
    for k, v in knobs.items():
        assert k in c, k
        c[k] = v
    return c


# ------------------------------------------------------------- presets

_LLAMA = dict(norm='rms', mlp='swiglu', pos='rope', tied=0, bias='0',
              fused_qkv=0, dtype='bf16', param_dtype='f32')
_GPT = dict(norm='layer', mlp='gelu', pos='learned', tied=1, bias='1',
            fused_qkv=1, dtype='bf16', param_dtype='f32')
_MAXTEXT = dict(norm='rms', mlp='relu', pos='rope', tied=1, bias='0',
                fused_qkv=0, dtype='bf16', param_dtype='f32')
_MEGATRON = dict(_GPT, dtype='f16')


def _preset(layers, d_model, heads, head_dim, d_ff, batch, seq, vocab,
            published, source, **knobs):
    return config(layers, d_model, heads, head_dim, d_ff, batch, seq, vocab,
                  **knobs), published, source


# name: (config, published parameter count or None, where it comes from).
# Batch and sequence are those of the measured run the preset serves
# (../shared/notes/measured-runs.md) or of its paper.
PRESETS = {
    # The PartIR paper's T32 and T48 (Table 1: "5B", "32B"), the zoo's
    # original layout.  The paper gives neither the FFN width nor the
    # sequence length: the FFN is the multiple of 512 nearest to the width
    # that makes the stated count exact (10,378 -> 10,240 = 2.5 d for
    # T32; 23,970 -> 24,064 for T48), the sequence stays 2048.
    't32': _preset(32, 4096, 32, 128, 10240, 48, 2048, 32000, 5e9,
                   'PartIR (Alabed et al.) Table 1: T32, 5B'),
    't48': _preset(48, 8192, 64, 128, 24064, 64, 2048, 32000, 32e9,
                   'PartIR (Alabed et al.) Table 1: T48, 32B'),
    'small': _preset(4, 256, 4, 64, 1024, 8, 128, 1000, None, ''),
    'tiny': _preset(2, 16, 2, 8, 32, 2, 4, 11, None, ''),
    'llama2_7b': _preset(32, 4096, 32, 128, 11008, 16, 4096, 32000,
                         6738415616, 'Llama 2 7B (Touvron et al. 2023; '
                         'meta-llama/Llama-2-7b-hf)', **_LLAMA),
    'llama3_8b': _preset(32, 4096, 32, 128, 14336, 16, 8192, 128256,
                         8030261248, 'Llama 3 8B (meta-llama/Meta-Llama-3-'
                         '8B)', kv_heads=8, rope_theta=500000, **_LLAMA),
    'llama3_70b': _preset(80, 8192, 64, 128, 28672, 16, 8192, 128256,
                          70553706496, 'Llama 3 70B (meta-llama/Meta-Llama-'
                          '3-70B)', kv_heads=8, rope_theta=500000, **_LLAMA),
    'llama3_405b': _preset(126, 16384, 128, 128, 53248, 16, 8192, 128256,
                           405853388800, 'Llama 3.1 405B (meta-llama/'
                           'Llama-3.1-405B)', kv_heads=8, rope_theta=500000,
                           **_LLAMA),
    'gpt3_5b': _preset(24, 4096, 32, 128, 16384, 2048, 2048, 50304, 5e9,
                       'GPT-5B of PAXML (NVIDIA JAX-Toolbox), "5B"', **_GPT),
    'gpt3_175b': _preset(96, 12288, 96, 128, 49152, 1536, 2048, 50257,
                         175e9, 'GPT-3 175B (Brown et al. 2020, Table 2.1)',
                         **_GPT),
    # A mixture of experts in every block; MaxText's dropping
    # implementation with the default capacity factor 1.25 (Mixtral is
    # trained dropless; the parameters are the same).
    'mixtral_8x7b': _preset(32, 4096, 32, 128, 14336, 16, 4096, 32000,
                            46702792704, 'Mixtral 8x7B (Jiang et al. 2024; '
                            'mistralai/Mixtral-8x7B-v0.1)', kv_heads=8,
                            rope_theta=1000000, experts=8, topk=2, **_LLAMA),
    # ALiBi positions are not modelled (pos=none); no biases anywhere.
    'mpt_7b': _preset(32, 4096, 32, 128, 16384, 48, 2048, 50432, 6649286656,
                      'MosaicML MPT-7B (mosaicml/mpt-7b)', norm='layer',
                      mlp='gelu', pos='none', tied=1, bias='0', fused_qkv=1,
                      dtype='bf16', param_dtype='f32'),
    'maxtext_22b': _preset(48, 6144, 24, 256, 24576, 1024, 2048, 32768,
                           21.9e9, 'MaxText 22B (measured-runs M1: 21.9 B)',
                           **_MAXTEXT),
    'maxtext_16b': _preset(32, 5120, 32, 256, 32768, 1536, 2048, 32768,
                           16.3e9, 'MaxText 16B (measured-runs M4: 16.3 B)',
                           **_MAXTEXT),
    'maxtext_32b': _preset(32, 10240, 32, 256, 32768, 512, 2048, 32768,
                           32.5e9, 'MaxText 32B (measured-runs M9: 32.5 B)',
                           **_MAXTEXT),
    # Megatron-LM's GPT (Narayanan et al. 2021, Table 1), counted by the
    # paper's own formula 12 l h^2 (1 + 13 / 12h + (V + s) / 12 l h), which
    # it prints rounded as 1.7, 3.6 and 7.5 B.
    'gpt_1_7b': _preset(24, 2304, 24, 96, 9216, 512, 2048, 51200,
                        1652226048, 'Megatron GPT 1.7B (Narayanan et al. '
                        '2021 Table 1; 1.65 B by its formula)', **_MEGATRON),
    'gpt_3_6b': _preset(30, 3072, 32, 96, 12288, 512, 2048, 51200,
                        3562162176, 'Megatron GPT 3.6B (ibid.; 3.56 B by '
                        'its formula)', **_MEGATRON),
    'gpt_7_5b': _preset(36, 4096, 32, 128, 16384, 512, 2048, 51200,
                        7467778048, 'Megatron GPT 7.5B (ibid.; 7.47 B by '
                        'its formula)', **_MEGATRON),
}


def megatron_count(layers, d, vocab, seq):
    """Narayanan et al.'s parameter count of a GPT model."""
    return 12 * layers * d * d + 13 * layers * d + (vocab + seq) * d


def capacity(cfg):
    """Slots per expert and sequence: MaxText's expert_capacity_per_batch
    = int(seq * topk / experts * capacity_factor)."""
    return int(cfg['seq'] * cfg['topk'] / cfg['experts'] * cfg['capacity'])


def resolve(cfg):
    """cfg with its defaults filled in (kv_heads, param_dtype); raises
    ValueError with a message when the knobs do not fit together."""
    c = dict(LEGACY)
    c.update(cfg)
    if c.get('kv_heads') is None:
        c['kv_heads'] = c['heads']
    if c.get('param_dtype') is None:
        c['param_dtype'] = c['dtype']
    h, kv = c['heads'], c['kv_heads']
    if h % kv:
        raise ValueError('kv_heads=%d must divide heads=%d' % (kv, h))
    if c['fused_qkv'] and kv != h:
        raise ValueError('fused_qkv=1 needs kv_heads = heads (%d != %d); '
                         'use fused_qkv=0' % (kv, h))
    if c['experts']:
        if c['topk'] > c['experts']:
            raise ValueError('topk=%d is more than experts=%d' % (
                c['topk'], c['experts']))
        if capacity(c) < 1:
            raise ValueError('capacity=%g gives experts no slot (seq * topk / '
                             'experts * capacity < 1)' % c['capacity'])
        if c['scan'] and c['layers'] % c['moe_every']:
            raise ValueError('scan=1 needs moe_every=%d to divide layers=%d' %
                             (c['moe_every'], c['layers']))
    if c['batch'] % c['microbatches']:
        raise ValueError('microbatches=%d must divide batch=%d' % (
            c['microbatches'], c['batch']))
    if c['pos'] == 'rope' and c['head_dim'] % 2:
        raise ValueError('pos=rope needs an even head_dim (%d)'
                         % c['head_dim'])
    return c


# --------------------------------------------------------------- layers


def rms_normalize(g, x, scale=None, eps=1e-5):
    """x * rsqrt(mean(x^2) + eps) over the last dim (times scale)."""
    d = x.shape[-1]
    kept = list(range(x.rank - 1))
    ms = g.div(g.reduce_sum(g.mul(x, x), (x.rank - 1,)), float(d))
    inv = g.rsqrt(g.add(ms, eps))
    y = g.mul(x, g.broadcast_in_dim(inv, x.shape, kept))
    if scale is not None:
        y = g.mul(y, bcast_last(g, scale, x.shape))
    return y


def mixed(cfg):
    """Whether the step runs in dtype over parameters kept in param_dtype
    (JAX mixed precision), and then the type of its norm statistics and
    loss: f32, or the wider of the two when that is f64."""
    if cfg['dtype'] == cfg['param_dtype']:
        return None
    return 'f64' if 'f64' in (cfg['dtype'], cfg['param_dtype']) else 'f32'


def norm(g, P, x, cfg, *keys):
    """The config's norm of x [..., d] with params[keys]['scale'] (and
    ['bias'] for a LayerNorm unless bias=0; no parameters with keys
    empty).  Under mixed precision the statistics are computed in f32 and
    the normalized value cast back before the scale, as MaxText's RMSNorm
    does."""
    d = x.shape[-1]
    wide = mixed(cfg)
    h = g.convert(x, wide) if wide else x
    if cfg['norm'] == 'rms':
        h = rms_normalize(g, h)
    else:
        h = normalize(g, h, (x.rank - 1,))
    h = g.convert(h, x.dtype)
    if not keys:
        return h
    h = g.mul(h, bcast_last(g, P((d,), *keys, 'scale'), h.shape))
    if cfg['norm'] == 'layer' and cfg['bias'] != '0':
        h = g.add(h, bcast_last(g, P((d,), *keys, 'bias'), h.shape))
    return h


def rope(g, x, theta):
    """Rotary position embedding of x [b, s, n, hd] as MaxText's
    RotaryEmbedding: timescale theta^(2j/hd), angles position / timescale
    for positions 0..s-1, halves (x1, x2) -> (x1 cos - x2 sin,
    x2 cos + x1 sin); the angles in f32 (f64 when x is)."""
    b, s, n, hd = x.shape
    half = hd // 2
    ft = 'f64' if x.dtype == 'f64' else 'f32'
    frac = g.div(g.mul(g.convert(g.iota((half,), 0), ft), 2.0), float(hd))
    timescale = g.power(g.full((half,), float(theta), ft), frac)
    pos = g.convert(g.iota((s,), 0), ft)
    ang = g.div(g.broadcast_in_dim(pos, (s, half), (0,)),
                g.broadcast_in_dim(timescale, (s, half), (1,)))
    shape = (b, s, n, half)
    sin = g.broadcast_in_dim(g.convert(g.sine(ang), x.dtype), shape, (1, 3))
    cos = g.broadcast_in_dim(g.convert(g.cosine(ang), x.dtype), shape, (1, 3))
    x1 = g.slice(x, (0, 0, 0, 0), shape)
    x2 = g.slice(x, (0, 0, 0, half), (b, s, n, hd))
    first = g.sub(g.mul(x1, cos), g.mul(x2, sin))
    second = g.add(g.mul(x2, cos), g.mul(x1, sin))
    return g.concatenate([first, second], 3)


# ------------------------------------------------------ fused attention

FMHA_FWD = '__cudnn$fmhaSoftmax'
FMHA_BWD = '__cudnn$fmhaSoftmaxBackward'
_ELEM = {'bf16': 'BF16', 'f16': 'F16', 'f32': 'F32', 'f64': 'F64'}


def _fmha_config(b, h, s, t, dtype, scale, causal, bwd):
    """The backend_config JSON that JAX's cuDNN fused attention
    (jax._src.cudnn.fused_attention_stablehlo, layout BTNH) writes."""
    layout = {'dim_level_types': [], 'dim_unique': [], 'dim_ordered': [],
              'minor_to_major': ['3', '2', '1', '0'], 'tiles': [],
              'element_size_in_bits': '0', 'memory_space': '0',
              'index_primitive_type': 'PRIMITIVE_TYPE_INVALID',
              'pointer_primitive_type': 'PRIMITIVE_TYPE_INVALID',
              'dynamic_shape_metadata_prefix_bytes': '0'}
    c = {'algorithm': {'algo_id': '0', 'math_type': 'TENSOR_OP_MATH',
                       'tuning_knobs': {'17': '1', '24': '0'},
                       'is_cudnn_frontend': True, 'workspace_size': '0'},
         'fmha_scale': scale, 'dropout_rate': 0.0,
         'intermediate_tensor_shape': {
             'element_type': _ELEM[dtype],
             'dimensions': [str(b), str(h), str(s), str(t)],
             'tuple_shapes': [], 'layout': layout,
             'is_dynamic_dimension': [False] * 4},
         'seed': 42, 'is_flash_attention': True,
         'mask_type': 'CAUSAL' if causal else 'NO_MASK',
         'sliding_window_length': 0}
    dims = ([((3, 3), ((0, 2), (0, 2))), ((3, 1), ((0, 1), (0, 2)))] if not bwd
            else [((2, 1), ((0, 1), (0, 2))), ((3, 1), ((0, 1), (0, 2))),
                  ((2, 1), ((0, 1), (0, 2))), ((3, 3), ((0, 2), (0, 2)))])
    names = (['bmm1_dot_dimension_numbers', 'bmm2_dot_dimension_numbers']
             if not bwd else
             ['bmm1_grad_gemm1_dot_dimension_numbers',
              'bmm1_grad_gemm2_dot_dimension_numbers',
              'bmm2_grad_gemm1_dot_dimension_numbers',
              'bmm2_grad_gemm2_dot_dimension_numbers'])
    for name, ((lc, rc), (lb, rb)) in zip(names, dims):
        c[name] = {'lhs_contracting_dimensions': [str(lc)],
                   'rhs_contracting_dimensions': [str(rc)],
                   'lhs_batch_dimensions': [str(i) for i in lb],
                   'rhs_batch_dimensions': [str(i) for i in rb]}
    return json.dumps({'operation_queue_id': '0',
                       'wait_on_operation_queues': [],
                       'cudnn_fmha_backend_config': c})


def _layouts(*ranks_or_layouts):
    out = []
    for x in ranks_or_layouts:
        lay = list(range(x - 1, -1, -1)) if isinstance(x, int) else list(x)
        out.append('dense<%s> : tensor<%dxindex>' % (
            str(lay[0]) if len(lay) == 1 else '[%s]' % ', '.join(
                map(str, lay)), len(lay)))
    return '[%s]' % ', '.join(out)


def flash_attention(g, q, k, v, scale, causal):
    """Causal (or not) attention of q [b, s, h, hd] over k, v [b, t, kv,
    hd] (kv divides h: grouped queries) as JAX emits cuDNN's fused flash
    attention (jax.nn.dot_product_attention(implementation='cudnn'),
    layout BTNH): stablehlo.custom_call @__cudnn$fmhaSoftmax(q, k, v) ->
    (out [b, h, s, hd] laid out as BTNH, softmax stats [b, h, s] f32 (the
    log-sum-exp of each row), an empty u8 workspace), then a transpose to
    [b, s, h, hd].  Its gradient is @__cudnn$fmhaSoftmaxBackward(q, k, v,
    stats, d_out, out) -> (dq [b, h, s, hd], dk, dv [b, kv, t, hd],
    workspace), each transposed back.  The [s, t] scores are never an
    array of the program."""
    b, s, h, hd = q.shape
    t, nkv = k.shape[1], k.shape[2]
    dt = q.dtype
    attrs = [('api_version', '2 : i32'),
             ('backend_config', mlir_string(_fmha_config(
                 b, h, s, t, dt, scale, causal, False))),
             ('operand_layouts', _layouts(4, 4, 4)),
             ('result_layouts', _layouts((3, 1, 2, 0), 3, 1))]
    o_bnth, stats, _ = g.custom_call(
        FMHA_FWD, (q, k, v),
        [((b, h, s, hd), dt), ((b, h, s), 'f32'), ((0,), 'ui8')], attrs)
    o = g.transpose(o_bnth, (0, 2, 1, 3))

    def vjp(g2, ct, need):
        battrs = [('api_version', '2 : i32'),
                  ('backend_config', mlir_string(_fmha_config(
                      b, h, s, t, dt, scale, causal, True))),
                  ('operand_layouts', _layouts(4, 4, 4, 3, 4, 4)),
                  ('result_layouts', _layouts((3, 1, 2, 0), (3, 1, 2, 0),
                                              (3, 1, 2, 0), 1))]
        dq, dk, dv, _ = g2.custom_call(
            FMHA_BWD, (q, k, v, stats, ct, o),
            [((b, h, s, hd), dt), ((b, nkv, t, hd), dt),
             ((b, nkv, t, hd), dt), ((0,), 'ui8')], battrs)
        return [g2.transpose(x, (0, 2, 1, 3)) if nd else None
                for x, nd in zip((dq, dk, dv), need)]

    return g.custom_vjp(o, (q, k, v), vjp)




def _softmax_last(g, scores):
    """softmax over the last dim with a stop-gradient max (jax.nn.softmax)."""
    last = scores.rank - 1
    kept = tuple(range(last))
    m = g.stop_gradient(g.reduce_max(scores, (last,)))
    e = g.exp(g.sub(scores, g.broadcast_in_dim(m, scores.shape, kept)))
    den = g.reduce_sum(e, (last,))
    return g.div(e, g.broadcast_in_dim(den, scores.shape, kept))


def attention(g, P, keys, x, heads, head_dim, causal, kv=None, cfg=LEGACY,
              kv_heads=None):
    """Multi-head attention of x [b, s, d].  kv = (cache_k, cache_v, pos)
    for a decode step: the new k, v are written at pos and the query
    attends to positions <= pos.  cfg's fused_qkv, bias and pos choose
    the projections (w_qkv [d, 3, h, hd] or w_q [d, h, hd], w_k and w_v
    [d, kv_heads, hd]) and rotary positions; w_out [h, hd, d].  With
    kv_heads < heads the query heads are grouped as [kv_heads, group] and
    each group attends to its key/value head (MaxText's 'btkgd,bskd').
    Returns (out [b, s, d], (new cache_k, new cache_v) or None)."""
    b, s, d = x.shape
    h, hd = heads, head_dim
    nkv = kv_heads or h
    biased = cfg['bias'] == '1'
    if cfg['fused_qkv']:
        w_qkv = P((d, 3, h, hd), *keys, 'w_qkv')
        qkv = g.dot_general(x, w_qkv, ((2,), (0,)))             # [b,s,3,h,hd]
        if biased:
            qkv = g.add(qkv, g.broadcast_in_dim(
                P((3, h, hd), *keys, 'b_qkv'), qkv.shape, (2, 3, 4)))

        def part(j):
            return g.reshape(g.slice(qkv, (0, 0, j, 0, 0),
                                     (b, s, j + 1, h, hd)), (b, s, h, hd))
        q, k, v = part(0), part(1), part(2)
    else:
        def proj(name, n):
            y = g.dot_general(x, P((d, n, hd), *keys, 'w_' + name),
                              ((2,), (0,)))                    # [b,s,n,hd]
            if biased:
                y = g.add(y, g.broadcast_in_dim(
                    P((n, hd), *keys, 'b_' + name), y.shape, (2, 3)))
            return y
        q, k, v = proj('q', h), proj('k', nkv), proj('v', nkv)
    if cfg['pos'] == 'rope':
        q = rope(g, q, cfg['rope_theta'])
        k = rope(g, k, cfg['rope_theta'])
    new_kv = None
    if kv is not None:
        cache_k, cache_v, pos = kv
        zero = g.const(0, 'i32')
        k = g.dynamic_update_slice(cache_k, k, (zero, pos, zero, zero))
        v = g.dynamic_update_slice(cache_v, v, (zero, pos, zero, zero))
        new_kv = (k, v)
    t = k.shape[1]
    if cfg['attention'] == 'flash':
        assert kv is None, 'attention=flash: training steps only'
        o = flash_attention(g, q, k, v, 1.0 / math.sqrt(hd), causal)
        o = g.checkpoint_name(o, 'context')
        out = g.dot_general(o, P((h, hd, d), *keys, 'w_out'),
                            ((2, 3), (0, 1)))                   # [b,s,d]
        if biased:
            out = g.add(out, bcast_last(g, P((d,), *keys, 'b_out'),
                                        out.shape))
        return out, None
    g.tag = 'attn_core'                     # scores and softmax
    if nkv == h:
        scores = g.dot_general(q, k, ((3,), (3,)), ((0, 2), (0, 2)))
        smask = (2, 3)                                          # [b,h,s,t]
    else:
        grp = h // nkv
        q = g.reshape(q, (b, s, nkv, grp, hd))
        scores = g.dot_general(q, k, ((4,), (3,)), ((0, 2), (0, 2)))
        smask = (2, 4)                                     # [b,kv,s,g,t]
    scores = g.mul(scores, 1.0 / math.sqrt(hd))
    mask = None
    if kv is not None:
        keypos = g.iota((t,), 0)
        mask = g.compare(keypos, g.broadcast_in_dim(pos, (t,), ()), 'LE')
        mask = g.broadcast_in_dim(mask, scores.shape, (smask[1],))
    elif causal:
        mask = g.compare(g.iota((s, t), 0), g.iota((s, t), 1), 'GE')
        mask = g.broadcast_in_dim(mask, scores.shape, smask)
    if mask is not None:
        scores = g.select(mask, scores, g.full(scores.shape, float('-inf'),
                                               scores.dtype))
    p = _softmax_last(g, scores)
    g.tag = None
    if nkv == h:
        o = g.dot_general(p, v, ((3,), (1,)), ((0, 1), (0, 2)))  # [b,h,s,hd]
        g.checkpoint_name(o, 'context')
        w_out = P((h, hd, d), *keys, 'w_out')
        out = g.dot_general(o, w_out, ((1, 3), (0, 1)))          # [b,s,d]
    else:
        o = g.dot_general(p, v, ((4,), (1,)), ((0, 1), (0, 2)))  # [b,kv,s,g,hd]
        g.checkpoint_name(o, 'context')
        w = g.reshape(P((h, hd, d), *keys, 'w_out'), (nkv, h // nkv, hd, d))
        out = g.dot_general(o, w, ((1, 3, 4), (0, 1, 2)))         # [b,s,d]
    if biased:
        out = g.add(out, bcast_last(g, P((d,), *keys, 'b_out'), out.shape))
    return out, new_kv


def _project(g, P, h, n_out, blk, name, biased):
    """h [b, s, n_in] @ params[blk]['mlp']['w_<name>'] (+ b_<name>)."""
    w = P((h.shape[2], n_out), blk, 'mlp', 'w_' + name)
    u = g.dot_general(h, w, ((2,), (0,)))
    if biased:
        u = g.add(u, bcast_last(g, P((n_out,), blk, 'mlp', 'b_' + name),
                                u.shape))
    return u


def mlp(g, P, h, cfg, blk):
    d, f = h.shape[2], cfg['d_ff']
    torch = cfg['act_grad'] == 'torch'
    all_b = cfg['bias'] == '1'
    if cfg['mlp'] == 'swiglu':
        gate = _project(g, P, h, f, blk, 'gate', all_b)
        up = _project(g, P, h, f, blk, 'up', all_b)
        u = g.mul(silu(g, gate, torch), up)
    else:
        u = _project(g, P, h, f, blk, 'up', cfg['bias'] != '0')
        u = gelu_tanh(g, u, torch) if cfg['mlp'] == 'gelu' else relu(g, u)
    return _project(g, P, u, d, blk, 'down', all_b)


def top_k(g, logits, k):
    """jax.lax.top_k over the last dim of logits [b, s, E] as k rounds of
    arg-max (the first index of the largest value; its logit selected by a
    one-hot mask, so the gradient reaches the chosen logits only, as
    top_k's does): (values [b, s, k], one-hot masks [b, s, k, E] as i1).
    chlo.top_k itself is not in the op set the zoo prints."""
    b, s, E = logits.shape
    dt = logits.dtype
    iota = g.convert(g.iota((b, s, E), 2), dt)
    masked = logits
    vals, hots = [], []
    for _ in range(k):
        m = g.stop_gradient(g.reduce_max(masked, (2,)))
        top = g.compare(masked, g.broadcast_in_dim(m, (b, s, E), (0, 1)), 'EQ')
        first = g.neg(g.reduce_max(g.neg(g.select(top, iota,
                                                  g.full((b, s, E), E, dt))),
                                   (2,)))
        hot = g.compare(iota, g.broadcast_in_dim(first, (b, s, E), (0, 1)),
                        'EQ')
        vals.append(g.reduce_sum(g.select(hot, logits, g.zeros((b, s, E), dt)),
                                 (2,)))
        hots.append(hot)
        masked = g.select(hot, g.full((b, s, E), float('-inf'), dt), masked)
    val = g.concatenate([g.reshape(v, (b, s, 1)) for v in vals], 2)
    hot = g.concatenate([g.reshape(h, (b, s, 1, E)) for h in hots], 2)
    return val, hot


def moe(g, P, h, cfg, blk):
    """A routed mixture of experts as MaxText's RoutedMoE with a capacity
    factor (its dropping 'dense_matmul' path): router logits h w_router
    [d, E], top-k experts per token, their logits' softmax as weights (in
    f32 under mixed precision); each expert's tokens of a sequence
    counted in order (a cumsum over the flattened [s * k] choices) and
    those beyond the capacity C dropped; the dispatch mask [b, s, E, C]
    (one-hot of each kept token's slot) and the combine mask (it times the
    token's weight for that expert); then the einsums 'BSM,BSEC->EBCM'
    (dispatch), 'EBCM,EMH->EBCH' with the stacked expert weights w_up (and
    w_gate for SwiGLU) [E, d, d_ff], the activation, 'EBCH,EHM->EBCM' with
    w_down [E, d_ff, d], and 'EBCM,BSEC->BSM' (combine).  The expert dim
    leads every expert weight: it is what expert parallelism tiles."""
    b, s, d = h.shape
    E, K, f = cfg['experts'], cfg['topk'], cfg['d_ff']
    torch = cfg['act_grad'] == 'torch'
    C = capacity(cfg)
    dt = h.dtype
    logits = g.dot_general(h, P((d, E), blk, 'moe', 'router'), ((2,), (0,)))
    val, hot = top_k(g, logits, K)                   # [b,s,K], [b,s,K,E]
    wide = mixed(cfg)
    weights = _softmax_last(g, g.convert(val, wide) if wide else val)
    weights = g.convert(weights, dt)
    mask = g.convert(hot, 'i32')                                # [b,s,K,E]
    fused = g.reshape(mask, (b, s * K, E))
    count_fused = g.cumsum(fused, 1)
    count = g.mul(g.reshape(count_fused, (b, s, K, E)), mask)
    kept = g.mul(mask, g.convert(g.compare(count, g.full(count.shape, C,
                                                          'i32'), 'LE'),
                                 'i32'))
    combined = g.reduce_sum(kept, (2,))                         # [b,s,E]
    probs = g.reduce_sum(g.mul(g.broadcast_in_dim(weights, (b, s, K, E),
                                                  (0, 1, 2)),
                               g.convert(mask, dt)), (2,))      # [b,s,E]
    probs = g.mul(probs, g.convert(combined, dt))
    position = g.mul(g.reduce_sum(g.reshape(g.mul(fused, count_fused),
                                            (b, s, K, E)), (2,)), combined)
    slot = g.compare(g.iota((b, s, E, C + 1), 3),
                     g.broadcast_in_dim(position, (b, s, E, C + 1), (0, 1, 2)),
                     'EQ')
    slot = g.slice(g.convert(slot, dt), (0, 0, 0, 1), (b, s, E, C + 1))
    dispatch = slot                                            # [b,s,E,C]
    combine = g.mul(g.broadcast_in_dim(probs, (b, s, E, C), (0, 1, 2)), slot)
    x = g.transpose(g.dot_general(h, dispatch, ((1,), (1,)), ((0,), (0,))),
                    (2, 0, 3, 1))                               # [E,b,C,d]
    # The tokens as the experts take them and the experts' output, named
    # (with their cotangents) for expert parallelism: schedules/ep.txt
    # fences them so that they change hands by all_to_all (GShard).
    x = g.named(x, '%s/moe/dispatched' % blk)

    def expert(name, n_in, n_out):
        return P((E, n_in, n_out), blk, 'moe', 'w_' + name)

    def ein(a, w):                                   # EBCM,EMH->EBCH
        return g.dot_general(a, w, ((3,), (1,)), ((0,), (0,)))
    if cfg['mlp'] == 'swiglu':
        gate = ein(x, expert('gate', d, f))
        u = g.mul(silu(g, gate, torch), ein(x, expert('up', d, f)))
    else:
        u = ein(x, expert('up', d, f))
        u = gelu_tanh(g, u, torch) if cfg['mlp'] == 'gelu' else relu(g, u)
    y = g.named(ein(u, expert('down', f, d)), '%s/moe/expert_out' % blk)
    out = g.dot_general(y, combine, ((0, 2), (2, 3)), ((1,), (0,)))
    return g.transpose(out, (0, 2, 1))                          # [b,s,d]


def is_moe(cfg, i):
    """Whether block i has the MoE layer: every moe_every-th block (the
    last of each group), as MaxText interleaves them."""
    return cfg['experts'] > 0 and (i + 1) % cfg['moe_every'] == 0


def transformer_block(g, P, i, x, cfg, kv=None, name=None):
    blk = name or 'block_%d' % i

    def named(v, what):
        # names=1: the [b, s, d] values MaxText's DecoderLayer constrains
        # to (activation_batch, activation_length, activation_embed)
        return g.named(v, '%s/%s' % (blk, what)) if cfg['names'] else v
    h = named(norm(g, P, x, cfg, blk, 'ln1'), 'lnx')
    a, new_kv = attention(g, P, (blk, 'attn'), h, cfg['heads'],
                          cfg['head_dim'], causal=True, kv=kv, cfg=cfg,
                          kv_heads=cfg.get('kv_heads'))
    x = named(g.add(x, named(a, 'attention_lnx')), 'intermediate')
    h = named(norm(g, P, x, cfg, blk, 'ln2'), 'lnx_mlp')
    if is_moe(cfg, i):
        y = moe(g, P, h, cfg, blk)
    else:
        y = mlp(g, P, h, cfg, blk)
    x = named(g.add(x, named(y, 'mlp_lnx')), 'layer_output')
    return x, new_kv


def _trace_block(g, P, x, cfg, i=0, n=1):
    """Blocks i .. i+n-1 traced into a graph of their own on one unit's
    weights: (the graph, its carry argument, its weight arguments in order
    of first use with their keys below the unit, its output).  A unit of
    one block drops the block's name (params['blocks'][...] once
    stacked); a unit of n names its blocks sub_0 .. sub_<n-1>."""
    body = Graph(g.dtype)
    LP = LayerParams(body, P.dtype, P.compute, drop=n == 1)
    carry = body.arg('carry', x.shape, x.dtype, requires_grad=True)
    out = carry
    for j in range(n):
        out, _ = transformer_block(body, LP, i + j, out, cfg,
                                   name=None if n == 1 else 'sub_%d' % j)
    return body, carry, LP.order, out


def scanned_blocks(g, P, x, cfg):
    """The blocks as jax.lax.scan over stacked per-layer weights: the block
    (with MoE every moe_every-th block, the unit of moe_every blocks) is
    traced once on one unit's weights, which become params['blocks'][...]
    of shape [layers / unit, ...]; with remat, the scanned function is the
    checkpointed unit (MaxText's scan of nn.remat)."""
    n = cfg['moe_every'] if cfg['experts'] else 1
    body, carry, order, out = _trace_block(g, P, x, cfg, 0, n)
    L = cfg['layers'] // n
    stacked = [P.arg((L,) + v.shape, 'blocks', *keys) for keys, v in order]
    policy = None if cfg['remat'] == 'none' else cfg['remat']
    return scan(g, body, carry, [v for _, v in order], out, x, stacked,
                policy)


def remat_block(g, P, i, x, cfg):
    """Block i under jax.checkpoint with the config's policy."""
    body, carry, order, out = _trace_block(g, P, x, cfg, i)
    weights = [P.arg(v.shape, 'block_%d' % i, *keys) for keys, v in order]
    return remat(g, body, [carry] + [v for _, v in order], out,
                 [x] + weights, cfg['remat'])


def embed_tokens(g, P, tokens, cfg):
    embed = P((cfg['vocab'], cfg['d_model']), 'embed')
    idx = g.reshape(tokens, tokens.shape + (1,))
    x = g.gather_rows(embed, idx)
    if cfg['pos'] == 'learned':
        table = P((tokens.shape[1], cfg['d_model']), 'pos_embed')
        x = g.add(x, g.broadcast_in_dim(table, x.shape, (1, 2)))
    return x, embed


def transformer_logits(g, P, tokens, cfg, progress=None, caches=None,
                       pos=None):
    """Logits [b, s, vocab] of tokens [b, s]; with caches (a list of
    (k, v) per block) also returns the updated caches."""
    cfg = resolve(cfg)
    x, embed = embed_tokens(g, P, tokens, cfg)
    new_caches = []
    if cfg.get('scan') and caches is None:
        x = scanned_blocks(g, P, x, cfg)
        if progress:
            progress('scanned %d layers' % cfg['layers'])
    for i in range(0 if cfg.get('scan') and caches is None
                   else cfg['layers']):
        kv = None if caches is None else (caches[i][0], caches[i][1], pos)
        if cfg['remat'] != 'none' and caches is None:
            x, nk = remat_block(g, P, i, x, cfg), None
        else:
            x, nk = transformer_block(g, P, i, x, cfg, kv)
        new_caches.append(nk)
        if progress:
            progress('%d/%d layers' % (i + 1, cfg['layers']))
    if cfg['bias'] == 'mlp':
        x = norm(g, P, x, cfg)                # final parameter-free norm
    else:
        x = norm(g, P, x, cfg, 'final_norm')
    if cfg['tied']:
        logits = g.dot_general(x, embed, ((2,), (1,)))
    else:
        w = P((cfg['d_model'], cfg['vocab']), 'unembed')
        logits = g.dot_general(x, w, ((2,), (0,)))
    if cfg.get('names'):  # MaxText: (batch, length, activation_vocab)
        logits = g.named(logits, 'logits')
    return logits, new_caches


def softmax_xent(g, logits, targets, names=False):
    """Mean over batch and sequence of -log softmax(logits)[target]; with
    names, the log-sum-exp [b, s] located 'xent/lse' (its cotangent, a sum
    over the vocabulary, 'transpose(jvp(xent/lse))')."""
    b, s, v = logits.shape
    m = g.stop_gradient(g.reduce_max(logits, (2,)))
    sh = g.sub(logits, g.broadcast_in_dim(m, logits.shape, (0, 1)))
    lse = g.log(g.reduce_sum(g.exp(sh), (2,)))
    if names:
        lse = g.named(lse, 'xent/lse')
    logp = g.sub(sh, g.broadcast_in_dim(lse, logits.shape, (0, 1)))
    onehot = g.compare(g.iota(logits.shape, 2),
                       g.broadcast_in_dim(targets, logits.shape, (0, 1)),
                       'EQ')
    onehot = g.convert(onehot, logits.dtype)
    nll = g.neg(g.reduce_sum(g.mul(onehot, logp), (0, 1, 2)))
    return g.div(nll, float(b * s))


def step_loss(g, P, inputs, targets, cfg, progress):
    """The loss of one (micro-)batch: forward pass and cross-entropy."""
    logits, _ = transformer_logits(g, P, inputs, cfg, progress)
    wide = mixed(cfg)
    if wide:           # MaxText's cast_logits_to_fp32: the loss in f32
        logits = g.convert(logits, wide)
    return softmax_xent(g, logits, targets, cfg.get('names'))


def accumulate(g, P, inputs, targets, cfg, progress):
    """Gradient accumulation as MaxText's gradient_accumulation_steps (and
    optax.MultiSteps): the batch split into K micro-batches [K, batch/K,
    seq], micro-batch k taking rows k, K + k, 2K + k, ... (reshaped to
    [batch/K, K, seq] and transposed): a batch split across devices then
    splits every micro-batch alike, so that each device accumulates over
    its own rows as data-parallel gradient accumulation does (K
    contiguous blocks would give each device whole micro-batches, i.e.
    tile the loop's dim, and a data-parallel schedule could not split
    the step); then a jax.lax.scan over the K micro-batches whose body
    runs the forward and
    backward pass of one and adds its loss and gradients to the carried
    sums (in param_dtype); returns (loss, gradients): the sums / K, i.e.
    the mean loss and its gradient, as one step on the whole batch."""
    K = cfg['microbatches']
    b, s = inputs.shape
    tb = Graph(g.dtype)
    TP = Params(tb, dtype=P.dtype, compute=P.compute)
    x_args = [tb.arg('micro' + n, (b // K, s), 'i32') for n in ('i', 't')]
    loss = step_loss(tb, TP, x_args[0], x_args[1], cfg, progress)
    tparams = [v for _, v in TP.order]
    progress('backward pass', force=True)
    grads = tb.grad(loss, tparams)
    acc_loss = tb.arg('acc', (), loss.dtype)
    acc = [tb.arg('acc', v.shape, v.dtype) for v in tparams]
    outs = [tb.add(acc_loss, loss)] + [tb.add(a, d) for a, d in
                                       zip(acc, grads)]
    params = P.like(TP)
    xs = [g.transpose(g.reshape(v, (b // K, K, s)), (1, 0, 2))
          for v in (inputs, targets)]
    inits = [g.zeros((), loss.dtype)] + [g.zeros_like(v) for v in params]
    sums = fold(g, tb, [acc_loss] + acc, outs, inits, x_args, xs, tparams,
                params)
    return (g.div(sums[0], float(K)),
            [g.div(v, float(K)) for v in sums[1:]])


def build_transformer(cfg, progress):
    cfg = resolve(cfg)
    g = Graph(cfg['param_dtype'])
    P = Params(g, dtype=cfg['param_dtype'], compute=cfg['dtype'])
    b, s = cfg['batch'], cfg['seq']
    inputs = g.arg("batch['inputs']", (b, s), 'i32')
    targets = g.arg("batch['targets']", (b, s), 'i32')
    if cfg['microbatches'] == 1:
        loss = step_loss(g, P, inputs, targets, cfg, progress)
        return train_step(g, P, loss, [inputs, targets], progress)
    loss, grads = accumulate(g, P, inputs, targets, cfg, progress)
    return train_step(g, P, loss, [inputs, targets], progress, grads=grads)


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
