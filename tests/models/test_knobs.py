"""Tests of the transformer's knobs, presets, remat, fused attention,
gradient accumulation and experts (stdlib unittest; see test_modelgen.py
for the zoo's other tests).

    python3 -m unittest discover -s tests/models -p 'test_*.py'
"""

import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models      # noqa: E402
import refeval     # noqa: E402
import shlo        # noqa: E402
import transformer  # noqa: E402
from zoo_testlib import (  # noqa: E402
    ALLOWED_OPS, LLAMA_KNOBS, MOE, check_equivalent, check_gradients,
    check_train_layout, generated, run_cli, run_step, split_types)


class KnobTest(unittest.TestCase):
    """The transformer's architectural knobs (key=value overrides)."""

    def test_gradients(self):
        # every knob's value in some config, gradients of every parameter
        # against finite differences (f64)
        for extra in (LLAMA_KNOBS + ('kv_heads=1', 'bias=1'),
                      ('mlp=relu', 'pos=learned', 'bias=0'),
                      ('bias=1', 'norm=layer', 'mlp=gelu', 'tied=0')):
            with self.subTest(extra=extra):
                check_gradients(self, 'transformer', extra)

    def test_legacy_values_are_the_default(self):
        # naming the original layout's values changes nothing
        legacy = ('mlp=gelu', 'norm=layer', 'pos=none', 'tied=1', 'bias=mlp',
                  'fused_qkv=1', 'kv_heads=2', 'rope_theta=10000')
        self.assertEqual(generated('transformer', 'tiny', legacy)[2],
                         generated('transformer', 'tiny')[2])

    def test_llama_layout(self):
        # grouped-query attention with split projections, SwiGLU, RMSNorm,
        # rotary positions, an untied output projection, no biases
        cfg, built, text, info = generated(
            'transformer', 'small', LLAMA_KNOBS + ('kv_heads=2',))
        shapes = dict((p, v.shape) for p, v in built.params)
        blk = ["['attn']['w_q']", "['attn']['w_k']", "['attn']['w_v']",
               "['attn']['w_out']", "['ln1']['scale']", "['ln2']['scale']",
               "['mlp']['w_gate']", "['mlp']['w_up']", "['mlp']['w_down']"]
        names = ["['embed']"]
        for i in range(4):
            b = "['block_%d']" % i
            names += [b + "['ln1']['scale']", b + "['attn']['w_q']",
                      b + "['attn']['w_k']", b + "['attn']['w_v']",
                      b + "['attn']['w_out']", b + "['ln2']['scale']",
                      b + "['mlp']['w_gate']", b + "['mlp']['w_up']",
                      b + "['mlp']['w_down']"]
        names += ["['final_norm']['scale']", "['unembed']"]
        self.assertEqual([p for p, _ in built.params], names)
        self.assertEqual(len(blk), 9)
        self.assertEqual(shapes["['block_1']['attn']['w_q']"], (256, 4, 64))
        self.assertEqual(shapes["['block_1']['attn']['w_k']"], (256, 2, 64))
        self.assertEqual(shapes["['block_1']['attn']['w_out']"], (4, 64, 256))
        self.assertEqual(shapes["['block_1']['mlp']['w_gate']"], (256, 1024))
        self.assertEqual(shapes["['unembed']"], (256, 1000))
        check_train_layout(self, info, names, [
            "batch['inputs']", "batch['targets']"])
        ops = set(re.findall(r'(?:= |")stablehlo\.([a-z_]+)', text))
        self.assertLessEqual(ops, ALLOWED_OPS | {'sine', 'cosine'})
        self.assertIn('stablehlo.sine', text)
        self.assertIn('stablehlo.logistic', text)      # silu
        # queries grouped [b, s, kv_heads, group, hd] against 2 kv heads
        self.assertIn('tensor<8x128x2x2x64xf32>', text)
        self.assertNotIn('tanh', text)
        self.assertEqual(text.count('"stablehlo.gather"'), 1)

    def test_biases(self):
        def params(*extra):
            return [p for p, _ in generated('transformer', 'tiny', extra)[1]
                    .params if "['block_0']" in p or 'block' not in p]
        self.assertEqual(params('bias=1', 'mlp=swiglu', 'tied=0'), [
            "['embed']", "['block_0']['ln1']['scale']",
            "['block_0']['ln1']['bias']", "['block_0']['attn']['w_qkv']",
            "['block_0']['attn']['b_qkv']", "['block_0']['attn']['w_out']",
            "['block_0']['attn']['b_out']", "['block_0']['ln2']['scale']",
            "['block_0']['ln2']['bias']", "['block_0']['mlp']['w_gate']",
            "['block_0']['mlp']['b_gate']", "['block_0']['mlp']['w_up']",
            "['block_0']['mlp']['b_up']", "['block_0']['mlp']['w_down']",
            "['block_0']['mlp']['b_down']", "['final_norm']['scale']",
            "['final_norm']['bias']", "['unembed']"])
        self.assertEqual(params('bias=0', 'pos=learned'), [
            "['embed']", "['pos_embed']", "['block_0']['ln1']['scale']",
            "['block_0']['attn']['w_qkv']", "['block_0']['attn']['w_out']",
            "['block_0']['ln2']['scale']", "['block_0']['mlp']['w_up']",
            "['block_0']['mlp']['w_down']", "['final_norm']['scale']"])

    def test_scanned_equals_unrolled(self):
        check_equivalent(self, ['dtype=f64', 'layers=3', 'kv_heads=1',
                                         'pos=learned', 'bias=1'] +
                                  list(LLAMA_KNOBS[:-2]) + ['fused_qkv=0'],
                                  n_stacked=None)

    def test_mixed_precision(self):
        # bf16 compute over f32 master weights, as Flax with dtype=bf16,
        # param_dtype=f32: parameters, moments and gradients f32, each
        # parameter converted to bf16 where it is used, every matmul in
        # bf16, norm statistics and the loss in f32
        extra = ('dtype=bf16', 'param_dtype=f32')
        for knobs in ((), LLAMA_KNOBS + ('kv_heads=1', 'scan=1')):
            with self.subTest(knobs=knobs):
                cfg, built, text, info = generated('transformer', 'tiny',
                                                   extra + knobs)
                head = text.split('\n')[1]
                self.assertNotIn('bf16', head)
                self.assertIn('-> (tensor<f32> {jax.result_info = "[0]"}',
                              head)
                for _, v in built.params:
                    self.assertEqual(v.dtype, 'f32')
                dots = [ln for ln in text.split('\n')
                        if 'stablehlo.dot_general' in ln]
                self.assertTrue(dots)
                for ln in dots:
                    self.assertNotIn('f32', ln.split(' : ')[-1])
                if 'scan=1' not in knobs:
                    for i in range(len(built.params)):
                        self.assertRegex(text, r'stablehlo\.convert %%arg%d '
                                         r': \(tensor<[0-9x]*xf32>\) -> '
                                         r'tensor<[0-9x]*xbf16>' % i)
                # the norm statistics: reductions over d_model in f32
                self.assertRegex(text, r'applies stablehlo\.add across '
                                 r'dimensions = \[2\] : \(tensor<2x4x16xf32>')
        # the same gradients as the f32 step in exact arithmetic
        check_gradients(self, 'transformer', extra + LLAMA_KNOBS +
                                 ('kv_heads=1',))
        # param_dtype defaults to dtype: pure bf16 is the original form
        self.assertEqual(generated('transformer', 'tiny',
                                   ('dtype=bf16', 'param_dtype=bf16'))[2],
                         generated('transformer', 'tiny', ('dtype=bf16',))[2])

    def test_refusals(self):
        cases = {
            ('kv_heads=3',): 'kv_heads=3 must divide heads=2',
            ('kv_heads=1',): 'fused_qkv=1 needs kv_heads = heads',
            ('mlp=geglu',): "bad value 'geglu' for mlp (choose from gelu, "
                            "relu, swiglu)",
            ('bias=2',): "(choose from 0, 1, mlp)",
            ('tied=yes',): 'expected 0 or 1',
            ('pos=rope', 'head_dim=3', 'fused_qkv=0'): 'even head_dim',
            ('moe=1',): "unknown override key 'moe' for transformer (keys: "
                        "layers, d_model, heads, kv_heads",
        }
        for extra, msg in cases.items():
            with self.subTest(extra=extra):
                r = run_cli('transformer', '--config', 'tiny', *extra)
                self.assertEqual(r.returncode, 2)
                err = r.stderr.decode()
                self.assertEqual(err.count('\n'), 1, err)
                self.assertIn(msg, err)


class PresetTest(unittest.TestCase):
    """The named configurations of real models."""

    def test_parameter_counts(self):
        # every preset with a published count is within 1% of it (counted
        # on the scanned form: the same parameters stacked, and quick)
        for name, (cfg, published, source) in transformer.PRESETS.items():
            if published is None:
                continue
            with self.subTest(preset=name):
                self.assertTrue(source)
                built = models.build('transformer', models.make_config(
                    'transformer', name, ['scan=1']))
                n = sum(shlo.prod(v.shape) for _, v in built.params)
                self.assertLess(abs(n / published - 1), 0.01,
                                '%s: %d vs %d' % (name, n, published))
        # exact where the published figure is exact
        for name in ('llama2_7b', 'llama3_8b', 'llama3_70b', 'llama3_405b',
                     'mpt_7b', 'mixtral_8x7b'):
            built = models.build('transformer', models.make_config(
                'transformer', name, ['scan=1']))
            self.assertEqual(sum(shlo.prod(v.shape) for _, v in built.params),
                             transformer.PRESETS[name][1], name)
        # Megatron's GPT: the paper's formula plus the final LayerNorm
        for name, (l, d) in (('gpt_1_7b', (24, 2304)), ('gpt_3_6b', (30, 3072)),
                             ('gpt_7_5b', (36, 4096))):
            self.assertEqual(transformer.megatron_count(l, d, 51200, 2048),
                             transformer.PRESETS[name][1])

    def test_scanned_counts_equal_unrolled(self):
        for name in ('llama3_8b', 'gpt3_5b', 'mpt_7b'):
            counts = [sum(shlo.prod(v.shape) for _, v in models.build(
                'transformer', models.make_config('transformer', name,
                                                  [extra])).params)
                      for extra in ('scan=0', 'scan=1')]
            self.assertEqual(counts[0], counts[1], name)

    def test_llama3_8b(self):
        cfg, built, text, info = generated('transformer', 'llama3_8b',
                                           ('scan=1',))
        shapes = dict((p, v.shape) for p, v in built.params)
        self.assertEqual(shapes["['blocks']['attn']['w_k']"], (32, 4096, 8, 128))
        self.assertEqual(shapes["['blocks']['mlp']['w_gate']"],
                         (32, 4096, 14336))
        self.assertEqual(shapes["['unembed']"], (4096, 128256))
        self.assertIn("tensor<16x8192xi32> loc(\"batch['inputs']\")", text)
        self.assertIn('tensor<16x8192x4096xbf16>', text)
        self.assertIn('dense<5.000000e+05>', text)              # rope_theta

    def test_stats(self):
        r = run_cli('transformer', '--config', 'llama2_7b', 'scan=1',
                    '--stats')
        self.assertEqual(r.returncode, 0, r.stderr)
        line = r.stdout.decode()
        self.assertEqual(line.count('\n'), 1)
        self.assertRegex(line, r'^transformer llama2_7b: ops=\d+ args=39 '
                         r'results=50 param_tensors=12 params=6738415616 '
                         r'\(6.74 B\) param_bytes=26953662464 published='
                         r'6.738 B \(\+0.00%\) time=[0-9.]+s rss=\d+MiB\n$')
        # with -o the text is written as well
        path = os.path.join(HERE, 'out', 'test_stats.mlir')
        os.makedirs(os.path.dirname(path), exist_ok=True)
        r = run_cli('transformer', '--config', 'tiny', '--stats', '-o', path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b'published', r.stdout)
        with open(path) as f:
            self.assertEqual(f.read(), generated('transformer', 'tiny')[2])
        os.remove(path)


class RematTest(unittest.TestCase):
    """remat=POLICY: jax.checkpoint of each block."""

    def test_same_step_as_without(self):
        # recomputation gives the same numbers: every result bit for bit
        # (float64, refeval), unrolled and scanned
        for scan in ((), ('scan=1',)):
            ref = run_step(scan)
            for policy in shlo.REMAT[1:]:
                with self.subTest(scan=scan, policy=policy):
                    got = run_step(scan + ('remat=' + policy,))
                    self.assertEqual(got, ref)

    def barriers(self, text):
        out = []
        for line in text.split('\n'):
            m = re.search(r'stablehlo\.optimization_barrier (.*) : (.*)$',
                          line)
            if m:
                out.append((m.group(1).split(', '), split_types(m.group(2))))
        return out

    def test_full(self):
        # one barrier per layer in the backward pass over the layer's input,
        # its 9 weights and the cotangent; the forward ops run twice
        cfg, built, text, info = generated('transformer', 'tiny',
                                           ('remat=full',))
        _, _, plain, _ = generated('transformer', 'tiny')
        bars = self.barriers(text)
        self.assertEqual(len(bars), 2)
        for names, types in bars:
            self.assertEqual(len(names), 1 + 9 + 1)
            self.assertEqual(types[0], types[-1])       # x and its cotangent
            self.assertEqual(sum(n.startswith('%arg') for n in names), 9)
        # the second layer's barrier comes first (backward order)
        self.assertEqual(bars[0][0][1], '%arg10')
        # per layer 5 forward dots recomputed: all but the last one (its
        # result only enters the residual sum, whose transpose reads
        # nothing)
        self.assertEqual(text.count('stablehlo.dot_general'),
                         plain.count('stablehlo.dot_general') + 2 * 5)
        self.assertEqual(info['args'], generated('transformer', 'tiny')[3]
                         ['args'])

    def test_policies_save_what_they_say(self):
        def saved(policy, scan=False):
            extra = ('remat=' + policy,) + (('scan=1',) if scan else ())
            text = generated('transformer', 'tiny', extra)[2]
            return text, self.barriers(text)
        # dots: every dot result saved (6 per layer), none recomputed
        text, bars = saved('dots')
        _, _, plain, _ = generated('transformer', 'tiny')
        self.assertEqual(text.count('stablehlo.dot_general'),
                         plain.count('stablehlo.dot_general'))
        # dots_no_batch: the scores and p.v dots (batch dims b, h) are
        # recomputed, the four weight projections are not
        text, bars = saved('dots_no_batch')
        self.assertEqual(text.count('stablehlo.dot_general'),
                         plain.count('stablehlo.dot_general') + 2 * 2)
        # attn: only scores and softmax recomputed: one dot per layer
        text, bars = saved('attn')
        self.assertEqual(text.count('stablehlo.dot_general'),
                         plain.count('stablehlo.dot_general') + 2)
        for names, types in bars:
            self.assertNotIn(((2, 2, 4, 4), 'f32'), types)   # no scores
        # sac (torchtitan's per-op policy) on a llama block with fused
        # attention: of the 7 projections q, k, v, out, gate, up, down the
        # 2nd, 4th and 6th (k, out, up) are recomputed; the attention's
        # results are saved, so its forward runs once per layer (dots
        # saves no custom_call result and runs it again)
        llama = LLAMA_KNOBS + ('attention=flash',)
        fwd = 'custom_call @__cudnn$fmhaSoftmax('
        plain = generated('transformer', 'tiny', llama)[2]
        text = generated('transformer', 'tiny', llama + ('remat=sac',))[2]
        self.assertEqual(text.count('stablehlo.dot_general'),
                         plain.count('stablehlo.dot_general') + 2 * 3)
        self.assertEqual((plain.count(fwd), text.count(fwd)), (2, 2))
        text = generated('transformer', 'tiny', llama + ('remat=dots',))[2]
        self.assertEqual(text.count(fwd), 4)
        for names, types in self.barriers(
                generated('transformer', 'tiny', llama + ('remat=sac',))[2]):
            self.assertIn(((2, 4, 2, 8), 'f32'), types)   # q and v
            self.assertIn(((2, 2, 4), 'f32'), types)      # softmax stats
        # scanned: the forward loop stacks fewer residuals with remat
        plain_s = generated('transformer', 'tiny', ('scan=1',))[2]
        for policy, fewer in (('full', True), ('dots', True), ('attn', True)):
            text, bars = saved(policy, scan=True)
            self.assertEqual(len(bars), 1)
            n_res = int(re.search(r'%\d+:(\d+) = stablehlo\.while', text)
                        .group(1))
            n_plain = int(re.search(r'%\d+:(\d+) = stablehlo\.while',
                                    plain_s).group(1))
            self.assertLess(n_res, n_plain, policy)
        # full on the scanned model stacks the layer inputs alone
        text, _ = saved('full', scan=True)
        self.assertEqual(int(re.search(r'%\d+:(\d+) = stablehlo\.while',
                                       text).group(1)), 1 + 1 + 1 + 9)

    def test_checks_and_parses(self):
        for extra in (('remat=dots_no_batch', 'attention=flash'),
                      ('remat=full', 'scan=1', 'dtype=bf16', 'param_dtype=f32'),
                      ('remat=attn',) + LLAMA_KNOBS + ('kv_heads=1',)):
            with self.subTest(extra=extra):
                cfg, built, text, info = generated('transformer', 'tiny',
                                                   extra)
                self.assertEqual(info['unused_args'], [])


class FlashTest(unittest.TestCase):
    """attention=flash: cuDNN's fused attention as JAX emits it."""

    def test_same_step_as_dot_attention(self):
        # the reference kernels (refeval) against the written-out softmax
        for extra in ((), ('kv_heads=1', 'fused_qkv=0'), ('scan=1',),
                      ('remat=dots',)):
            with self.subTest(extra=extra):
                ref = run_step(extra)
                got = run_step(extra + ('attention=flash',))
                for k in ref:
                    scale = max([1.0] + [abs(x) for x in ref[k]])
                    err = max(abs(a - b) for a, b in zip(got[k], ref[k]))
                    self.assertLess(err, 1e-12 * scale, k)

    def test_gradients(self):
        check_gradients(self, 'transformer', (
            'attention=flash', 'kv_heads=1', 'fused_qkv=0', 'pos=rope'))

    def test_custom_calls(self):
        cfg, built, text, info = generated(
            'transformer', 'small', ('attention=flash', 'kv_heads=2',
                                     'fused_qkv=0', 'dtype=bf16'))
        fwd = [ln for ln in text.split('\n')
               if 'custom_call @__cudnn$fmhaSoftmax(' in ln]
        bwd = [ln for ln in text.split('\n')
               if 'custom_call @__cudnn$fmhaSoftmaxBackward(' in ln]
        self.assertEqual((len(fwd), len(bwd)), (4, 4))
        self.assertTrue(fwd[0].endswith(
            ': (tensor<8x128x4x64xbf16>, tensor<8x128x2x64xbf16>, '
            'tensor<8x128x2x64xbf16>) -> (tensor<8x4x128x64xbf16>, '
            'tensor<8x4x128xf32>, tensor<0xui8>)'), fwd[0][-200:])
        self.assertTrue(bwd[0].endswith(
            ': (tensor<8x128x4x64xbf16>, tensor<8x128x2x64xbf16>, '
            'tensor<8x128x2x64xbf16>, tensor<8x4x128xf32>, '
            'tensor<8x128x4x64xbf16>, tensor<8x128x4x64xbf16>) -> '
            '(tensor<8x4x128x64xbf16>, tensor<8x2x128x64xbf16>, '
            'tensor<8x2x128x64xbf16>, tensor<0xui8>)'), bwd[0][-300:])
        self.assertIn('api_version = 2 : i32', fwd[0])
        self.assertIn('result_layouts = [dense<[3, 1, 2, 0]> : '
                      'tensor<4xindex>, dense<[2, 1, 0]> : tensor<3xindex>, '
                      'dense<0> : tensor<1xindex>]', fwd[0])
        conf = json.loads(refeval._unescape(
            re.search(r'backend_config = ("[^"]*")', bwd[0]).group(1)))
        c = conf['cudnn_fmha_backend_config']
        self.assertEqual(c['mask_type'], 'CAUSAL')
        self.assertAlmostEqual(c['fmha_scale'], 1 / 8)
        self.assertEqual(c['intermediate_tensor_shape']['dimensions'],
                         ['8', '4', '128', '128'])
        self.assertIn('bmm2_grad_gemm2_dot_dimension_numbers', c)
        # no [s, s] scores anywhere
        self.assertNotIn('128x128x', text)
        self.assertNotIn('x128x128x', text)


class ActGradTest(unittest.TestCase):
    """act_grad=torch: the MLP's GELU / SiLU differentiated as PyTorch's
    GeluBackward / SiluBackward (the backward reads the input only)."""

    CASES = (('mlp=gelu',), ('mlp=swiglu',), ('mlp=gelu', 'experts=2'),
             ('mlp=swiglu', 'remat=sac'), ('mlp=gelu', 'scan=1'))

    def test_same_step_as_jax(self):
        # the same numbers as the op-by-op derivative (float64, refeval)
        for extra in self.CASES:
            with self.subTest(extra=extra):
                ref = run_step(extra)
                got = run_step(extra + ('act_grad=torch',))
                for k in ref:
                    scale = max([1.0] + [abs(x) for x in ref[k]])
                    err = max(abs(a - b) for a, b in zip(got[k], ref[k]))
                    self.assertLess(err, 1e-12 * scale, k)

    def test_gradients(self):
        for extra in self.CASES[:3]:
            with self.subTest(extra=extra):
                check_gradients(self, 'transformer',
                                extra + ('act_grad=torch',))

    def test_backward_recomputes(self):
        # the forward is unchanged; the backward computes the activation
        # again from its input (tanh or logistic once more per layer), and
        # act_grad=jax is the default, byte for byte
        for act, op in (('gelu', 'tanh'), ('swiglu', 'logistic')):
            with self.subTest(act=act):
                jax = generated('transformer', 'tiny', ('mlp=' + act,))[2]
                self.assertEqual(generated('transformer', 'tiny', (
                    'mlp=' + act, 'act_grad=jax'))[2], jax)
                torch = generated('transformer', 'tiny', (
                    'mlp=' + act, 'act_grad=torch'))[2]
                n = 'stablehlo.' + op + ' '
                self.assertEqual((jax.count(n), torch.count(n)), (2, 4))


class MicrobatchTest(unittest.TestCase):
    """microbatches=K: gradient accumulation over K micro-batches."""

    def test_same_step_as_whole_batch(self):
        # the mean of the micro-batches' losses and gradients is the whole
        # batch's: every result within 1e-12 of it (float64)
        for extra in ((), ('scan=1',), ('scan=1', 'remat=full',
                                         'attention=flash')):
            ref = run_step(extra + ('batch=4',))
            for k in (2, 4):
                with self.subTest(extra=extra, microbatches=k):
                    got = run_step(extra + ('batch=4',
                                            'microbatches=%d' % k))
                    self.assertEqual(set(got), set(ref))
                    for name in ref:
                        scale = max([1.0] + [abs(x) for x in ref[name]])
                        err = max(abs(a - b) for a, b in
                                  zip(got[name], ref[name]))
                        self.assertLess(err, 1e-12 * scale, name)

    def test_layout(self):
        # the same arguments and results; one loop of K trips over the
        # batch reshaped [batch / K, K, seq] and transposed to [K, batch /
        # K, seq] (micro-batch k: rows k, K + k, ...), forward and backward
        # inside
        # (with scan=1 the layer loops nested in it), Adam after it
        for extra in ((), ('scan=1',)):
            with self.subTest(extra=extra):
                _, _, text, info = generated('transformer', 'tiny',
                                             extra + ('batch=8',
                                                      'microbatches=2'))
                _, _, _, whole = generated('transformer', 'tiny',
                                           extra + ('batch=8',))
                for k in ('arg_locs', 'aliases', 'result_infos'):
                    self.assertEqual(info[k], whole[k])
                self.assertEqual(text.count(' = stablehlo.while('),
                                 3 if extra else 1)
                m = re.search(r'(%\d+) = stablehlo.reshape %arg' + str(
                    len(info['arg_locs']) - 3) + r' : \(tensor<8x4xi32>\) '
                    r'-> tensor<4x2x4xi32>\n', text)
                self.assertIsNotNone(m)
                self.assertIn('stablehlo.transpose %s, dims = [1, 0, 2] : '
                              '(tensor<4x2x4xi32>) -> tensor<2x4x4xi32>'
                              % m.group(1), text)
                outer = text.index(' = stablehlo.while(')
                self.assertNotIn('stablehlo.sqrt', text[outer:text.index(
                    '\n    }\n', outer)])            # Adam is outside

    def test_refused(self):
        r = run_cli('transformer', '--config', 'tiny', 'microbatches=3')
        self.assertEqual(r.returncode, 2)
        self.assertIn(b'microbatches=3 must divide batch=2', r.stderr)


class MoETest(unittest.TestCase):
    """experts=E topk=K moe_every=N capacity=C: routed experts."""

    def test_gradients(self):
        # finite differences through routing, dropping (capacity 0.5 on 8
        # tokens: 2 slots per expert) and the einsums
        check_gradients(self, 'transformer', MOE)
        check_gradients(self, 'transformer', MOE + (
            'mlp=swiglu', 'capacity=0.5', 'seq=8', 'moe_every=2'))

    def test_knobs_compose(self):
        # remat is bit for bit, micro-batches the whole batch's numbers,
        # scanned (units of moe_every blocks) the unrolled model's
        extra = MOE + ('mlp=swiglu', 'capacity=0.5')
        ref = run_step(extra)
        self.assertEqual(run_step(extra + ('remat=dots',)), ref)
        got = run_step(extra + ('microbatches=2',))
        for k in ref:
            self.assertLess(max(abs(a - b) for a, b in zip(got[k], ref[k])),
                            1e-12 * max([1.0] + [abs(x) for x in ref[k]]))
        check_equivalent(self, ['dtype=f64', 'layers=3'] +
                                  list(MOE), n_stacked=None)

    def test_layout(self):
        cfg, built, text, info = generated('transformer', 'tiny', MOE + (
            'mlp=swiglu', 'moe_every=2', 'layers=4'))
        names = [p for p, _ in built.params]
        shapes = dict((p, v.shape) for p, v in built.params)
        # blocks 1 and 3 have experts, 0 and 2 a dense MLP
        self.assertIn("['block_0']['mlp']['w_gate']", names)
        self.assertNotIn("['block_1']['mlp']['w_up']", names)
        self.assertEqual(shapes["['block_1']['moe']['router']"], (16, 4))
        self.assertEqual(shapes["['block_3']['moe']['w_gate']"], (4, 16, 32))
        self.assertEqual(shapes["['block_3']['moe']['w_up']"], (4, 16, 32))
        self.assertEqual(shapes["['block_3']['moe']['w_down']"], (4, 32, 16))
        # capacity int(4 * 2 / 4 * 1.25) = 2: dispatch [b, s, E, C] and
        # the einsums; the per-sequence token count is a reduce_window
        self.assertIn('tensor<2x4x4x2xf32>', text)
        self.assertIn('-> tensor<4x2x2x32xf32>', text)           # EBCH
        self.assertEqual(text.count('"stablehlo.reduce_window"'), 2)
        self.assertIn('window_dimensions = array<i64: 1, 8, 1>', text)
        # scanned: a unit of two blocks, stacked [layers / 2, ...]
        cfg, built, text, info = generated('transformer', 'tiny', MOE + (
            'moe_every=2', 'layers=4', 'scan=1'))
        shapes = dict((p, v.shape) for p, v in built.params)
        self.assertEqual(shapes["['blocks']['sub_1']['moe']['w_up']"],
                         (2, 4, 16, 32))
        self.assertEqual(shapes["['blocks']['sub_0']['mlp']['w_up']"],
                         (2, 16, 32))

    def test_refusals(self):
        cases = {('experts=2', 'topk=3'): 'topk=3 is more than experts=2',
                 ('experts=4', 'capacity=0.1'): 'gives experts no slot',
                 ('experts=4', 'moe_every=3', 'scan=1'):
                     'moe_every=3 to divide layers=2',
                 ('experts=-1',): 'expected an integer >= 0',
                 ('experts=4', 'capacity=x'): 'expected a positive number'}
        for extra, msg in cases.items():
            with self.subTest(extra=extra):
                r = run_cli('transformer', '--config', 'tiny', *extra)
                self.assertEqual(r.returncode, 2)
                self.assertIn(msg, r.stderr.decode())


if __name__ == '__main__':
    unittest.main()
