"""`autopart check` catches planted lowering bugs (scripts/check-mutants).

Seeded random partitionings of the zoo's tiny transformers, lowered by
`autopart apply`, with one bug planted in the SPMD text (a dropped or
doubled all_reduce, max for add, a wrong shard, another axis's replica
groups, a local tile for an all_gather, a slice moved by one, a bf16 sum;
see the script) and judged by `autopart check --spmd`:

- f32 (the tiny transformer, batch 4): every mutant of every kind that
  changes the exact answer (its f64 form fails the check) is caught, and
  the unmutated programs pass;
- bf16 activations with f32 parameters, and f16: mutants the check missed
  when its noise run rounded every op at random (dde2e72; the noise of
  grads['embed'] 0.13-0.21 against a dropped all_reduce's 0.05-0.08) and
  catches now that only sums and the ops carrying them are (errors above
  bf16's 0.05, and 4x the noise, which is at most 0.035 there).

    AUTOPART=PATH   the autopart CLI (default: build/bin/autopart)
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')
AUTOPART = os.environ.get('AUTOPART') or os.path.join(ROOT, 'build', 'bin', 'autopart')
SCRIPT = os.path.join(ROOT, 'scripts', 'check-mutants')

MODELS = {
    't_base': 'dtype=f32 batch=4',
    't_mixed': 'dtype=bf16 param_dtype=f32 batch=4',
    't_f16': 'dtype=f16 pos=learned bias=1 batch=6 names=1',
}


class CheckMutants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        for name, knobs in MODELS.items():
            subprocess.run([sys.executable, os.path.join(HERE, 'modelgen'), 'transformer', '--config', 'tiny'] +
                           knobs.split() + ['-q', '-o', cls.path(name)], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name + '.mlir')

    def mutants(self, name, mesh, seeds, cases=(), per_kind=2):
        out = os.path.join(self.tmp.name, 'out-%s-%s-%s' % (name, mesh, seeds))
        argv = [sys.executable, SCRIPT, '--ap', AUTOPART, '--out', out, '--model', self.path(name), '--mesh', mesh,
                '--seeds', seeds, '--per-kind', str(per_kind), '--f64', '--expect-caught']
        for c in cases:
            argv += ['--case', c]
        p = subprocess.run(argv, capture_output=True, text=True)
        rows = open(os.path.join(out, 'rows.jsonl')).read().count('"kind": ') if os.path.exists(out) else 0
        return p, rows

    def test_f32_every_kind(self):
        # seeds 8 and 16: states with sites for every kind but offset_table
        for seeds in ('8:9', '16:17'):
            p, rows = self.mutants('t_base', 'a=2,b=2', seeds)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertGreaterEqual(rows, 15, 'too few mutants planted')

    def test_low_precision_within_noise_of_every_op(self):
        for name, mesh, seed, case in (('t_mixed', 'a=4', 11, 'drop_ar:0'), ('t_mixed', 'a=4', 14, 'drop_ar:1'),
                                       ('t_mixed', 'a=2,b=2', 14, 'double_ar:1'),
                                       ('t_f16', 'a=2,b=2', 37, 'double_ar:1')):
            p, rows = self.mutants(name, mesh, '%d:%d' % (seed, seed + 1), ['%d:%s' % (seed, case)])
            self.assertEqual(p.returncode, 0, '%s %s seed %d %s: %s' % (name, mesh, seed, case, p.stdout + p.stderr))
            self.assertEqual(rows, 2, 'the state and its one mutant')


if __name__ == '__main__':
    unittest.main()
