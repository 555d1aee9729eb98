// Shared by the server end-to-end tests: start `inferlab serve` on a free port, read /metrics, parse SSE.
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import path from 'node:path';

export const CLI = process.env.INFERLAB_CLI;
export const MODEL = process.env.INFERLAB_TEST_MODEL;
if (!CLI || !MODEL) throw new Error('set INFERLAB_CLI and INFERLAB_TEST_MODEL (CTest does)');

const started = new Set();
process.on('exit', () => {
  for (const child of started) child.kill('SIGKILL');
});

// Starts the server (port 0: the OS picks) and resolves once /health says 200.
export async function startServer(extraArgs = [], { model = MODEL } = {}) {
  const args = ['serve', model, '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...extraArgs];
  const child = spawn(CLI, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  started.add(child);
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 120_000;
  let port = null;
  while (Date.now() < deadline) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
    if (m) port = Number(m[1]);
    if (child.exitCode !== null) throw new Error(`inferlab serve exited early (${child.exitCode}):\n${log}`);
    if (port) {
      try {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        if (r.status === 200) break;
      } catch {}
    }
    await sleep(100);
  }
  if (!port) throw new Error(`inferlab serve did not start:\n${log}`);
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    port,
    child,
    exited,
    log: () => log,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const result = await exited;
      clearTimeout(timer);
      started.delete(child);
      return result;
    },
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function postJson(base, route, body, init = {}) {
  const r = await fetch(base + route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, headers: r.headers, text, json };
}

// Prometheus text -> { 'name{labels}': value }
export async function metrics(base) {
  const text = await (await fetch(base + '/metrics')).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

// `data: ...` events of an SSE body, in order (comments dropped).
export function sseEvents(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const lines = block.split('\n').filter((l) => !l.startsWith(':'));
    if (!lines.length) continue;
    for (const l of lines) if (!l.startsWith('data: ')) throw new Error(`not an SSE data line: ${JSON.stringify(l)}`);
    events.push(lines.map((l) => l.slice(6)).join('\n'));
  }
  return events;
}

// Greedy tokens from the engine's own CLI (`inferlab generate`), for comparison with HTTP.
// Asynchronous on purpose: a blocked event loop cannot see the server close an idle keep-alive
// connection (after 5 s, reached when the CLI is slow, e.g. under ASan), and the next request
// would be sent on the dead socket.
export async function generateCli(promptIds, maxNewTokens, { ignoreEos = true, model = MODEL } = {}) {
  const args = ['generate', model, '--prompt-ids', promptIds.join(','), '--max-new-tokens', String(maxNewTokens), '--json'];
  if (ignoreEos) args.push('--ignore-eos');
  const { stdout } = await promisify(execFile)(CLI, args, { encoding: 'utf8' });
  return JSON.parse(stdout.trim().split('\n').pop());
}

export async function tokenize(base, body) {
  const r = await postJson(base, '/tokenize', body);
  if (r.status !== 200) throw new Error(`tokenize: ${r.status} ${r.text}`);
  return r.json.tokens;
}
