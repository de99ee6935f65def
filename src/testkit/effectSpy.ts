import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { EffectRecord } from '../core/effectTypes.js';
import { listEffects } from '../effects/admin.js';
import { createEffectDispatcher, type EffectHandler, type EffectHandlers } from '../effects/dispatcher.js';
import { canonical } from './stateDiff.js';

/** An outbox row as the checks compare it: what would reach the external system. */
export interface EffectRow {
  idempotencyKey: string;
  kind: string;
  payload: unknown;
  status: EffectRecord['status'];
}

/** The outbox after a scenario, and how often the spy dispatcher called each idempotency key. */
export interface EffectLog {
  rows: EffectRow[];
  calls: Map<string, number>;
}

const MAX_ROWS = 100_000;

/**
 * Dispatches every pending effect of the target through a spy (one dispatcher, no retries) until none
 * is left, and returns the outbox and the calls per idempotency key.
 */
export async function dispatchWithSpy<Tx>(
  target: ConsumerTarget<Tx>,
  user: EffectHandlers | undefined,
): Promise<EffectLog> {
  const calls = new Map<string, number>();
  if (!target.outbox) return { rows: [], calls };
  const before = await listEffects(target, { limit: MAX_ROWS });
  const kinds = new Set([...before.map((r) => r.kind), ...Object.keys(user ?? {})]);
  if (kinds.size > 0) {
    const handlers: Record<string, EffectHandler> = {};
    for (const kind of kinds) {
      const own = user?.[kind] as EffectHandler | undefined;
      handlers[kind] = (payload, info) => {
        calls.set(info.idempotencyKey, (calls.get(info.idempotencyKey) ?? 0) + 1);
        return own ? own(payload, info) : null;
      };
    }
    const dispatcher = createEffectDispatcher({
      target,
      handlers,
      retry: { attempts: 1 },
      owner: 'idem-testkit-spy',
    });
    while ((await dispatcher.runOnce()) > 0);
    await dispatcher.stop();
  }
  const rows = (await listEffects(target, { limit: MAX_ROWS })).map((r) => ({
    idempotencyKey: r.idempotencyKey,
    kind: r.kind,
    payload: canonical(r.payload),
    status: r.status,
  }));
  return { rows, calls };
}

/** What an effect is, without its status: two runs that record the same effects give equal lists. */
export function effectIdentities(rows: readonly EffectRow[]): string[] {
  return rows.map((r) => JSON.stringify([r.idempotencyKey, r.kind, r.payload])).sort();
}
