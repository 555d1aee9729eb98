// `inferlab report --html` in a real browser (Debian's headless Chromium through playwright-core):
// the page loads with no network request, its charts are drawn, a screenshot is taken, and every
// number the page shows (each cell's data-key / data-value / text) equals `report --json`.
// `bench latency --html` likewise against its --csv. Skips when chromium is not installed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, statSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromiumPath, launchChromium } from '../chromium.mjs';

const CLI = process.env.INFERLAB_CLI;
const MODEL = process.env.INFERLAB_TEST_MODEL;  // for bench latency (optional)
const SHOTS = process.env.INFERLAB_SCREENSHOT_DIR;  // where screenshots go (docs/ when refreshed by hand)
const skip = chromiumPath() ? false : 'Debian chromium is not installed (scripts/setup installs it)';
const dir = mkdtempSync(join(tmpdir(), 'inferlab-report-html-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

// A seeded run of 80 requests: server timings on most, two failures, ITL lists.
function writeCsv(path) {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const rows = ['request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,tpot_ms,itl_ms,error,' +
                'server_queue_ms,server_prefill_ms,server_decode_ms,server_ttft_ms,cached_tokens,preemptions'];
  for (let i = 0; i < 80; i++) {
    const start = i * 40 + rand() * 30;
    if (i === 17 || i === 55) {
      rows.push(`r${i},${i === 17 ? 'timeout' : 'http_500'},${start.toFixed(3)},${(start + 900).toFixed(3)},128,,,,,"boom, it failed",,,,,,`);
      continue;
    }
    const queue = rand() * 30, prefill = 20 + rand() * 40, transport = 1 + rand() * 3;
    const out = 8 + Math.floor(rand() * 24);
    const itl = Array.from({ length: out - 1 }, () => 8 + rand() * 10 + (rand() < 0.03 ? 80 : 0));
    const ttft = queue + prefill + transport;
    const end = start + ttft + itl.reduce((a, b) => a + b, 0) + 1;
    const server = i % 5 === 0 ? ',,,,,' : `${queue.toFixed(3)},${prefill.toFixed(3)},${(end - start - ttft).toFixed(3)},${(queue + prefill).toFixed(3)},${i % 3 ? 16 : 0},0`;
    rows.push(`r${i},ok,${start.toFixed(3)},${end.toFixed(3)},128,${out},${ttft.toFixed(3)},,"${itl.map((v) => v.toFixed(3)).join(';')}",,${server}`);
  }
  writeFileSync(path, rows.join('\n') + '\n');
}

function lookup(json, key) {
  return key.split('.').reduce((v, part) => (v === undefined ? undefined : v[part]), json);
}

async function openPage(context, file, requests) {
  const page = await context.newPage();
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(pathToFileURL(file).href);
  return page;
}

function checkShown(cells, json) {
  assert.ok(cells.length > 0, 'no data-key cells on the page');
  for (const { key, value, text } of cells) {
    const expected = lookup(json, key);
    assert.notEqual(expected, undefined, `${key} is on the page but not in the JSON`);
    assert.equal(Number(value), expected, `${key}: data-value ${value} vs JSON ${expected}`);
    const decimals = text.includes('.') ? text.split('.')[1].length : 0;
    assert.ok(Math.abs(Number(text) - expected) <= 0.5 * 10 ** -decimals + 1e-9, `${key}: shown '${text}' vs ${expected}`);
  }
}

test('report --html: the numbers the browser shows equal report --json', { skip }, async () => {
  const csv = join(dir, 'requests.csv'), html = join(dir, 'report.html');
  writeCsv(csv);
  const json = JSON.parse(execFileSync(CLI, ['report', csv, '--slo', 'ttft_ms=60,e2e_ms=400', '--html', html, '--json'], { encoding: 'utf8' }));
  const source = readFileSync(html, 'utf8');
  assert.doesNotMatch(source, /<script|<link|<img|<iframe|@import|url\(|src=/i, 'the report must need no asset and no script');
  const { context, close } = await launchChromium();
  try {
    const requests = [];
    const page = await openPage(context, html, requests);
    assert.deepEqual(requests.filter((u) => !u.startsWith('file://')), [], 'the page asked for something beyond its own file');
    const cells = await page.$$eval('[data-key]', (els) => els.filter((e) => e.tagName === 'TD')
      .map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
    checkShown(cells, json);
    const keys = new Set(cells.map((c) => c.key));
    for (const k of ['requests', 'successful', 'failures.timeout', 'failures.http_500', 'window_s', 'output_throughput_token_per_s',
      'request_throughput_req_per_s', 'ttft_ms.p50', 'ttft_ms.p95', 'ttft_ms.p99', 'tpot_ms.mean', 'itl_ms.p95', 'e2e_ms.max',
      'ttft_split_ms.server_queue.p50', 'ttft_split_ms.transport.mean', 'prefix_cache.cached_tokens', 'goodput.req_per_s'])
      assert.ok(keys.has(k), `${k} not shown`);
    for (const [id, id2] of [['ttft_ms.p50', 'ttft_ms-p50'], ['goodput.req_per_s', 'goodput-req_per_s']])
      assert.equal(Number(await page.locator(`#${id2}`).getAttribute('data-value')), lookup(json, id));
    assert.equal(await page.locator('#percentile-method').getAttribute('data-value'), json.percentiles);
    // Every chart drawn, with marks that are on screen.
    for (const section of ['cdf', 'itl', 'throughput', 'timeline']) {
      const marks = await page.locator(`#${section} svg path, #${section} svg rect:not([width="100%"])`).count();
      assert.ok(marks > 0, `${section}: no marks drawn`);
      const box = await page.locator(`#${section} svg`).first().boundingBox();
      assert.ok(box && box.width > 300 && box.height > 150, `${section}: chart not laid out (${JSON.stringify(box)})`);
    }
    // 78 successful + 2 failed bars; four stage colours in the legend with server timings.
    assert.equal(await page.locator('#timeline svg rect[fill="#d62728"]').count(), 2);
    assert.match(await page.locator('#timeline .legend').textContent(), /queue \(server\).*prefill.*transport.*decode/);
    const shot = join(SHOTS || dir, 'report.png');
    if (SHOTS) mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: shot, fullPage: !SHOTS });
    assert.ok(statSync(shot).size > 10_000, 'screenshot too small to hold the page');
  } finally {
    await close();
  }
});

test('report --html: a CSV without server timings or ITL still gives every section', { skip }, async () => {
  const csv = join(dir, 'course.csv'), html = join(dir, 'course.html');
  writeFileSync(csv, 'request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n' +
    'r0,ok,0,400,128,20,92\nr1,ok,20,470,128,22,107\nr2,timeout,30,520,128,0,\n');
  const json = JSON.parse(execFileSync(CLI, ['report', csv, '--html', html, '--json'], { encoding: 'utf8' }));
  const { context, close } = await launchChromium();
  try {
    const page = await openPage(context, html, []);
    const cells = await page.$$eval('td[data-key]', (els) => els.map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
    checkShown(cells, json);
    assert.match(await page.locator('#itl').textContent(), /No inter-token gaps recorded/);
    assert.match(await page.locator('#timeline').textContent(), /no server timings/);
  } finally {
    await close();
  }
});

test('report --html: a multi-turn CSV gets the per-turn table, every number equal to report --json', { skip }, async () => {
  const csv = join(dir, 'turns.csv'), html = join(dir, 'turns.html');
  const rows = ['request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms,cached_tokens,conversation_id,turn'];
  let start = 0;
  for (let c = 0; c < 3; c++)
    for (let t = 0; t < 3; t++) {
      const prompt = 40 + 30 * t, cached = t === 0 ? 0 : 40 + 30 * (t - 1) - 2;
      rows.push(`c${c}t${t},ok,${start},${start + 300},${prompt},12,${(90 - 20 * t + c).toFixed(3)},${cached},c${c},${t}`);
      start += 310;
    }
  writeFileSync(csv, rows.join('\n') + '\n');
  const json = JSON.parse(execFileSync(CLI, ['report', csv, '--html', html, '--json'], { encoding: 'utf8' }));
  assert.equal(json.multi_turn.turns.length, 3);
  const { context, close } = await launchChromium();
  try {
    const page = await openPage(context, html, []);
    const cells = await page.$$eval('#turns td[data-key]', (els) => els.map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
    assert.equal(cells.length, 3 * 8, 'eight figures per turn');
    checkShown(cells, json);
    assert.match(await page.locator('#conversations').textContent(), /^3 conversations/);
    assert.equal(Number(await page.locator('[data-key="multi_turn.turns.2.prefix_cache.hit_rate"]').getAttribute('data-value')),
      json.multi_turn.turns[2].prefix_cache.hit_rate);
    assert.ok(json.multi_turn.turns[2].prefix_cache.hit_rate > 0.6);
  } finally {
    await close();
  }
});

test('report --html: an unwritable path is refused before anything is read', async () => {
  const csv = join(dir, 'one.csv');
  writeFileSync(csv, 'request_id,status,start_ms,end_ms,output_tokens\nr0,ok,0,10,1\n');
  assert.throws(() => execFileSync(CLI, ['report', csv, '--html', join(dir, 'missing', 'x.html')], { stdio: 'pipe' }),
    (e) => /--html .*cannot be written/.test(e.stderr.toString()));
});

test('bench latency --html: the page shows the --csv figures', { skip: skip || (!MODEL && 'no INFERLAB_TEST_MODEL') }, async () => {
  const csvPath = join(dir, 'latency.csv'), html = join(dir, 'latency.html');
  execFileSync(CLI, ['bench', 'latency', MODEL, '--lengths', '4,8,16', '--gen-len', '2', '--repeat', '1', '--threads', '1',
    '--csv', csvPath, '--html', html], { stdio: 'pipe' });
  const rows = readFileSync(csvPath, 'utf8').trim().split('\n').slice(1).map((l) => l.split(','));
  const { context, close } = await launchChromium();
  try {
    const page = await openPage(context, html, []);
    for (const [run, len, latency, prefill] of rows) {
      for (const [field, csvValue] of [['latency_s', latency], ['prefill_s', prefill]]) {
        const v = Number(await page.locator(`[data-key="run${run}.len${len}.${field}"]`).getAttribute('data-value'));
        assert.ok(Math.abs(v - Number(csvValue)) <= 5e-7, `run ${run} len ${len} ${field}: page ${v} vs csv ${csvValue}`);
      }
    }
    assert.equal(await page.locator('#latency svg circle[r="4.5"]').count(), 3);
    assert.ok(Number(await page.locator('[data-key="fit.slope"]').getAttribute('data-value')) !== 0);
  } finally {
    await close();
  }
});

test('bench capacity --html: the curve and every point figure equal capacity.json', { skip }, async () => {
  // The scripted single-server queue of tests/bench/sse_server.py: 60 ms per request, one at a time.
  const { spawn } = await import('node:child_process');
  const server = spawn('/usr/bin/python3', [join(import.meta.dirname, 'sse_server.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise((resolve, reject) => {
      let text = '';
      server.stdout.on('data', (d) => {
        text += d;
        const m = /^PORT (\d+)\n/.exec(text);
        if (m) resolve(Number(m[1]));
      });
      server.once('exit', () => reject(new Error(`the scripted server did not start: ${text}`)));
    });
    const out = join(dir, 'capacity'), html = join(dir, 'capacity.html');
    const json = JSON.parse(execFileSync(CLI, ['bench', 'capacity', '--base-url', `http://127.0.0.1:${port}/queue-60`,
      '--concurrency-levels', '1:8', '--slo', 'ttft_p50_ms=270,tpot_p95_ms=50', '--num-requests', '8', '--repeat', '2',
      '--seed', '3', '--output-dir', out, '--html', html, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
    const { context, close } = await launchChromium();
    try {
      const requests = [];
      const page = await openPage(context, html, requests);
      assert.deepEqual(requests.filter((u) => !u.startsWith('file://')), []);
      const cells = await page.$$eval('[data-key]', (els) => els.map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
      let numbers = 0;
      for (const { key, value, text } of cells) {
        const expected = lookup(json, key);
        assert.notEqual(expected, undefined, `${key} not in capacity.json`);
        if (expected === null) assert.equal(text, '—', key);
        else if (typeof expected === 'string') assert.equal(value, expected, key);
        else { assert.equal(Number(value), expected, key); numbers++; }
      }
      const keys = new Set(cells.map((c) => c.key));
      for (const k of ['capacity', 'first_failing', 'knee', 'outcome', 'points.0.load', 'points.0.objectives.ttft_p50_ms.ci_high',
        'points.0.metrics.goodput.median'])
        assert.ok(keys.has(k), `${k} not shown`);
      assert.equal(numbers > json.points.length * 6, true, `only ${numbers} numbers shown`);
      assert.equal(Number(await page.locator('#capacity').getAttribute('data-value')), json.capacity);
      const box = await page.locator('#capacity-curve svg').first().boundingBox();
      assert.ok(box && box.height > 300, 'the capacity curve is not drawn');
    } finally {
      await close();
    }
  } finally {
    server.kill();
  }
});

// The scripted server of tests/bench/sse_server.py, started for one test; resolves its base URL.
async function scriptedServer() {
  const { spawn } = await import('node:child_process');
  const server = spawn('/usr/bin/python3', [join(import.meta.dirname, 'sse_server.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    let text = '';
    server.stdout.on('data', (d) => {
      text += d;
      const m = /^PORT (\d+)\n/.exec(text);
      if (m) resolve(Number(m[1]));
    });
    server.once('exit', () => reject(new Error(`the scripted server did not start: ${text}`)));
  });
  return { url: `http://127.0.0.1:${port}`, kill: () => server.kill() };
}

// Every data-key cell equals the JSON: numbers by value and shown digits, null as '—', booleans and strings as written.
function checkCells(cells, json) {
  let numbers = 0;
  for (const { key, value, text } of cells) {
    const expected = lookup(json, key);
    assert.notEqual(expected, undefined, `${key} is on the page but not in the JSON`);
    if (expected === null) assert.equal(text, '—', key);
    else if (typeof expected !== 'number') assert.equal(value, JSON.stringify(expected).replace(/^"|"$/g, ''), key);
    else {
      assert.equal(Number(value), expected, `${key}: data-value ${value} vs JSON ${expected}`);
      const decimals = text.includes('.') ? text.split('.')[1].length : 0;
      assert.ok(Math.abs(Number(text) - expected) <= 0.5 * 10 ** -decimals + 1e-9, `${key}: shown '${text}' vs ${expected}`);
      numbers++;
    }
  }
  return numbers;
}

test('bench serve --html: the server and machine series drawn over the run, its numbers equal the summary', { skip }, async () => {
  const server = await scriptedServer();
  try {
    const csv = join(dir, 'series.csv'), html = join(dir, 'series.html'), summary = join(dir, 'series.json');
    execFileSync(CLI, ['bench', 'serve', '--base-url', `${server.url}/sched`, '--num-requests', '4', '--concurrency', '2',
      '--input-len', '8', '--output-len', '10', '--scrape-interval', '100ms', '--output', csv, '--summary', summary, '--html', html],
    { stdio: 'pipe' });
    const json = JSON.parse(readFileSync(summary, 'utf8'));
    const fromCsv = JSON.parse(execFileSync(CLI, ['report', csv, '--json'], { encoding: 'utf8' }));
    const { file: _a, ...ours } = json.server_series, { file: _b, ...theirs } = fromCsv.server_series;
    assert.deepEqual(theirs, ours, 'report --json of the CSV and its series gives the run\'s series summary');
    const { context, close } = await launchChromium();
    try {
      const requests = [];
      const page = await openPage(context, html, requests);
      assert.deepEqual(requests.filter((u) => !u.startsWith('file://')), []);
      const cells = await page.$$eval('#series td[data-key]', (els) => els.map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
      assert.ok(checkCells(cells, json) >= 15, 'the series numbers shown');
      const keys = new Set(cells.map((c) => c.key));
      for (const k of ['server_series.scrapes', 'server_series.roles.running.mean', 'server_series.roles.waiting.max',
        'server_series.roles.kv_cache_usage.mean', 'server_series.roles.generation_tokens.mean_rate_per_s',
        'server_series.histograms.0.p95', 'server_series.host.cpu_utilization.mean'])
        assert.ok(keys.has(k), `${k} not shown`);
      // Each curve drawn, on charts laid out like the throughput chart above them.
      for (const cls of ['series-generation', 'series-running', 'series-waiting', 'series-kv', 'series-cpu']) {
        const d = await page.locator(`#series path.${cls}`).getAttribute('d');
        assert.ok(d && d.split(/[LHV]/).length > 5, `${cls}: no curve drawn (${d})`);
      }
      const box = await page.locator('#series svg').first().boundingBox();
      assert.ok(box && box.width > 300 && box.height > 150, 'series chart laid out');
    } finally {
      await close();
    }
  } finally {
    server.kill();
  }
});

test('bench sweep --html: the Pareto plot and every point figure equal bench sweep --json', { skip: skip || (!MODEL && 'no INFERLAB_TEST_MODEL') }, async () => {
  const out = join(dir, 'sweep'), html = join(dir, 'sweep.html');
  const json = JSON.parse(execFileSync(CLI, ['bench', 'sweep', MODEL, '--serve-args', '--max-batch 1 --threads 1',
    '--serve-args', '--max-batch 4 --threads 1', '--concurrency', '1,3', '--bench-args', '--num-requests 3 --input-len 8 --output-len 4 --ignore-eos',
    '--output-dir', out, '--html', html, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 }));
  assert.equal(json.points.length, 4);
  const { context, close } = await launchChromium();
  try {
    const requests = [];
    const page = await openPage(context, html, requests);
    assert.deepEqual(requests.filter((u) => !u.startsWith('file://')), []);
    const cells = await page.$$eval('#sweep td[data-key]', (els) => els.map((e) => ({ key: e.dataset.key, value: e.dataset.value, text: e.textContent.trim() })));
    assert.ok(checkCells(cells, json) >= 4 * 10, 'every point\'s figures shown');
    for (let i = 0; i < 4; i++)
      for (const k of ['figures.output_throughput_token_per_s', 'figures.tokens_per_user_per_s', 'figures.ttft_ms.p50', 'pareto', 'load.value'])
        assert.ok(cells.some((c) => c.key === `points.${i}.${k}`), `points.${i}.${k} not shown`);
    const frontier = json.points.filter((p) => p.pareto).length;
    assert.ok(frontier >= 1, 'a frontier');
    assert.equal(await page.locator('#sweep svg circle').count(), 4);
    assert.equal(await page.locator('#sweep svg circle[data-frontier="true"]').count(), frontier);
    if (frontier > 1) assert.equal(await page.locator('#sweep svg path[stroke="#d62728"]').count(), 1);
  } finally {
    await close();
  }
});
