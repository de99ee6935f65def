// The billing consumer on the remote client, through a TCP proxy that cuts every connection 25 times:
// it must reconnect and end with every invoice applied exactly once (lost=0, doubled=0).
import assert from 'node:assert/strict';
import { createServer as createTcpServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import {
  BILLING_FILTER,
  SQLITE_SCHEMA,
  sqliteBilling,
  type BillingEvents,
} from '../../examples/billing/billing.js';
import { connect } from '../../src/client/connect.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { NewEvent } from '../../src/core/event.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { startTestServer } from '../server/serverFixture.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

const INVOICES = 10_000; // an issued and a paid event each: 20,000 events
const CUTS = 25;

/** A TCP proxy to `port` whose `cut()` drops every open connection at once. */
async function cuttingProxy(port: number): Promise<{ url: string; cut(): number; close(): Promise<void> }> {
  const pairs = new Set<[Socket, Socket]>();
  const server: Server = createTcpServer((client) => {
    const upstream = tcpConnect(port, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const proxyPort = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${proxyPort}`,
    cut: () => {
      const n = pairs.size;
      for (const [a, b] of [...pairs]) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      return n;
    },
    close: () => {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('remote consumer through connection cuts', () => {
  it(`billing over ${INVOICES * 2} events with ${CUTS} cuts: lost=0 doubled=0`, async () => {
    const fixture = await startTestServer();
    const proxy = await cuttingProxy(fixture.server.port);
    const dir = tempDir();
    const db = new Database(dir.file('billing.db'));
    const remote = connect(proxy.url);
    let consumer: ReturnType<typeof createConsumer> | null = null;
    try {
      let expectedIssued = 0;
      for (let start = 1; start <= INVOICES; start += 500) {
        const appends: Promise<unknown>[] = [];
        for (let i = start; i < start + 500 && i <= INVOICES; i++) {
          const invoiceId = `inv-${i}`;
          const amount = 100 + (i % 50);
          expectedIssued += amount;
          const events: NewEvent[] = [
            { type: 'invoice.issued', data: { invoiceId, customer: `c-${i % 17}`, amount } },
            { type: 'invoice.paid', data: { invoiceId, amount } },
          ];
          appends.push(fixture.store.append(`invoice-${i}`, events));
        }
        await Promise.all(appends);
      }

      db.pragma('journal_mode = WAL');
      db.exec(SQLITE_SCHEMA);
      db.exec('CREATE TABLE applied (event_id TEXT PRIMARY KEY, n INTEGER NOT NULL)');
      const billing = sqliteBilling(db);
      const count = db.prepare(
        'INSERT INTO applied (event_id, n) VALUES (?, 1) ON CONFLICT (event_id) DO UPDATE SET n = n + 1',
      );
      const c = createConsumer<Database.Database, BillingEvents>({
        name: 'billing_v2',
        source: remote,
        filter: BILLING_FILTER,
        target: sqliteTarget(db),
        guard: 'event-id',
        handle: (event) => {
          billing(event);
          count.run(event.id);
        },
        // Catch-up batches merge two pages, so cuts also land while a merged batch is being read.
        batch: { size: 200, catchUpSize: 400 },
        reconnect: { initialDelayMs: 5, maxDelayMs: 100 },
      });
      consumer = c;
      await c.start();
      // Cut every connection each time another 1/(CUTS+1) of the events has been processed.
      let cuts = 0;
      const step = Math.floor((INVOICES * 2) / (CUTS + 1));
      while (cuts < CUTS) {
        const target = step * (cuts + 1);
        await until(() => c.metrics().processed >= target || c.status().state === 'failed', {
          timeoutMs: 60_000,
          message: `${target} events processed`,
        });
        assert.notEqual(
          c.status().state,
          'failed',
          `consumer failed: ${String(c.status().lastError?.message)}`,
        );
        if (proxy.cut() > 0) cuts++;
        // No connection open (the consumer is between reconnects): let it reconnect before trying again.
        else await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await c.whenCaughtUp({ timeoutMs: 60_000 });
      await c.stop();

      const rows = db
        .prepare('SELECT count(*) AS applied, coalesce(sum(n > 1), 0) AS doubled FROM applied')
        .get() as { applied: number; doubled: number };
      const totals = db
        .prepare(
          "SELECT sum(amount) AS issued, sum(paid) AS paid, sum(status = 'paid') AS fully FROM invoice_status",
        )
        .get() as {
        issued: number;
        paid: number;
        fully: number;
      };
      const lost = INVOICES * 2 - rows.applied;
      const m = c.metrics();
      console.log(
        `# events=${INVOICES * 2} cuts=${cuts} reconnects=${m.reconnects} duplicates_skipped=${m.duplicates} ` +
          `lost=${lost} doubled=${rows.doubled} issued=${totals.issued}/${expectedIssued} paid=${totals.paid}/${expectedIssued}`,
      );
      assert.equal(cuts, CUTS);
      assert.ok(m.reconnects >= CUTS / 2, `reconnects counted: ${m.reconnects}`);
      assert.equal(lost, 0, 'lost');
      assert.equal(rows.doubled, 0, 'doubled');
      assert.equal(totals.issued, expectedIssued);
      assert.equal(totals.paid, expectedIssued);
      assert.equal(totals.fully, INVOICES);
      assert.equal(
        (await fixture.store.consumers.get('billing_v2')).position,
        await fixture.store.headPosition(),
      );
    } finally {
      await consumer?.stop();
      await remote.close();
      await proxy.close();
      db.close();
      await fixture.cleanup();
      await dir.cleanup();
    }
  });
});
