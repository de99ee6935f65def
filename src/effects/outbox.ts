import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { OutboxDialect } from '../core/effectOutbox.js';
import { InvalidInputError } from '../core/errors.js';

/** The effect outbox of a target (`sqliteTarget` or `postgresTarget` have one). */
export function outboxFor<Tx>(target: ConsumerTarget<Tx>, field = 'target'): OutboxDialect<Tx> {
  if (!target || typeof target.transaction !== 'function') {
    throw new InvalidInputError(field, 'must be a consumer target (sqliteTarget or postgresTarget)');
  }
  if (!target.outbox)
    throw new InvalidInputError(
      field,
      `has no effect outbox (kind ${target.kind}; use sqliteTarget or postgresTarget)`,
    );
  return target.outbox;
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
