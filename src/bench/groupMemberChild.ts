// Child process of the consumer-group scenario: one member of a consumer group (or the same consumer
// without partitions) in its own process, as deployed. Run by `fork` (see scenarios/consumerGroup.ts);
// not a public entry point.
//
// IPC: the child opens the store and the target and says `loaded`; on `go` it starts the consumer and
// says `started` with its member id, then every 20 ms `progress` (the partitions it holds and their
// acknowledged positions, from its status in memory: nothing is asked of the store); on `close` it stops the consumer, says `stopped` with the events
// it processed, closes everything and exits. A SIGKILL ends it at any point.
import pg from 'pg';
import { createConsumer, type Consumer } from '../consumer/index.js';
import type { RecordedEvent } from '../core/event.js';
import { openPostgresStore, postgresTarget } from '../postgres/index.js';
import { pgEntityHandler } from './billing.js';
import { runChild } from './childProcess.js';

/**
 * What a member runs: `wait` waits 1 ms per event (a simulated remote call); `pg` upserts the event's
 * entity (its stream) through `ctx.tx`, one round trip per event.
 */
export type MemberHandler = 'wait' | 'pg';

export interface MemberConfig {
  url: string;
  name: string;
  /** Absent: the same consumer without partitions. */
  partitions?: number;
  handler: MemberHandler;
  batch: { size: number; catchUpSize: number };
  leaseTtlMs?: number;
  /** With `partitions`: the consumer's `partitionConcurrency` (absent: every partition held at once). */
  partitionConcurrency?: number;
}

export type MemberMessage =
  | { kind: 'loaded' }
  | { kind: 'started'; member: string }
  /** Every 20 ms once started: [partition index, acknowledged position] of each partition held (index 0 without partitions). */
  | { kind: 'progress'; held: [number, number][] }
  | { kind: 'stopped'; processed: number }
  | { kind: 'error'; message: string };

export type MemberCommand = { kind: 'go' } | { kind: 'close' };

function tell(m: MemberMessage): void {
  process.send?.(m);
}

const wait = (): Promise<void> => new Promise<void>((resolve) => setTimeout(resolve, 1));

async function main(config: MemberConfig): Promise<void> {
  // Few connections each: up to five of these run against one server beside the other jobs.
  const store = await openPostgresStore({ connectionString: config.url, poolSize: 4 });
  const pool = new pg.Pool({ connectionString: config.url, max: 10 });
  const consumer: Consumer = createConsumer({
    name: config.name,
    source: store,
    target: postgresTarget(pool, { schema: config.name }),
    ...(config.partitions !== undefined ? { partitions: config.partitions } : {}),
    ...(config.partitionConcurrency !== undefined
      ? { partitionConcurrency: config.partitionConcurrency }
      : {}),
    ...(config.leaseTtlMs !== undefined ? { leaseTtlMs: config.leaseTtlMs } : {}),
    batch: config.batch,
    handle: async (e: RecordedEvent, ctx: { tx: pg.PoolClient }) => {
      await (config.handler === 'wait' ? wait() : pgEntityHandler(e, ctx));
    },
  });
  let progress: NodeJS.Timeout | undefined;
  const report = (): void => {
    const s = consumer.status();
    tell({
      kind: 'progress',
      held: s.partitions ? s.partitions.map((p) => [p.index, p.position]) : [[0, s.position]],
    });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      process.on('message', (m: MemberCommand) => {
        if (m.kind === 'go') {
          consumer.start().then(
            () => {
              tell({ kind: 'started', member: consumer.status().member ?? '' });
              progress = setInterval(report, 20);
            },
            (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))),
          );
        } else if (m.kind === 'close') resolve();
      });
      process.on('disconnect', resolve);
      tell({ kind: 'loaded' });
    });
    clearInterval(progress);
    await consumer.stop();
    tell({ kind: 'stopped', processed: consumer.metrics().processed });
  } finally {
    clearInterval(progress);
    await consumer.stop();
    await pool.end();
    await store.close();
  }
}

runChild(() => main(JSON.parse(process.argv[2]!) as MemberConfig));
