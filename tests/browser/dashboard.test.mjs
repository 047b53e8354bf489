// dashboard.test.mjs - autopartd's dashboard end to end in headless Chromium
// (Debian's chromium, driven by playwright-core): a daemon on loopback with
// a temporary store, a real search through the CLI, and the page watching
// it: the row appears while running, its curve grows, its schedule shows,
// the finished page has its shardings and downloads; filters work; a page
// that throws fails the test.  Screenshots go to $ARTIFACTS.
//
// Run by ctest (tests/CMakeLists.txt) with AUTOPARTD, AUTOPART_CLI,
// MODELGEN, ARTIFACTS and PLAYWRIGHT_CHROMIUM (default /usr/bin/chromium);
// with PGCLUSTER (tests/service/pgcluster) the store is a PostgreSQL server
// of the test's own instead of an SQLite file.  The test's temporary
// directory (models, store, the PostgreSQL server and its log) is removed
// when every test passed, kept and named when one failed.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, mkdirSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  throw new Error('playwright-core is missing: run scripts/setup --test (it runs `npm ci` in tests/browser)');
}

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (ctest sets it)`);
  return v;
};
const AUTOPARTD = env('AUTOPARTD');
const CLI = env('AUTOPART_CLI');
const MODELGEN = env('MODELGEN');
const ARTIFACTS = env('ARTIFACTS');
const CHROMIUM = process.env.PLAYWRIGHT_CHROMIUM || '/usr/bin/chromium';
const PGCLUSTER = process.env.PGCLUSTER;
let pgDir, storeAddr;

let dir, daemon, grpcPort, httpPort, base, browser, t32, small;
let errors = [];   // page errors and console errors of the current test
let ready = false, failed = false;   // before() done; a test or a check failed

// A test that, when it fails, keeps the test's directory for a look.
const check = (name, fn) => test(name, async (t) => {
  try {
    await fn(t);
  } catch (e) {
    failed = true;
    throw e;
  }
});

// Starts autopartd and reads its two lines (the gRPC and the dashboard port).
function startDaemon(db, extra = []) {
  return new Promise((resolve, reject) => {
    const d = spawn(AUTOPARTD, ['--listen', '127.0.0.1:0', '--http', '127.0.0.1:0', '--db', db, '--grace', '2', '--quiet', ...extra],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: d.stdout });
    let g = 0;
    const timer = setTimeout(() => reject(new Error('autopartd did not start within 60 s')), 60000);
    d.on('exit', (code) => reject(new Error(`autopartd exited ${code} before serving`)));
    lines.on('line', (l) => {
      let m = /listening on .* port (\d+)/.exec(l);
      if (m) g = Number(m[1]);
      m = /dashboard \(http\) on .* port (\d+)/.exec(l);
      if (m) {
        clearTimeout(timer);
        d.removeAllListeners('exit');
        resolve({ d, grpc: g, http: Number(m[1]) });
      }
    });
  });
}

// `autopart search` through the daemon, in the background; resolves with
// its exit code and output.
function search(model, mesh, extra) {
  const args = ['search', model, '--mesh', mesh, '--axes', 'model', '--manual',
    "manual batch batch['inputs']=0 batch['targets']=0", '--device', 'tpu_v3', '--server', `127.0.0.1:${grpcPort}`, ...extra];
  const p = spawn(CLI, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (b) => { out += b; });
  p.stderr.on('data', (b) => { out += b; });
  return new Promise((resolve) => p.on('exit', (code) => resolve({ code, out })));
}

async function newPage() {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  page.on('pageerror', (e) => errors.push('page error: ' + e.message));
  page.on('console', (m) => {
    // A 404 or 401 the page handles (an unknown search; a token to ask
    // for) is the network's message, not the page's error; anything else
    // counts, a 500 included.
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 40[14] /.test(m.text()))
      errors.push('console error: ' + m.text());
  });
  return page;
}

// The list's models (file names), in the order shown.
const listed = (page) =>
  page.locator('#rows tr td.model').evaluateAll((tds) => tds.map((td) => td.title.replace(/^.*\//, '')));

// Waits until the list shows exactly these models in this order (what a
// test asserts, not a row count the old order also has); on a timeout says
// what it shows instead.
async function waitForList(page, want, timeout = 30000) {
  try {
    await page.waitForFunction((w) => {
      const got = [...document.querySelectorAll('#rows tr td.model')].map((td) => td.title.replace(/^.*\//, ''));
      return got.length === w.length && got.every((m, i) => m === w[i]);
    }, want, { timeout });
  } catch (e) {
    throw new Error(`the list shows [${(await listed(page)).join(', ')}], not [${want.join(', ')}], after ${timeout / 1000} s`);
  }
}

const shot = (page, name, fullPage) => page.screenshot({ path: join(ARTIFACTS, name), fullPage: !!fullPage });

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), 'autopart-dash-'));
  t32 = join(dir, 't32.mlir');
  // a long path, as a user's models have: the list must still fit the window
  mkdirSync(join(dir, 'exported-from-jax-by-the-training-team-nightly-2024-11-26'));
  small = join(dir, 'exported-from-jax-by-the-training-team-nightly-2024-11-26', 'transformer_small_train_step.mlir');
  execFileSync(MODELGEN, ['transformer', '--config', 't32', '-q', '-o', t32]);
  execFileSync(MODELGEN, ['transformer', '--config', 'small', '-q', '-o', small]);
  let db = join(dir, 'store.db');
  if (PGCLUSTER) {
    // run as root, the server runs as `postgres` (pgcluster): it must be
    // able to pass through to its own directory
    chmodSync(dir, 0o711);
    pgDir = join(dir, 'pg');
    mkdirSync(pgDir);
    db = execFileSync(PGCLUSTER, ['start', pgDir]).toString().trim();
  }
  storeAddr = db;
  const s = await startDaemon(db);
  daemon = s.d;
  grpcPort = s.grpc;
  httpPort = s.http;
  base = `http://127.0.0.1:${httpPort}/`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  ready = true;
});

after(async () => {
  if (browser) await browser.close();
  let code = 0;
  if (daemon) {
    const done = new Promise((resolve) => daemon.on('exit', (code, sig) => resolve({ code, sig })));
    daemon.kill('SIGTERM');
    ({ code } = await done);
  }
  const keep = !ready || failed || code !== 0;
  if (pgDir) {
    try {
      execFileSync(PGCLUSTER, [keep ? 'kill' : 'destroy', pgDir]);
    } catch (e) {
      console.error(`pgcluster ${keep ? 'kill' : 'destroy'} ${pgDir}: ${e.message}`);
    }
  }
  if (dir && keep)
    console.error(`the test's directory is kept: ${dir}` + (pgDir ? ` (the PostgreSQL server's log: ${pgDir}/log)` : ''));
  else if (dir)
    rmSync(dir, { recursive: true, force: true });
  assert.equal(code, 0, 'autopartd exits 0 after SIGTERM');
});

afterEach(() => {
  const e = errors;
  errors = [];
  if (e.length) failed = true;
  assert.deepEqual(e, [], 'the page threw or logged errors');
});

check('a running search appears in the list, its curve grows, its schedule shows, then its result', async () => {
  // Seconds of searching whatever the build (ASan too): a time budget.
  const run = search(t32, 'batch=8,model=4', ['--episodes', '10000000', '--time-limit', '14']);
  const page = await newPage();
  await page.goto(base);
  const row = page.locator('#rows tr[data-status="running"]');
  await row.first().waitFor({ timeout: 60000 });
  assert.match(await row.first().innerText(), /t32\.mlir/);
  await shot(page, '1-list-running.png');
  // A press and a release on the row open it, even when the list is rebuilt
  // between the two (it is, every 2 s: the browser drops a click whose row
  // was replaced, and a user's click takes about 100 ms): the press, then a
  // rebuild (the row under the pointer marked after the press, gone from
  // the page), then the release.
  const at = await page.evaluate(() => {
    const r = document.querySelector('#rows tr[data-status="running"]').getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  });
  await page.mouse.move(at.x, at.y);
  await page.mouse.down();
  await page.evaluate(({ x, y }) => { document.elementFromPoint(x, y).closest('tr').dataset.pressed = '1'; }, at);
  await page.waitForFunction(() => !document.querySelector('#rows tr[data-pressed]'), null, { timeout: 30000 });
  await page.mouse.up();
  await page.waitForURL(/#\/search\/\d+$/, { timeout: 30000 });

  // The curve over time grows while the search runs (a point every 2 s).
  const points = async () => Number((await page.locator('#plot-time').getAttribute('data-points')) || 0);
  await page.waitForFunction(() => Number(document.querySelector('#plot-time')?.getAttribute('data-points')) >= 1, null, { timeout: 30000 });
  const first = await points();
  await page.waitForFunction((n) => Number(document.querySelector('#plot-time')?.getAttribute('data-points')) > n
    && document.querySelector('#summary .badge')?.textContent === 'running', first, { timeout: 30000 });
  assert.ok((await points()) > first, 'the curve grew');
  await page.waitForFunction(() => /tile /.test(document.querySelector('#schedule')?.textContent || ''), null, { timeout: 30000 });
  assert.equal(await page.locator('#summary .badge').innerText(), 'running');
  await shot(page, '2-search-running.png');

  // It ends: the winning schedule, the grid of shardings, the charts.
  const r = await run;
  assert.equal(r.code, 0, r.out);
  await page.locator('#shard-grid').waitFor({ timeout: 30000 });
  assert.equal(await page.locator('#summary .badge').innerText(), 'done');
  const sched = await page.locator('#schedule').innerText();
  assert.match(sched, /tile batch\['inputs'\] 0 batch/);
  assert.ok(await page.locator('#shard-grid td[data-split]').count() > 10, 'a grid of layers x parameters');
  assert.ok(await page.locator('#collectives tbody tr').count() === 5);
  assert.ok(await page.locator('#time-breakdown rect').count() >= 3);
  // memory at the peak by category (parameters, optimizer state, ...) and where
  assert.ok(await page.locator('#memory-breakdown rect').count() >= 4, 'memory by category');
  assert.match(await page.locator('#memory-at').innerText(), /^at stablehlo\.\S+ at \d+:\d+/);
  // which framework counted it: XLA's buffer assignment unless asked otherwise
  assert.match(await page.locator('#memory-framework').innerText(), /^counted as XLA buffer assignment/);
  assert.match(await page.locator('#explanation-start').innerText(), /; memory counted as XLA buffer assignment/);
  assert.ok(await page.locator('#explanation details').count() >= 1);
  // the curve over episodes drops where the best was found (a point there)
  const id = page.url().match(/search\/(\d+)$/)[1];
  const best = (await (await page.request.get(`${base}api/searches/${id}`)).json()).result.search.best_episode;
  const dots = await page.locator('#plot-episodes circle title').evaluateAll((ts) => ts.map((t) => t.textContent));
  assert.ok(dots.some((t) => t.startsWith(`${best}: `)), `no point at episode ${best}: ${dots.join(' | ')}`);
  await shot(page, '3-search-done.png');
  await shot(page, '4-search-done-full.png', true);

  // The schedule downloads as the API serves it.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#dl-schedule')]);
  const text = readFileSync(await dl.path(), 'utf8');
  assert.equal(text.trim(), sched.trim());
  await page.close();
});

check('filters: free text, status, and sorting narrow the list', async () => {
  const r = await search(small, 'batch=4,model=2', ['--episodes', '200']);
  assert.equal(r.code, 0, r.out);
  const page = await newPage();
  await page.goto(base);
  await page.waitForFunction(() => document.querySelectorAll('#rows tr').length >= 2, null, { timeout: 30000 });
  // no wider than the window (1400 px), the long path included (in the tooltip)
  const [wide, win] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(wide <= win, `the list is ${wide} px wide in a ${win} px window`);
  assert.match(await page.locator('#rows tr td.model').first().getAttribute('title'), /exported-from-jax.*small_train_step\.mlir/);
  await page.fill('input[name=q]', 'small_train_step.mlir');
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#rows tr')];
    return rows.length === 1 && /small_train_step\.mlir/.test(rows[0].textContent);
  }, null, { timeout: 10000 });
  await shot(page, '5-filter-text.png');
  await page.fill('input[name=q]', '');
  await page.selectOption('select[name=status]', 'failed');
  await page.waitForFunction(() => document.querySelectorAll('#rows tr').length === 0
    && /No searches match/.test(document.querySelector('#list-msg').textContent), null, { timeout: 10000 });
  await page.selectOption('select[name=status]', 'done');
  // Answers can come back out of order (a filter changed while the last
  // query is on its way; the 2 s refresh): one older than the answer shown
  // is dropped.  The first query by step time, descending, is held back
  // until the ascending one asked after it is shown, and every order the
  // list shows is recorded.
  const lists = (u) => u.pathname === '/api/searches';
  const seen = [];
  let heldRequest = null, releaseHeld;
  const heldBack = new Promise((r) => { releaseHeld = r; });
  await page.route(lists, async (route) => {
    const q = new URL(route.request().url()).searchParams;
    seen.push(q.toString());
    if (heldRequest || q.get('sort') !== 'runtime' || q.get('order')) return route.continue();
    heldRequest = route.request();
    await heldBack;
    await route.continue();
  });
  await page.evaluate(() => {
    const rows = document.getElementById('rows');
    window.shownOrders = [];
    new MutationObserver(() => window.shownOrders.push(
      [...rows.querySelectorAll('td.model')].map((td) => td.title.replace(/^.*\//, '')).join(', ')))
      .observe(rows, { childList: true });
  });
  await page.selectOption('select[name=sort]', 'runtime');
  await page.selectOption('select[name=order]', 'asc');
  // the small model's step time is far below t32's: first when ascending,
  // last when descending (newest first, the default, has it first too)
  const smallName = 'transformer_small_train_step.mlir';
  await waitForList(page, [smallName, 't32.mlir']);
  // the default order (newest first) shows the same two names as ascending,
  // and a refresh's descending answer may come between the two: look only
  // from the ascending answer just shown on
  const shownAsc = await page.evaluate(() => window.shownOrders.length);
  assert.ok(heldRequest, `no query by step time, descending: ${seen.join(' | ')}`);
  releaseHeld();
  assert.ok(await heldRequest.response(), 'the held query failed');
  // two more rebuilds once it came: its answer's (dropped, or not), and the
  // 2 s refreshes'
  const n = await page.evaluate(() => window.shownOrders.length);
  await page.waitForFunction((k) => window.shownOrders.length > k + 1, n, { timeout: 30000 });
  const orders = await page.evaluate(() => window.shownOrders);
  const ascAt = orders.lastIndexOf(`${smallName}, t32.mlir`, shownAsc - 1);
  assert.ok(!orders.slice(ascAt).includes(`t32.mlir, ${smallName}`),
    `the list went back to an older query's answer: ${orders.join(' | ')}`);
  await page.unroute(lists);
  await shot(page, '6-filter-status-sort.png');
  await page.selectOption('select[name=order]', '');
  await waitForList(page, ['t32.mlir', smallName]);
  await page.close();
});

check('a search counted as eager PyTorch says so on its page', async () => {
  const r = await search(small, 'batch=4,model=2', ['--episodes', '50', '--framework', 'pytorch-eager']);
  assert.equal(r.code, 0, r.out);
  const id = /search (\d+) at /.exec(r.out)[1];
  const page = await newPage();
  await page.goto(`${base}#/search/${id}`);
  await page.locator('#memory-framework').waitFor({ timeout: 30000 });
  assert.match(await page.locator('#memory-framework').innerText(), /^counted as PyTorch eager/);
  assert.match(await page.locator('#explanation-start').innerText(), /; memory counted as PyTorch eager/);
  const res = (await (await page.request.get(`${base}api/searches/${id}`)).json()).result;
  assert.equal(res.explanation.memory.framework, 'pytorch_eager');
  assert.match(res.explanation_text, /memory: peak \S+ \S+ \(counted as PyTorch eager\)/);
  await page.close();
});

check('a search under a memory limit holds its fit to that limit, and names it', async () => {
  // tpu_v3 has 16 GiB; the small model's peak is far above 1 KiB (the page
  // once compared the peak with the HBM alone, whatever the limit)
  const r = await search(small, 'batch=4,model=2', ['--episodes', '20', '--memory-limit', '1KiB']);
  assert.equal(r.code, 0, r.out);
  const id = /search (\d+) at /.exec(r.out)[1];
  const page = await newPage();
  await page.goto(`${base}#/search/${id}`);
  await page.locator('#memory-limit').waitFor({ timeout: 30000 });
  // far over the limit: a factor, not "4587901.6% used"; the HBM as the CLI
  // writes it (16.00 GiB, not 16.0 GiB)
  const res = (await (await page.request.get(`${base}api/searches/${id}`)).json()).result;
  const times = Math.round(res.cost.peak_memory_bytes / 1024);
  assert.ok(times >= 1000, `the small model's peak is only ${res.cost.peak_memory_bytes} bytes`);
  assert.equal(await page.locator('#memory-limit').innerText(),
    `of the 1.00 KiB memory limit (${times.toLocaleString('en-US')}× the limit); 16.00 GiB on the device`);
  assert.match(await page.locator('#memory-limit').innerText(), /\(\d{1,3}(,\d{3})+× the limit\)/);
  assert.match(await page.locator('#time-fit').innerText(), /; does NOT fit the 1\.00 KiB memory limit$/);
  // the page's figures read as the CLI's answer wrote them
  const cliTime = /^step time +(\S+ \S+) /m.exec(r.out)[1], cliPeak = /^peak memory +(\S+ \S+) per device/m.exec(r.out)[1];
  const summary = await page.locator('#summary dl').evaluate((dl) => Object.fromEntries(
    [...dl.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(summary['best step time'], cliTime, r.out);
  assert.equal(summary['best peak memory'], cliPeak, r.out);
  // and the step's parts (compute, communication hidden and exposed: us and ms)
  const parts = /^step time .*\(compute (\S+ \S+), communication \S+ \S+: (\S+ \S+) hidden under compute, (\S+ \S+) exposed\)/m.exec(r.out);
  assert.ok(parts, r.out);
  const bars = await page.locator('#time-breakdown').evaluate((svg) => {
    const t = [...svg.querySelectorAll('text')].map((x) => x.textContent);
    return Object.fromEntries(t.filter((_, i) => i % 2 === 0).map((label, i) => [label, t[2 * i + 1]]));
  });
  assert.deepEqual([bars['compute'], bars['communication hidden under compute'], bars['communication exposed']],
    parts.slice(1, 4), r.out);
  await page.close();
});

check('a peak within ten times a capacity reads as a share of it', async () => {
  // the small model's peak (about 45 MiB) against a 30 MiB limit: 150% and
  // some, written as a percentage with one decimal
  const r = await search(small, 'batch=4,model=2', ['--episodes', '20', '--memory-limit', '30MiB']);
  assert.equal(r.code, 0, r.out);
  const id = /search (\d+) at /.exec(r.out)[1];
  const page = await newPage();
  await page.goto(`${base}#/search/${id}`);
  await page.locator('#memory-limit').waitFor({ timeout: 30000 });
  const res = (await (await page.request.get(`${base}api/searches/${id}`)).json()).result;
  const share = (100 * res.cost.peak_memory_bytes / (30 * 1024 * 1024)).toFixed(1);
  assert.ok(Number(share) > 100 && Number(share) < 1000, `share ${share}%`);
  assert.equal(await page.locator('#memory-limit').innerText(),
    `of the 30.00 MiB memory limit (${share}% used); 16.00 GiB on the device`);
  await page.close();
});

check('an unknown search says so', async () => {
  const page = await newPage();
  await page.goto(base + '#/search/999999');
  await page.locator('#search-error').waitFor({ timeout: 10000 });
  assert.match(await page.locator('#search-error').innerText(), /no search 999999/);
  await page.close();
});

check('a page that throws is caught (the check every test ends with can fail)', async () => {
  const page = await newPage();
  await page.goto(base);
  await page.evaluate(() => setTimeout(() => { throw new Error('deliberate'); }, 0));
  await page.waitForTimeout(300);
  assert.equal(errors.length, 1);
  assert.match(errors[0], /deliberate/);
  errors = [];   // seen: this test's own error
  await page.close();
});

check('with --token-file: the page takes ?token= once (and drops it from the address), or asks for it', async () => {
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'dash-s3cret\n');
  // the same store, so the rows of the tests above are there
  const s = await startDaemon(storeAddr, ['--token-file', tokenFile]);
  try {
    const tbase = `http://127.0.0.1:${s.http}/`;
    let page = await newPage();
    await page.goto(tbase + '?token=dash-s3cret');
    await page.waitForFunction(() => document.querySelectorAll('#rows tr').length >= 2, null, { timeout: 20000 });
    assert.ok(!page.url().includes('token'), 'the token left the address bar: ' + page.url());
    await page.close();
    // a fresh session: the page asks (a prompt), then lists
    page = await newPage();
    const asked = [];
    page.on('dialog', (d) => { asked.push(d.message()); d.accept('dash-s3cret'); });
    await page.goto(tbase);
    await page.waitForFunction(() => document.querySelectorAll('#rows tr').length >= 2, null, { timeout: 20000 });
    assert.equal(asked.length, 1);
    assert.match(asked[0], /token/);
    await page.close();
  } finally {
    const done = new Promise((resolve) => s.d.on('exit', (code) => resolve(code)));
    s.d.kill('SIGTERM');
    assert.equal(await done, 0);
  }
});
