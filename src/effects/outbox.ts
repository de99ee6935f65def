import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import { PostgresOutbox } from '../postgres/targetOutbox.js';
import { SqliteOutbox } from '../sqlite/targetOutbox.js';
import type { OutboxDialect } from './outboxPort.js';

const sqlite = new SqliteOutbox();
const postgres = new Map<string, PostgresOutbox>();

/** The outbox dialect of a target (`sqliteTarget` or `postgresTarget`). */
export function outboxFor<Tx>(target: ConsumerTarget<Tx>, field = 'target'): OutboxDialect<Tx> {
  if (!target || typeof target.transaction !== 'function') {
    throw new InvalidInputError(field, 'must be a consumer target (sqliteTarget or postgresTarget)');
  }
  if (target.kind === 'sqlite') return sqlite as unknown as OutboxDialect<Tx>;
  if (target.kind === 'postgres') {
    const schema = (target as unknown as { schema?: unknown }).schema;
    if (typeof schema !== 'string')
      throw new InvalidInputError(field, 'a postgres target must expose its schema');
    let o = postgres.get(schema);
    if (!o) {
      o = new PostgresOutbox(schema);
      postgres.set(schema, o);
    }
    return o as unknown as OutboxDialect<Tx>;
  }
  throw new InvalidInputError(
    field,
    `has no effect outbox (kind ${target.kind}; use sqliteTarget or postgresTarget)`,
  );
}

/** Runs `fn` with the outbox in one target transaction (after migrating the target). */
export async function withOutbox<Tx, T>(
  target: ConsumerTarget<Tx>,
  fn: (o: OutboxDialect<Tx>, tx: Tx) => Promise<T>,
): Promise<T> {
  const o = outboxFor(target);
  await target.migrate();
  return target.transaction((t) => fn(o, t.tx));
}
