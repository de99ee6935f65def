// The dashboard in a real browser: Debian's Chromium, driven by playwright-core, against a real
// `idem serve` child process over a SQLite store, with a remote consumer running in this process.
// It writes a screenshot (PNG) of each page: to the test's temporary directory, or to the folder
// IDEM_SCREENSHOTS_DIR names (`IDEM_SCREENSHOTS_DIR=docs/dashboard` refreshes the docs' pictures).
import assert from 'node:assert/strict';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { chromium, type Browser, type Page } from 'playwright-core';
import { connect } from '../../src/client/index.js';
import { createConsumer, type Consumer } from '../../src/consumer/index.js';
import { sqliteTarget, type SqliteTarget } from '../../src/sqlite/index.js';
import type { RemoteEventStore } from '../../src/client/remoteStore.js';
import { startIdem, type LiveCli } from '../cli/cli.js';
import { randomConsumer, randomStream, tempDir, until, type TempDir } from '../support/index.js';
import { requireChromiumOrSkip } from '../support/services.js';

const ADMIN = 'adm-secret-0123';
const READER = 'read-secret-4567';

const found = await requireChromiumOrSkip();
const skip = 'skip' in found ? found.skip : false;
const executablePath = 'chromium' in found ? found.chromium : '';

describe('the dashboard in Chromium', { skip }, () => {
  let dir: TempDir;
  let server: LiveCli;
  let url: string;
  let browser: Browser;
  /** Where the screenshots go (see the top of the file). */
  let shots = '';
  let remote: RemoteEventStore;
  let target: SqliteTarget;
  let consumer: Consumer;
  const name = randomConsumer('billing');
  const stream = randomStream('invoice');
  const poison = randomStream('invoice');
  /** The handler fails on `poison` events while this is set. */
  let poisonFails = true;

  before(async () => {
    dir = tempDir();
    const targetPath = dir.file('target.db');
    target = sqliteTarget(targetPath);
    await target.migrate();
    target.db.exec('CREATE TABLE invoices (stream TEXT PRIMARY KEY, amount INTEGER)');
    server = await startIdem(
      ['serve', '--db', dir.file('idem.db'), '--port', '0', '--target-db', targetPath],
      {
        env: { IDEM_TOKENS: `ops=${ADMIN}:admin;viewer=${READER}:read` },
      },
    );
    [, url] = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+) /)) as [string, string];
    remote = connect(url, { token: ADMIN });
    await remote.append(stream, [{ type: 'invoice.issued', data: { amount: 120 } }]);
    // A consumer registered and left behind: it shows a lag.
    const laggy = await remote.subscribe(randomConsumer('reports'), {
      filter: { streamPrefixes: ['invoice-'] },
    });
    await laggy.close();
    consumer = createConsumer<Database.Database>({
      name,
      source: remote,
      target,
      filter: { streamPrefixes: ['invoice-'] },
      onError: { attempts: 1, then: 'dead-letter' },
      handle: async (event, ctx) => {
        const data = event.data as { amount: number; poison?: boolean };
        if (data.poison && poisonFails) throw new Error(`cannot bill ${event.stream}: amount missing`);
        ctx.tx
          .prepare('INSERT INTO invoices (stream, amount) VALUES (?, ?) ON CONFLICT DO NOTHING')
          .run(event.stream, data.amount);
        await ctx.effect('send-receipt', { stream: event.stream });
      },
      effects: { scope: 'billing', liveFrom: 'start' },
    });
    await consumer.start();
    await consumer.whenCaughtUp();
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    shots = process.env.IDEM_SCREENSHOTS_DIR ?? dir.file('screenshots');
    mkdirSync(shots, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    await consumer?.stop();
    await remote?.close();
    await target?.close();
    await server?.stop();
    await dir?.cleanup();
  });

  /** A page signed in with `token` (sessionStorage, this tab's session only); every URL it asks for is kept. */
  async function signedIn(token: string): Promise<{ page: Page; urls: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const urls: string[] = [];
    page.on('request', (r) => urls.push(r.url()));
    await page.goto(url);
    await page.waitForSelector('#who');
    await page.fill('#token', token);
    await page.click('#token-use');
    await page.locator('#who', { hasText: '(' }).waitFor();
    return { page, urls };
  }

  const shot = async (page: Page, file: string, fullPage = false): Promise<void> => {
    await page.screenshot({ path: join(shots, file), fullPage });
    assert.ok(statSync(join(shots, file)).size > 1000, `${file} is a picture`);
  };

  it('lists consumers with status and lag, and draws the lag chart', async () => {
    const { page, urls } = await signedIn(ADMIN);
    const row = page.locator(`tr[data-consumer="${name}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /idle|running/);
    const lags = await page.locator('tr[data-consumer] td:nth-child(4)').allInnerTexts();
    assert.ok(
      lags.some((l) => Number(l) > 0),
      `a consumer left behind shows its lag: ${lags.join(', ')}`,
    );
    await page.locator('svg.chart').waitFor();
    await shot(page, 'consumers.png');
    assert.ok(!urls.some((u) => u.includes(ADMIN)), 'the token never appears in a URL');
    assert.ok(
      urls.every((u) => u.startsWith(url)),
      `nothing is loaded from elsewhere: ${urls.join(' ')}`,
    );
    await page.close();
  });

  it('shows a dead letter with its event and error; Retry applies it to the target', async () => {
    await remote.append(poison, [{ type: 'invoice.issued', data: { amount: 7, poison: true } }]);
    const { page } = await signedIn(ADMIN);
    await page.goto(`${url}/#/consumer/${name}`);
    const letter = page.locator(`.dead-letter[data-stream="${poison}"]`);
    await until(
      async () => {
        await page.reload();
        return (await letter.count()) > 0;
      },
      { timeoutMs: 20_000, message: 'the dead letter shows' },
    );
    assert.match(await letter.innerText(), /cannot bill .*: amount missing/);
    await letter.locator('summary', { hasText: /^data$/ }).click();
    assert.match(await letter.innerText(), /"poison": true/);
    await shot(page, 'consumer.png', true);

    poisonFails = false;
    await letter.locator('button[data-action="retry"]').click();
    await page.locator('#flash', { hasText: 'retried 1 event' }).waitFor();
    await until(() => target.db.prepare('SELECT amount FROM invoices WHERE stream = ?').get(poison), {
      timeoutMs: 20_000,
      message: 'the retried event reaches the target',
    });
    await until(
      async () => {
        await page.reload();
        return (await page.locator('p#dead-letters').count()) > 0;
      },
      { timeoutMs: 20_000, message: 'the dead letter is gone from the page' },
    );
    await page.close();
  });

  it('pauses and resumes the consumer', async () => {
    const { page } = await signedIn(ADMIN);
    await page.goto(`${url}/#/consumer/${name}`);
    const status = page.locator('#consumer-status');
    await status.waitFor();
    await page.click('#pause-toggle');
    await page.locator('#consumer-status', { hasText: 'paused' }).waitFor();
    await until(() => consumer.status().state === 'paused', {
      timeoutMs: 20_000,
      message: 'the running consumer learns it is paused',
    });
    assert.equal(await page.locator('#pause-toggle').innerText(), 'Resume');
    await page.goto(`${url}/#/`);
    assert.match(await page.locator(`tr[data-consumer="${name}"]`).innerText(), /paused/);
    await page.goto(`${url}/#/consumer/${name}`);
    await page.locator('#pause-toggle', { hasText: 'Resume' }).click();
    await until(async () => !/paused/.test(await status.innerText()), {
      timeoutMs: 20_000,
      message: 'the page shows the consumer resumed',
    });
    await until(() => consumer.status().state !== 'paused', {
      timeoutMs: 20_000,
      message: 'the running consumer resumes',
    });
    await page.close();
  });

  it('browses a stream and shows an event appended meanwhile', async () => {
    const { page } = await signedIn(ADMIN);
    await page.goto(`${url}/#/streams/${stream}`);
    await page.locator('tr[data-event]').first().waitFor();
    const appended = await remote.append(stream, [{ type: 'invoice.paid', data: { paid: 120 } }]);
    await page.reload();
    const row = page.locator(`tr[data-event="${appended.ids[0]}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /invoice\.paid/);
    await row.locator('summary').click();
    assert.match(await row.innerText(), /"paid": 120/);
    await shot(page, 'streams.png');
    await page.close();
  });

  it('lists the effect outbox', async () => {
    const { page } = await signedIn(ADMIN);
    await page.goto(`${url}/#/effects`);
    await page.locator('tr[data-effect]').first().waitFor();
    assert.match(await page.locator('main').innerText(), /pending \d+/);
    await shot(page, 'effects.png');
    await page.close();
  });

  it('disables admin actions without the admin scope, and the server refuses them', async () => {
    await remote.append(poison, [{ type: 'invoice.issued', data: { amount: 9, poison: true } }]);
    poisonFails = true;
    const other = randomStream('invoice');
    await remote.append(other, [{ type: 'invoice.issued', data: { amount: 1, poison: true } }]);
    await until(async () => (await remote.deadLetters.list(name)).length > 0, {
      timeoutMs: 20_000,
      message: 'a dead letter to act on',
    });
    const { page } = await signedIn(READER);
    await page.goto(`${url}/#/consumer/${name}`);
    const retry = page.locator('button[data-action="retry"]').first();
    await retry.waitFor();
    assert.equal(await retry.isDisabled(), true);
    const status = await page.evaluate(
      async ([consumer, s, token]) => {
        const r = await fetch(`/v1/consumers/${consumer}/dead-letters/retry`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ stream: s }),
        });
        return r.status;
      },
      [name, other, READER] as const,
    );
    assert.equal(status, 403);
    assert.equal((await remote.deadLetters.list(name)).filter((d) => d.event.stream === other).length, 1);
    await page.close();
  });

  it('retries every parked entity in bulk', async () => {
    const parked = [...new Set((await remote.deadLetters.list(name)).map((d) => d.event.stream))];
    assert.ok(parked.length >= 2, `entities parked by the test before: ${parked.join(', ')}`);
    poisonFails = false;
    const { page } = await signedIn(ADMIN);
    await page.goto(`${url}/#/consumer/${name}`);
    await page.locator('button[data-action="retry-all"]').click();
    await page.locator('#flash', { hasText: `of ${parked.length} entities` }).waitFor();
    for (const stream of parked) {
      await until(() => target.db.prepare('SELECT 1 FROM invoices WHERE stream = ?').get(stream), {
        timeoutMs: 20_000,
        message: `${stream} reaches the target`,
      });
    }
    await until(async () => (await remote.deadLetters.list(name)).length === 0, {
      timeoutMs: 20_000,
      message: 'no dead letter is left',
    });
    await page.close();
  });
});
