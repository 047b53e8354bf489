"""The seeded property test over the transformer's knob space.

Each case draws a tiny configuration (every knob: norm, MLP, positions,
tying, biases, grouped queries, fused projections, dtype, remat policy,
flash attention, scanning, micro-batches, routed experts) and checks:

- the text passes shlo_check;
- remat: the step with the drawn policy gives remat=none's results bit for
  bit, both evaluated with every value rounded to its type (refeval's
  rounded mode: f32 or the mixed bf16/f32 step);
- in float64 (refeval): micro-batches give the whole batch's step, the
  scanned step the unrolled one (weights restacked), flash attention the
  dot-attention step, each within 1e-12 of the result's magnitude;
- `autopart check` (the C partitioner, lowering and interpreter) finds
  the partitioned step equivalent to the unpartitioned one under BP, FSDP
  (schedules/fsdp.txt), Megatron MP (derived from the parameter names) and,
  with experts, EP (schedules/ep.txt); in f32 (a bf16 step's partial sums
  that cancel can move by more than bf16's tolerance: seed 103's
  grads['unembed'] does, by 0.08 on values of 0.05, where f32 agrees to
  1e-7 and f64 to 1e-9).

    ZOO_PROPERTY_CASES=N   cases (default 12: about 15 s of CPU)
    ZOO_PROPERTY_SEED=S    first seed (default 1)
    AUTOPART=PATH          the autopart CLI (default: build/bin/autopart;
                           without one the check part is skipped)
"""

import os
import random
import re
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models      # noqa: E402
import refeval     # noqa: E402
import shlo        # noqa: E402
import shlo_check  # noqa: E402
from zoo_testlib import random_inputs  # noqa: E402

CASES = int(os.environ.get('ZOO_PROPERTY_CASES', '12'))
SEED = int(os.environ.get('ZOO_PROPERTY_SEED', '1'))
AUTOPART = os.environ.get('AUTOPART') or os.path.join(
    HERE, '..', '..', 'build', 'bin', 'autopart')
SCHEDULES = os.path.join(HERE, 'schedules')


def draw(rng):
    """One configuration of the knob space, as key=value overrides of
    'tiny' (d_model 16)."""
    heads = rng.choice((2, 4))
    kv = rng.choice([k for k in (1, 2, 4) if heads % k == 0])
    c = {'heads': heads, 'head_dim': 16 // heads, 'kv_heads': kv,
         'fused_qkv': int(kv == heads and rng.random() < 0.5),
         'norm': rng.choice(('layer', 'rms')),
         'mlp': rng.choice(('gelu', 'relu', 'swiglu')),
         'pos': rng.choice(('none', 'learned', 'rope')),
         'tied': rng.choice((0, 1)), 'bias': rng.choice(('0', '1', 'mlp')),
         'remat': rng.choice(shlo.REMAT),
         'attention': rng.choice(('dot', 'flash')),
         'scan': rng.choice((0, 1)), 'batch': 4, 'seq': rng.choice((4, 8)),
         'microbatches': rng.choice((1, 2)), 'layers': 2}
    if rng.random() < 0.4:
        c.update(experts=4, topk=rng.choice((1, 2)),
                 moe_every=rng.choice((1, 2)))
        # capacity factors that leave each expert one slot or more, some
        # of them dropping tokens
        c['capacity'] = rng.choice([f for f in (0.5, 1.0, 1.5) if
                                    c['seq'] * c['topk'] / 4 * f >= 1])
    if rng.random() < 0.3:
        c.update(dtype='bf16', param_dtype='f32')
    return ['%s=%s' % kv_ for kv_ in sorted(c.items())]


def with_(overrides, **kw):
    """overrides with some keys replaced."""
    d = dict(o.split('=', 1) for o in overrides)
    d.update((k, str(v)) for k, v in kw.items())
    return ['%s=%s' % kv for kv in sorted(d.items())]


def build(overrides):
    cfg = models.make_config('transformer', 'tiny', overrides)
    return cfg, models.build('transformer', cfg)


def inputs_by_name(built, cfg, seed, rounded):
    ins = random_inputs(built, cfg, 'transformer', random.Random(seed))
    out = {}
    for a in built.args:
        shape, data = ins[a.id]
        if rounded and a.dtype in shlo.FLOAT_TYPES:
            data = [shlo.round_to(x, a.dtype) for x in data]
        out[a.attrs['name']] = (shape, data)
    return out


def restack(name, shape, values, n_unit):
    """The value of scanned argument `name` from the unrolled model's
    values: ['blocks'] (unit of one block) or ['blocks']['sub_j'] (unit of
    n_unit blocks) stacked over the units."""
    m = re.search(r"\['blocks'\](\['sub_(\d+)'\])?", name)
    if not m:
        return values[name]
    j = int(m.group(2) or 0)
    out = []
    for u in range(shape[0]):
        block = "['block_%d']" % (u * n_unit + j)
        out += values[name.replace(m.group(0), block, 1)][1]
    return (shape, out)


def run(built, named, rounded=False):
    ins = {a.id: named[a.attrs['name']] for a in built.args}
    outs = refeval.evaluate(built.graph, ins, [v for v, _ in built.results],
                            rounded)
    return {info: o for (_, info), o in zip(built.results, outs)}


def close(tc, got, want, what, tol=1e-12):
    tc.assertEqual(sorted(got), sorted(want), what)
    for k in want:
        scale = max([1.0] + [abs(x) for x in want[k][1]])
        err = max([0.0] + [abs(a - b) for a, b in zip(got[k][1],
                                                      want[k][1])])
        tc.assertLessEqual(err, tol * scale, '%s: %s' % (what, k))


def megatron(built):
    """A Megatron schedule on `model` from the parameter names: attention
    heads (w_qkv, w_q/k/v, their biases, w_out) and the MLP's hidden dim
    (w_gate/w_up and biases, w_down; for experts their d_ff dim), each
    one dim further when stacked; weights whose dim `model`=2 does not
    divide (one key/value head) are left whole."""
    dims = {'w_qkv': 2, 'b_qkv': 1, 'w_q': 1, 'w_k': 1, 'w_v': 1, 'b_q': 0,
            'b_k': 0, 'b_v': 0, 'w_out': 0, 'w_gate': 1, 'w_up': 1,
            'b_gate': 0, 'b_up': 0, 'w_down': 0}
    tiles = []
    for path, v in built.params:
        m = re.search(r"\['(attn|mlp|moe)'\]\['(\w+)'\]$", path)
        if not m or m.group(2) not in dims:
            continue
        d = dims[m.group(2)] + (m.group(1) == 'moe') + \
            ("['blocks']" in path)
        if d < len(v.shape) and v.shape[d] % 2 == 0:
            tiles.append('params%s=%d' % (path, d))
    return 'manual model ' + ' '.join(tiles) if tiles else ''


BP = "manual batch batch['inputs']=0 batch['targets']=0"


def schedules(cfg, built):
    """(name, mesh, schedule text) of the schedules the case is held to."""
    def text(name):
        with open(os.path.join(SCHEDULES, name)) as f:
            return f.read()
    out = [('bp', 'batch=2', BP), ('fsdp', 'batch=2', text('fsdp.txt'))]
    mp = megatron(built)
    if mp:
        out.append(('bp+mp', 'batch=2,model=2', BP + '\n' + mp))
    if cfg['experts']:
        out.append(('bp+ep', 'batch=2,expert=2', BP + '\n' + text('ep.txt')))
    return out


class PropertyTest(unittest.TestCase):
    counts = {'cases': 0, 'remat': 0, 'micro': 0, 'scan': 0, 'flash': 0,
              'checks': 0}

    def test_knob_space(self):
        t0 = time.time()
        have_cli = os.access(AUTOPART, os.X_OK)
        for k in range(CASES):
            rng = random.Random(SEED + k)
            ov = draw(rng)
            with self.subTest(seed=SEED + k, overrides=' '.join(ov)):
                self.check_case(ov, SEED + k, have_cli)
        sys.stderr.write(
            'property: %d cases (seeds %d..%d): %d remat bit-identity, %d '
            'micro-batch, %d scanned-unrolled, %d flash-dot comparisons, '
            '%d autopart checks%s; %.1f s\n' % (
                self.counts['cases'], SEED, SEED + CASES - 1,
                self.counts['remat'], self.counts['micro'],
                self.counts['scan'], self.counts['flash'],
                self.counts['checks'],
                '' if have_cli else ' (no autopart CLI: skipped)',
                time.time() - t0))

    def check_case(self, ov, seed, have_cli):
        cfg, built = build(ov)
        text = built.text()
        shlo_check.check(text)
        self.counts['cases'] += 1
        # remat: bit for bit in the step's own types
        if cfg['remat'] != 'none':
            _, base = build(with_(ov, remat='none'))
            named = inputs_by_name(base, cfg, seed, True)
            self.assertEqual(run(built, named, True), run(base, named, True),
                             'remat=%s' % cfg['remat'])
            self.counts['remat'] += 1
        # float64: the same step written other ways
        f64 = with_(ov, dtype='f64', param_dtype='f64')
        cfg64, ref = build(with_(f64, microbatches=1, scan=0,
                                 attention='dot'))
        named = inputs_by_name(ref, cfg64, seed, False)
        want = run(ref, named)
        if cfg['microbatches'] > 1:
            _, b = build(with_(f64, scan=0, attention='dot'))
            close(self, run(b, named), want, 'microbatches')
            self.counts['micro'] += 1
        if cfg['attention'] == 'flash':
            _, b = build(with_(f64, microbatches=1, scan=0))
            close(self, run(b, named), want, 'flash')
            self.counts['flash'] += 1
        if cfg['scan']:
            _, b = build(with_(f64, microbatches=1, attention='dot'))
            n_unit = cfg['moe_every'] if cfg['experts'] else 1
            snamed = {a.attrs['name']: restack(a.attrs['name'], a.shape,
                                               named, n_unit)
                      for a in b.args}
            got = run(b, snamed)
            unstacked = {}
            for name, (shape, vals) in got.items():
                if "['blocks']" not in name:
                    unstacked[name] = (shape, vals)
                    continue
                per = len(vals) // shape[0]
                m = re.search(r"\['blocks'\](\['sub_(\d+)'\])?", name)
                j = int(m.group(2) or 0)
                for u in range(shape[0]):
                    unstacked[name.replace(m.group(0), "['block_%d']" % (
                        u * n_unit + j), 1)] = (shape[1:],
                                                vals[u * per:(u + 1) * per])
            close(self, unstacked, want, 'scan')
            self.counts['scan'] += 1
        if not have_cli:
            return
        if cfg['dtype'] != 'f32':
            cfg, built = build(with_(ov, dtype='f32', param_dtype='f32'))
            text = built.text()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'step.mlir')
            with open(path, 'w') as f:
                f.write(text)
            for name, mesh, sched in schedules(cfg, built):
                r = subprocess.run([AUTOPART, 'check', path, '--mesh', mesh,
                                    '--schedule', sched, '--seed',
                                    str(seed)], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
                self.assertEqual(r.returncode, 0, '%s on %s:\n%s' % (
                    name, mesh, r.stdout.decode()[-3000:]))
                self.counts['checks'] += 1


if __name__ == '__main__':
    unittest.main()
