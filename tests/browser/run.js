// The dashboard in a real browser: Debian's chromium, headless, driven by
// puppeteer-core, against a real redis-server, worker and `jobrunner web`
// this script starts (and stops, by pid). Registered as the ctest
// test_browser (tests/CMakeLists.txt); run by hand:
//   node tests/browser/run.js --jobrunner build/bin/jobrunner --plugin build/tests/recordplugin \
//        --redis-server /usr/bin/redis-server --out build/screenshots
// Screenshots of every page go to --out. Exit status 0 when every check held.
'use strict';

const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

let puppeteer;
try {
  puppeteer = require('puppeteer-core');
} catch (e) {
  console.error('test_browser: puppeteer-core is not installed: run `npm ci` in tests/browser (tests/run.sh does)');
  process.exit(1);
}

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['jobrunner', 'plugin', 'redis-server', 'out'])
  if (!opt[k]) { console.error('test_browser: --' + k + ' is required'); process.exit(2); }
const CHROMIUM = opt.chromium || process.env.JR_CHROMIUM || '/usr/bin/chromium';
const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'jr-browser-'));
const SOCK = path.join(DIR, 'redis.sock');
const URL_REDIS = 'unix://' + SOCK;
const RECORD = path.join(DIR, 'record.txt');
const procs = [];
let failures = 0;

function check(ok, what, detail) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what + (ok || detail === undefined ? '' : ': ' + detail));
  if (!ok) failures++;
  return ok;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, timeoutMs = 15000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e.message; }
    await sleep(100);
  }
  throw new Error('timed out waiting for ' + what + (last ? ' (last: ' + last + ')' : ''));
}

function start(name, cmd, args, env) {
  const log = path.join(DIR, name + '.log');
  const fd = fs.openSync(log, 'a');
  const p = spawn(cmd, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...(env || {}) } });
  fs.closeSync(fd);
  procs.push(p);
  return { p, log };
}
async function stop(p) {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 10000);
  await done;
  clearTimeout(t);
}
function jr(...args) { return execFileSync(opt.jobrunner, args, { encoding: 'utf8' }).trim(); }
function cli(...args) { // a redis-cli-like call through redis-server's own client: jobrunner has none, so use redis-cli
  return execFileSync(opt['redis-cli'] || 'redis-cli', ['-s', SOCK, ...args], { encoding: 'utf8' }).trim();
}
const readLog = (f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '');

// `jobrunner web` on a free port of 127.0.0.1 (--listen 127.0.0.1:0): its
// port from its "serving the dashboard" line.
async function startWeb(name, extraYaml) {
  const cfg = path.join(DIR, name + '.yaml');
  fs.writeFileSync(cfg, 'redis:\n  url: ' + URL_REDIS + '\n' + (extraYaml || ''));
  const w = start(name, opt.jobrunner, ['web', '-c', cfg, '--listen', '127.0.0.1:0']);
  const port = await until(name + ' to listen', () => {
    const m = readLog(w.log).match(/serving the dashboard.* port=(\d+)/);
    return m && Number(m[1]);
  });
  return { ...w, port, base: 'http://127.0.0.1:' + port };
}

async function main() {
  fs.mkdirSync(opt.out, { recursive: true });
  start('redis', opt['redis-server'], ['--port', '0', '--unixsocket', SOCK, '--save', '', '--appendonly', 'no', '--dir', DIR]);
  await until('redis-server', () => fs.existsSync(SOCK) && cli('PING') === 'PONG');

  // What the pages show: queue "idle" (nobody serves it) with ready jobs,
  // queue "shop" with delayed jobs, markup in a payload and an id, a dead job.
  for (let i = 0; i < 4; i++) jr('enqueue', '--redis', URL_REDIS, '-q', 'idle', 'record', 'ready ' + i);
  const XSS = '<img src=x onerror=alert(1)>';
  const XSS_ID = '"><img src=y onerror=alert(2)>';
  jr('enqueue', '--redis', URL_REDIS, '-q', 'shop', '--in', '1h', '--id', XSS_ID, 'record', XSS);
  jr('enqueue', '--redis', URL_REDIS, '-q', 'shop', '--in', '2h', 'record', 'later');
  cli('XADD', 'jr:{shop}:dead', '*', 'id', 'dead-1', 'h', 'record', 'p', 'revived', 'a', '3', 'why', 'attempts', 'err', 'boom');
  jr('cron', 'add', '--redis', URL_REDIS, 'nightly', '--cron', '0 2 * * *', '--tz', 'Europe/Berlin', '-q', 'shop', 'record', 'report');

  const wcfg = path.join(DIR, 'worker.yaml');
  fs.writeFileSync(wcfg, 'redis:\n  url: ' + URL_REDIS + '\nworker:\n  concurrency: 2\n  block: 500ms\n');
  const worker = start('worker', opt.jobrunner, ['worker', '-c', wcfg, '-q', 'shop', '--plugin', opt.plugin], { JRT_RECORD: RECORD });
  const web = await startWeb('web');
  await until('the worker to be listed', () => /"role":"worker"/.test(jr('workers', '--redis', URL_REDIS, '--json')));

  const browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    const dialogs = [];
    page.on('dialog', async (d) => { dialogs.push(d.type() + ': ' + d.message()); if (d.type() === 'confirm') await d.accept(); else await d.dismiss(); });
    page.on('pageerror', (e) => check(false, 'no script error on the page', e.message));
    const text = (sel) => page.$eval(sel, (e) => e.textContent.trim());

    // ---- Overview: the counts Redis holds --------------------------------
    await page.goto(web.base + '/#/', { waitUntil: 'networkidle0' });
    await page.waitForSelector('tr[data-queue="idle"]');
    const want = {
      idle: { ready: cli('XLEN', 'jr:{idle}:ready') },
      shop: { delayed: String(Number(cli('ZCARD', 'jr:{shop}:delayed')) + Number(cli('EVAL', "local n=0 for _,k in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do n=n+redis.call('LLEN', 'jr:{shop}:wheel:'..k) end return n", '1', 'jr:{shop}:wheel'))),
              dead: cli('XLEN', 'jr:{shop}:dead') },
    };
    for (const [q, cols] of Object.entries(want))
      for (const [col, n] of Object.entries(cols)) {
        const shown = await text('tr[data-queue="' + q + '"] td[data-col="' + col + '"]');
        check(shown === n, 'overview: ' + q + ' ' + col + ' is what Redis holds (' + n + ')', 'shown ' + shown);
      }
    check(want.idle.ready === '4' && want.shop.delayed === '2' && want.shop.dead === '1', 'the seeded counts', JSON.stringify(want));
    // it updates itself: a job enqueued now shows without a reload
    jr('enqueue', '--redis', URL_REDIS, '-q', 'idle', 'record', 'one more');
    await until('the overview to show 5 ready in idle', async () => (await text('tr[data-queue="idle"] td[data-col="ready"]')) === '5');
    check(true, 'overview updates itself (polling)');
    check(await page.$('#history-chart polyline') !== null, 'the overview draws the per-minute history chart');
    await page.screenshot({ path: path.join(opt.out, 'overview.png'), fullPage: true });

    // ---- XSS: markup from Redis renders as text ----------------------------
    await page.goto(web.base + '/#/queue/shop/delayed', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#jobs tbody tr');
    const body = await page.evaluate(() => document.body.innerText);
    check(body.includes(XSS), 'the payload markup is shown as text on the queue page');
    check(body.includes(XSS_ID), 'the id markup is shown as text on the queue page');
    check((await page.$$('main img')).length === 0, 'no <img> element was made from data');
    await page.screenshot({ path: path.join(opt.out, 'queue.png'), fullPage: true });
    await page.goto(web.base + '/#/job/shop/' + encodeURIComponent(XSS_ID), { waitUntil: 'networkidle0' });
    await page.waitForSelector('#payload');
    check((await text('#payload')) === XSS, 'the job page shows the payload as text', await text('#payload'));
    check((await text('#job-id')) === XSS_ID, 'the job page shows the id as text');
    check((await page.$$('main img')).length === 0, 'no <img> on the job page');
    await sleep(300);
    check(!dialogs.some((d) => d.startsWith('alert')), 'no alert dialog fired', dialogs.join('; '));

    // ---- a POST without the CSRF token is refused --------------------------
    const st = await page.evaluate(async () => (await fetch('/api/pause', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"queue":"shop"}' })).status);
    check(st === 403, 'a POST without the CSRF token gets 403', st);
    check(cli('HEXISTS', 'jr:{queues}:paused', 'shop') === '0', 'and paused nothing');

    // ---- retrying a dead job from its page makes it run ----------------------
    await page.goto(web.base + '/#/job/shop/dead-1', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#job-state');
    check((await text('#job-state')) === 'dead', 'the dead job\'s page says dead');
    await page.screenshot({ path: path.join(opt.out, 'job.png'), fullPage: true });
    await page.waitForSelector('button[data-action="Retry"]');
    await page.click('button[data-action="Retry"]');
    await until('the worker to log the retried job', () => /job finished job=dead-1 .*outcome=ok/.test(readLog(worker.log)));
    check(true, 'the retried dead job ran (the worker logged "job finished job=dead-1 ... outcome=ok")');

    // ---- pausing a queue from the page stops fetching -----------------------
    await page.goto(web.base + '/#/queue/shop/ready', { waitUntil: 'networkidle0' });
    await page.waitForSelector('button[data-action="Pause"]');
    await page.click('button[data-action="Pause"]');
    await page.waitForSelector('#paused');
    check(cli('HEXISTS', 'jr:{queues}:paused', 'shop') === '1', 'the page paused the queue in Redis');
    jr('enqueue', '--redis', URL_REDIS, '-q', 'shop', '--id', 'while-paused', 'record', 'paused job');
    await sleep(2500);
    check(!/job=while-paused/.test(readLog(worker.log)) && cli('XLEN', 'jr:{shop}:ready') === '1',
      'a job of the paused queue is not fetched (2.5 s)', 'ready: ' + cli('XLEN', 'jr:{shop}:ready'));
    await page.reload({ waitUntil: 'networkidle0' });
    await page.screenshot({ path: path.join(opt.out, 'queue-paused.png'), fullPage: true });
    await page.waitForSelector('button[data-action="Resume"]');
    await page.click('button[data-action="Resume"]');
    await until('the job to run after resume', () => /job finished job=while-paused/.test(readLog(worker.log)));
    check(true, 'resumed from the page: the job ran');

    // ---- bulk over a filter: run now every delayed job whose payload holds "later"
    await page.goto(web.base + '/#/queue/shop/delayed', { waitUntil: 'networkidle0' });
    // the delayed page's own toolbar (the ready page before it has a #f-payload too, which
    // the delayed page replaces once its data arrived: text typed there was lost under ASan)
    await page.waitForSelector('button[data-action="Run now all matching"]');
    await page.type('#f-payload', 'later');
    await page.waitForFunction(() => / 1 shown\./.test(document.getElementById('filter-note').textContent));
    await page.screenshot({ path: path.join(opt.out, 'bulk.png'), fullPage: true });
    await page.click('button[data-action="Run now all matching"]');
    await until('the job "later" to run', () => /later/.test(readLog(RECORD)));
    check(/later/.test(readLog(RECORD)), 'bulk "run now all matching" ran the job whose payload matched');
    await sleep(500);
    check(!readLog(RECORD).includes(XSS), 'and not the other delayed job');

    // ---- workers and schedules pages ------------------------------------------
    await page.goto(web.base + '/#/workers', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#workers tbody tr');
    const busy = await page.$$eval('#workers td[data-col="busy"]', (v) => v.map((e) => e.textContent));
    check(busy.some((b) => / of 2 busy$/.test(b)), 'the workers page says "N of 2 busy"', busy.join(', '));
    await page.screenshot({ path: path.join(opt.out, 'workers.png'), fullPage: true });
    await page.goto(web.base + '/#/schedules', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#schedules tbody tr');
    const sched = await page.evaluate(() => document.querySelector('#schedules').innerText);
    check(/nightly/.test(sched) && /Europe\/Berlin/.test(sched), 'the schedules page lists the schedule and its zone');
    await page.screenshot({ path: path.join(opt.out, 'schedules.png'), fullPage: true });
    await page.click('button[data-action="Fire now"]');
    await until('the fired schedule\'s job to run', () => /job finished job=nightly@fire-/.test(readLog(worker.log)));
    check(true, 'fire now from the schedules page: the worker ran nightly@fire-...');
    await page.goto(web.base + '/#/queue/shop/dead', { waitUntil: 'networkidle0' });
    await page.waitForSelector('#jobs');
    await page.screenshot({ path: path.join(opt.out, 'dead.png'), fullPage: true });
    await page.close();

    // ---- with a password, no page loads without it ------------------------------
    const locked = await startWeb('web-password', 'web:\n  password: browser-secret\n');
    const p2 = await browser.newPage();
    let refused;
    try {
      const r1 = await p2.goto(locked.base + '/', { waitUntil: 'networkidle0' });
      refused = r1.status() === 401 ? 'HTTP 401' : null;
    } catch (e) { // headless chromium ends a 401 that has no credentials to offer so
      refused = /ERR_INVALID_AUTH_CREDENTIALS/.test(e.message) ? e.message.split(' at ')[0] : null;
    }
    check(refused, 'with web.password the browser gets no page without it', refused);
    check((await p2.$('#main')) === null, 'and nothing of the page loads');
    for (const u of ['/', '/app.js', '/api/overview', '/api/session']) {
      const st = await new Promise((res) => require('http').get(locked.base + u, (r) => { r.resume(); res(r.statusCode); }).on('error', () => res(-1)));
      check(st === 401, 'GET ' + u + ' without the password: 401', st);
    }
    await p2.authenticate({ username: 'ops', password: 'browser-secret' });
    const r3 = await p2.goto(locked.base + '/#/', { waitUntil: 'networkidle0' });
    check(r3.status() === 200, 'with the password it loads', r3.status());
    await p2.waitForSelector('tr[data-queue="idle"]');
    check(true, 'and shows the overview');
    await stop(locked.p);
  } finally {
    await browser.close();
  }
}

main()
  .catch((e) => { check(false, 'the browser test ran to its end', e.stack || e.message); })
  .finally(async () => {
    for (const p of procs.slice().reverse()) await stop(p);
    if (failures) {
      for (const f of ['web.log', 'worker.log']) console.log('--- ' + f + '\n' + readLog(path.join(DIR, f)).slice(-4000));
    }
    fs.rmSync(DIR, { recursive: true, force: true });
    console.log(failures ? failures + ' check(s) failed' : 'every check held; screenshots in ' + opt.out);
    process.exit(failures ? 1 : 0);
  });
