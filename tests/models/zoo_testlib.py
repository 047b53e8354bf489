"""zoo_testlib.py: what the zoo's test files share (not a test file):
running the CLI, random inputs, generation with a cache, the gradient
check against finite differences, the training-step layout check, the
scanned-against-unrolled check and one step in float64."""

import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models      # noqa: E402
import refeval     # noqa: E402
import shlo        # noqa: E402
import shlo_check  # noqa: E402

MODELGEN = os.path.join(HERE, 'modelgen')

ALLOWED_OPS = {
    'constant', 'add', 'subtract', 'multiply', 'divide', 'maximum', 'power',
    'negate', 'exponential', 'log', 'tanh', 'logistic', 'rsqrt', 'sqrt',
    'convert', 'compare', 'select', 'iota', 'broadcast_in_dim', 'reshape',
    'transpose', 'reduce', 'dot_general', 'slice', 'concatenate', 'pad',
    'reverse', 'gather', 'scatter', 'convolution', 'dynamic_update_slice',
    'return',
}
SCAN_OPS = {'while', 'dynamic_slice'}     # transformer scan=1 only


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, MODELGEN] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env)


def random_inputs(built, cfg, model, rng):
    """{arg id: (shape, data)} with valid indices for the integer args."""
    hi = {'transformer': cfg.get('vocab'),
          'transformer_infer': cfg.get('vocab'),
          'unet': cfg.get('timesteps'), 'gns': cfg.get('nodes')}.get(model)
    vals = {}
    for a in built.graph.args:
        n = shlo.prod(a.shape)
        name = a.attrs['name']
        if a.dtype == 'i32':
            if name == 'step':
                data = [3]
            elif name == 'pos':
                data = [1]
            else:
                data = [rng.randrange(hi) for _ in range(n)]
        elif name.startswith('opt_state.nu'):
            data = [rng.random() for _ in range(n)]
        else:
            data = [rng.gauss(0.0, 0.5) for _ in range(n)]
        vals[a.id] = (a.shape, data)
    return vals


def check_gradients(tc, model, overrides=()):
    """Gradients of every parameter tensor of model's tiny config (f64)
    against central finite differences along a random direction:
    relative error < 1e-3.  Returns (built, inputs, outputs)."""
    cfg = models.make_config(model, 'tiny', ['dtype=f64'] + list(overrides))
    built = models.build(model, cfg)
    rng = random.Random(1234)
    inputs = random_inputs(built, cfg, model, rng)
    outs = refeval.evaluate(built.graph, inputs,
                            [v for v, _ in built.results])
    loss = built.results[0][0]
    tc.assertTrue(outs[0][1][0] == outs[0][1][0])   # not NaN
    eps = 1e-5
    for i, (path, p) in enumerate(built.params):
        grad = outs[1 + i][1]
        direction = [rng.gauss(0.0, 1.0) for _ in grad]
        analytic = sum(g * d for g, d in zip(grad, direction))
        base = inputs[p.id][1]

        def loss_at(s):
            moved = dict(inputs)
            moved[p.id] = (p.shape, [x + s * eps * d
                                     for x, d in zip(base, direction)])
            return refeval.evaluate(built.graph, moved, [loss])[0][1][0]
        fd = (loss_at(1.0) - loss_at(-1.0)) / (2 * eps)
        rel = abs(fd - analytic) / max(abs(fd), abs(analytic), 1e-12)
        tc.assertLess(rel, 1e-3, '%s %s: fd %r autodiff %r' % (
            model, path, fd, analytic))
    return built, inputs, outs


def all_configs():
    for model, (_, _, configs) in models.MODELS.items():
        for config in configs:
            yield model, config


_CACHE = {}


def generated(model, config, overrides=()):
    key = (model, config, tuple(overrides))
    if key not in _CACHE:
        cfg = models.make_config(model, config, overrides)
        built = models.build(model, cfg)
        text = built.text()
        _CACHE[key] = (cfg, built, text, shlo_check.check(text))
    return _CACHE[key]


ORIGINAL = ('t32', 't48', 'small', 'tiny')    # the zoo's first transformers


def check_train_layout(tc, info, param_paths, batch_names):
    """The training-step layout: arguments, aliases and results in the
    documented order."""
    n = len(param_paths)
    locs = (['params' + p for p in param_paths] +
            ['opt_state.mu' + p for p in param_paths] +
            ['opt_state.nu' + p for p in param_paths] +
            batch_names + ['step'])
    tc.assertEqual(info['arg_locs'], locs)
    aliases = ([1 + n + i for i in range(n)] +
               [1 + 2 * n + i for i in range(n)] +
               [1 + 3 * n + i for i in range(n)] +
               [None] * len(batch_names) + [1 + 4 * n])
    tc.assertEqual(info['aliases'], aliases)
    infos = (['[0]'] + ['grads' + p for p in param_paths] +
             ['params' + p for p in param_paths] +
             ['opt_state.mu' + p for p in param_paths] +
             ['opt_state.nu' + p for p in param_paths] + ['step'])
    tc.assertEqual(info['result_infos'], infos)


BLOCK_KEYS = ["['ln1']['scale']", "['ln1']['bias']", "['attn']['w_qkv']",
              "['attn']['w_out']", "['ln2']['scale']", "['ln2']['bias']",
              "['mlp']['w_up']", "['mlp']['b_up']", "['mlp']['w_down']"]


def unstack_name(name, layer):
    """params['blocks'][...] -> params['block_<layer>'][...] (any prefix:
    params, grads, opt_state.mu/nu)."""
    return name.replace("['blocks']", "['block_%d']" % layer, 1)


def check_equivalent(tc, overrides, n_stacked=9):
    """The scanned tiny transformer against the unrolled one on the same
    weights (stacked), float64 with refeval: every result within 1e-12."""
    cfg = models.make_config('transformer', 'tiny', overrides)
    unrolled = models.build('transformer', cfg)
    scanned = models.build('transformer', dict(cfg, scan=1))
    L = cfg['layers']
    rng = random.Random(11)
    ins = random_inputs(unrolled, cfg, 'transformer', rng)
    by_name = {a.attrs['name']: ins[a.id][1] for a in unrolled.args}

    def stacked(name):
        if "['blocks']" not in name:
            return by_name[name]
        return [x for i in range(L)
                for x in by_name[unstack_name(name, i)]]
    sins = {a.id: (a.shape, stacked(a.attrs['name']))
            for a in scanned.args}
    tc.assertEqual(len(sins), len(scanned.args))
    outs = refeval.evaluate(unrolled.graph, ins,
                            [v for v, _ in unrolled.results])
    ref = {info: o[1] for (_, info), o in zip(unrolled.results, outs)}
    souts = refeval.evaluate(scanned.graph, sins,
                             [v for v, _ in scanned.results])
    if n_stacked is not None:
        tc.assertEqual(len(souts), 1 + 4 * (1 + n_stacked) + 1)
    checked = 0
    for (v, info), (_, got) in zip(scanned.results, souts):
        if "['blocks']" in info:
            want = [x for i in range(L)
                    for x in ref[unstack_name(info, i)]]
        else:
            want = ref[info]
        tc.assertEqual(len(got), len(want), info)
        scale = max([1.0] + [abs(x) for x in want])
        err = max(abs(a - b) for a, b in zip(got, want))
        tc.assertLessEqual(err, 1e-12 * scale, info)
        checked += len(got)
    # every unrolled result element was compared exactly once
    tc.assertEqual(checked, sum(len(o[1]) for o in outs))
    tc.assertNotEqual(ref['[0]'][0], 0.0)


def run_step(extra, config='tiny', seed=5):
    """{result_info: values} of one step in float64 (refeval)."""
    cfg = models.make_config('transformer', config, ['dtype=f64'] + list(extra))
    built = models.build('transformer', cfg)
    ins = random_inputs(built, cfg, 'transformer', random.Random(seed))
    outs = refeval.evaluate(built.graph, ins, [v for v, _ in built.results])
    return {info: o[1] for (_, info), o in zip(built.results, outs)}


def split_types(s):
    return [shlo_check.parse_type(t) for t in shlo_check.split_top(s)]


LLAMA_KNOBS = ('norm=rms', 'mlp=swiglu', 'pos=rope', 'tied=0', 'bias=0',
               'fused_qkv=0')


MOE = ('experts=4', 'topk=2')
