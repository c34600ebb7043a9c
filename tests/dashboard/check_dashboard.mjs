// Opens areal's dashboard in a real headless Chromium (Debian's chromium,
// driven by playwright-core) and checks that the curves show the run's own
// numbers: every plotted series has as many points as metrics.jsonl has
// values of that key (or, while the run is live, a prefix of them) and its
// newest point is that key's value in the file; the header shows the last
// step; the sessions table shows text. Saves a screenshot.
//
//   node check_dashboard.mjs URL RUN_DIR SCREENSHOT.png [--live MIN_STEPS]
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const [url, runDir, shot] = process.argv.slice(2, 5);
const liveAt = process.argv.indexOf('--live');
const minSteps = liveAt > 0 ? Number(process.argv[liveAt + 1]) : 0;
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
  page.on('request', (r) => { if (!r.url().startsWith(url)) errors.push(`request outside the dashboard: ${r.url()}`); });
  await page.goto(url);
  if (minSteps > 0) {
    await page.waitForFunction((n) => Number(document.body.dataset.steps ?? 0) >= n, minSteps, { timeout: 120000 });
  } else {
    await page.waitForFunction(() => document.body.dataset.live === 'false' && Number(document.body.dataset.polled ?? 0) >= 1,
      null, { timeout: 60000 });
  }
  await page.waitForFunction(() => Number(document.body.dataset.sessions ?? 0) > 0, null, { timeout: 30000 });
  // What the page plotted, then the file (read after, so it holds at least as much).
  const shown = await page.evaluate(() => ({
    steps: Number(document.body.dataset.steps),
    state: document.getElementById('run-state').textContent,
    series: [...document.querySelectorAll('polyline[data-series]')].map((p) => ({
      chart: p.closest('.chart').id, key: p.dataset.series, n: Number(p.dataset.points), last: Number(p.dataset.last),
      coords: p.getAttribute('points').trim().split(/\s+/).length,
    })),
    sessions: [...document.querySelectorAll('#sessions tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)),
  }));
  await page.screenshot({ path: shot, fullPage: true });
  const rows = readFileSync(`${runDir}/metrics.jsonl`, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const steps = rows.filter((r) => !r.eval);
  if (errors.length) fail(`the page had errors: ${errors.join('; ')}`);
  if (minSteps === 0 && shown.steps !== steps[steps.length - 1].step) fail(`header shows step ${shown.steps}, the run has ${steps.length}`);
  if (minSteps === 0 && shown.state !== 'finished') fail(`a finished run shows '${shown.state}'`);
  const expected = ['reward_mean', 'loss', 'algo_approx_kl', 'algo_clip_fraction', 'staleness_max', 'samples_per_second',
    'tokens_per_second', 'rollouts_in_flight'];
  if (rows.some((r) => r.eval)) expected.push('eval_reward_mean');
  for (const key of expected) {
    const values = rows.filter((r) => typeof r[key] === 'number').map((r) => r[key]);
    const plotted = shown.series.filter((s) => s.key === key);
    if (!plotted.length) fail(`no curve of ${key}`);
    for (const s of plotted) {
      if (s.coords !== s.n) fail(`${s.chart}/${key}: ${s.coords} drawn points for ${s.n} values`);
      if (minSteps === 0 ? s.n !== values.length : s.n > values.length || s.n < 1) fail(`${s.chart}/${key}: ${s.n} points, the file has ${values.length}`);
      if (s.last !== values[s.n - 1]) fail(`${s.chart}/${key}: the newest point is ${s.last}, the file says ${values[s.n - 1]}`);
    }
    console.log(`${key}: ${plotted.length} curve(s), ${plotted[0].n} points, newest ${plotted[0].last}`);
  }
  if (!shown.sessions.length || shown.sessions.some((cells) => !cells[2] || !cells[3])) fail(`sessions table: ${JSON.stringify(shown.sessions)}`);
  console.log(`sessions: ${shown.sessions.length} rows, e.g. ${JSON.stringify(shown.sessions[0])}`);
  console.log(`dashboard OK at step ${shown.steps} (${shown.state}); screenshot ${shot}`);
} finally {
  await browser.close();
}
