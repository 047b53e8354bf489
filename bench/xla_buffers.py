"""bench/xla_buffers.py - what XLA's buffer assignment holds, read from its
dumps: the live bytes at each step of XLA's own schedule, and how XLA's
total splits into arguments, live-out allocations and the temporary heap.

Not part of the product and never run by CI: it reads the dumps that
`XLA_FLAGS=--xla_dump_to=DIR python3 bench/xla_measure.py PROG.mlir` writes
on a GPU machine (the module_*.jit_train_step.*after_optimizations files:
the optimized, scheduled HLO, its -buffer-assignment.txt and
-buffer-assignment-values.txt).  Standard library only.

usage: python3 bench/xla_buffers.py DIR [N]
  prints XLA's total and its allocations by kind; the peak of the bytes
  live (each allocation's union of the byte ranges of the values live at a
  step, so a value sharing its operand's buffer is counted once) and the
  N largest values live there; the peak of the values XLA placed in its
  temporary heap against the heap's size (the difference is the packing's
  fragmentation); and arguments + live-out allocations + that heap peak.

Steps: the entry computation's instructions in their scheduled order, a
while's condition and body walked once where the while is (as HloLiveRange
flattens them); a value lives from the first step of any of its positions
to the last step of any of its uses or positions, an entry parameter from
step 0 to the end (the caller's buffer: XLA reuses a donated one's bytes
for its temporaries once it is dead, which the union counts once), the
entry root's values to the end."""
import collections
import glob
import re
import sys


def main():
    d = sys.argv[1]
    topn = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    files = glob.glob(d + '/module_*.jit_train_step.*after_optimizations.txt') or \
        glob.glob(d + '/module_*after_optimizations.txt')
    if not files:
        sys.exit('%s: no *after_optimizations.txt dump' % d)
    pre = files[0][:-4]

    # the computations' instructions in their order, opcodes, called computations
    comps, opcode, calls = {}, {}, {}
    cur = entry = None
    for ln in open(pre + '.txt'):
        ln = ln.rstrip('\n')
        m = re.match(r'^(ENTRY )?%(\S+) .*\{$', ln)
        if m:
            cur = m.group(2)
            comps[cur] = []
            if m.group(1):
                entry = cur
            continue
        if ln == '}':
            cur = None
            continue
        m = re.match(r'^\s+(?:ROOT )?%(\S+) = (.*)$', ln)
        if not (m and cur):
            continue
        name, rest = m.group(1), m.group(2)
        comps[cur].append(name)
        mo = re.search(r'[\]\}\)] ([a-z][a-z0-9\-_]*)\(', rest)
        opcode[name] = mo.group(1) if mo else '?'
        c = []
        if opcode[name] in ('while', 'call', 'conditional'):
            for k in ('condition', 'body', 'to_apply', 'true_computation', 'false_computation'):
                mm = re.search(k + r'=%([^,\s]+)', rest)
                if mm:
                    c.append(mm.group(1))
            mm = re.search(r'branch_computations=\{([^}]*)\}', rest)
            if mm:
                c += [x.strip().lstrip('%') for x in mm.group(1).split(',')]
        calls[name] = c
    ts, te = {}, {}
    t = [0]

    def walk(cn):
        for i in comps[cn]:
            ts[i] = t[0]
            for c in calls.get(i, []):
                walk(c)
            te[i] = t[0]
            t[0] += 1
    walk(entry)
    steps = t[0]

    allocs, vals = {}, {}
    a = None
    for ln in open(pre + '-buffer-assignment.txt'):
        m = re.match(r'^allocation (\d+): size (\d+), (.*)$', ln)
        if m:
            a = int(m.group(1))
            at = m.group(3)
            kind = ('argument' if 'parameter' in at else 'temp' if 'preallocated-temp' in at else
                    'thread-local' if 'thread-local' in at else 'constant' if 'constant' in at else
                    'live-out' if 'live-out' in at else 'other')
            allocs[a] = (int(m.group(2)), kind)
            continue
        m = re.match(r'^ value: <(\d+) (\S+) @0> \(size=(\d+),offset=(\d+)\): (.*)$', ln)
        if m:
            vals[int(m.group(1))] = dict(name=m.group(2), size=int(m.group(3)), off=int(m.group(4)), alloc=a,
                                        shape=m.group(5))
    info, vid, sect = {}, None, None
    for ln in open(pre + '-buffer-assignment-values.txt'):
        m = re.match(r'^<(\d+) ', ln)
        if m:
            vid = int(m.group(1))
            info[vid] = dict(pos=[], uses=[], frm=None)
            continue
        if ln.startswith(' positions:'):
            sect = 'pos'
        elif ln.startswith(' uses:'):
            sect = 'uses'
        elif ln.startswith(' from instruction:'):
            mm = re.match(r' from instruction: %(\S+) =', ln)
            info[vid]['frm'] = mm.group(1) if mm else None
            sect = None
        elif ln.startswith('  ') and vid is not None and sect:
            nm = ln.split()[0].rstrip(',')
            if nm != '(none)':
                info[vid][sect].append(nm)

    root = comps[entry][-1]
    iv = {}
    for v, x in vals.items():
        inf = info.get(v)
        if not inf or allocs[x['alloc']][1] in ('thread-local', 'constant'):
            continue
        pos = [p for p in inf['pos'] if p in ts]
        s = min([ts[p] for p in pos] + ([ts[inf['frm']]] if inf['frm'] in ts else []), default=0)
        e = max([te[u] for u in inf['uses'] if u in te] + [te[p] for p in pos] + [s])
        if opcode.get(inf['frm']) == 'parameter' and inf['frm'] in comps[entry]:
            s, e = 0, steps  # the caller's buffer, held all along
        if root in inf['pos']:
            e = steps
        iv[v] = (s, e)
    starts, ends = collections.defaultdict(list), collections.defaultdict(list)
    for v, (s, e) in iv.items():
        starts[s].append(v)
        ends[e].append(v)

    def used(lv):
        """bytes of each allocation kind covered by the values lv"""
        per = collections.defaultdict(list)
        for v in lv:
            per[vals[v]['alloc']].append((vals[v]['off'], vals[v]['off'] + vals[v]['size']))
        byk = collections.Counter()
        for al, rs in per.items():
            rs.sort()
            u, cs, ce = 0, None, None
            for r0, r1 in rs:
                if ce is None or r0 > ce:
                    if ce is not None:
                        u += ce - cs
                    cs, ce = r0, r1
                else:
                    ce = max(ce, r1)
            if ce is not None:
                u += ce - cs
            byk[allocs[al][1]] += u
        return byk

    kinds = collections.Counter()
    for size, kind in allocs.values():
        kinds[kind] += size
    total = sum(kinds.values())
    live, best, heap = set(), None, (0, 0)
    for step in range(steps + 1):
        live.update(starts.get(step, ()))
        byk = used(live)
        tot = sum(byk.values())
        if best is None or tot > best[0]:
            best = (tot, step, set(live), byk)
        if byk['temp'] > heap[0]:
            heap = (byk['temp'], step)
        live.difference_update(ends.get(step, ()))
    G = float(1 << 30)
    print('%s: XLA total %.3f GiB (%s)' % (d, total / G, ', '.join(
        '%s %.3f' % (k, kinds[k] / G) for k in sorted(kinds) if kinds[k] >= 1 << 20)))
    tot, step, lv, byk = best
    at = [i for i in ts if te[i] == step]
    print('bytes live at most %.3f GiB, step %d of %d (%s): %s; XLA total - live peak %.3f GiB (%.1f%%)' % (
        tot / G, step, steps, ', '.join(at[:2]), ', '.join('%s %.3f' % (k, byk[k] / G) for k in sorted(byk)),
        (total - tot) / G, 100.0 * (total - tot) / total))
    for v in sorted(lv, key=lambda v: -vals[v]['size'])[:topn]:
        x = vals[v]
        print('  %9.1f MiB %-9s %-40s %-12s %-48s live %d..%d' % (
            x['size'] / 2.0 ** 20, allocs[x['alloc']][1], x['name'][:40], opcode.get(info[v]['frm'], '?'),
            x['shape'][:48], iv[v][0], iv[v][1]))
    print('temporary heap: values live at most %.3f GiB (step %d) in a heap of %.3f: packing fragmentation '
          '%.3f GiB (%.1f%% of the total)' % (heap[0] / G, heap[1], kinds['temp'] / G, (kinds['temp'] - heap[0]) / G,
                                              100.0 * (kinds['temp'] - heap[0]) / total))
    print('arguments %.3f + live-out allocations %.3f (held from the start) + heap peak %.3f = %.3f GiB' % (
        kinds['argument'] / G, kinds['live-out'] / G, heap[0] / G,
        (kinds['argument'] + kinds['live-out'] + heap[0]) / G))


if __name__ == '__main__':
    main()
