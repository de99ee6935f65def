import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { RecordedEvent } from '../core/event.js';
import { isIdemError } from '../core/errors.js';
import type { SubscriptionMessage } from '../core/subscription.js';
import { InjectedFault } from './faults.js';
import type { HistoryEvent } from './history.js';
import { inSession, type RunOutcome, type Session } from './session.js';
import type { Subject } from './subject.js';

/** The checklist statements of the idempotent-consumer pattern, by id. */
export type StatementId =
  'stable-keys' | 'atomic-commit' | 'ack-after-processing' | 'gaps-and-duplicates' | 'measured';

export type ScenarioId =
  | 'clean'
  | 'twice'
  | 'crash-after-commit'
  | 'crash-in-batch'
  | 'rewind'
  | 'restarts'
  | 'version-gap'
  | 'poison'
  | 'rebuild';

/** What a scenario knows from the clean run before it starts. */
export interface CleanFacts {
  /** The events the clean run delivered, in order. */
  delivered: readonly RecordedEvent[];
  /** True when the consumer recorded entity versions (the entity-version guard). */
  entityVersions: boolean;
}

export interface Scenario {
  id: ScenarioId;
  title: string;
  /** The statement a wrong end state disproves. */
  statement: StatementId;
  /** Null when the scenario applies; otherwise why it is not run. */
  skip?(facts: CleanFacts): string | null;
  run<T extends ConsumerTarget<unknown>>(
    subject: Subject<T>,
    history: readonly HistoryEvent[],
    facts: CleanFacts,
  ): Promise<RunOutcome>;
}

/** Every run starts like this: live point 0, history appended, then `body` drives the consumer. */
export function scenario<T extends ConsumerTarget<unknown>>(
  subject: Subject<T>,
  history: readonly HistoryEvent[],
  body: (s: Session<T>) => Promise<number | void>,
): Promise<RunOutcome> {
  return inSession(subject, async (s) => {
    await s.prime(history);
    return body(s);
  });
}

export const clean: Scenario = {
  id: 'clean',
  title: 'single clean delivery',
  statement: 'stable-keys',
  run: (subject, history) => scenario(subject, history, async (s) => void (await s.runToEnd(s.make()))),
};

const twice: Scenario = {
  id: 'twice',
  title: 'every event delivered twice',
  statement: 'gaps-and-duplicates',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      s.hooks.transform = async function* (it) {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          const m = r.value;
          yield m.kind === 'events' ? { ...m, events: m.events.flatMap((e) => [e, e]) } : m;
        }
      };
      await s.runToEnd(s.make());
    }),
};

const crashAfterCommit: Scenario = {
  id: 'crash-after-commit',
  title: 'crash after the commit, before the ack',
  statement: 'ack-after-processing',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      const crashed = new Set<number>();
      s.hooks.beforeAck = (position) => {
        if (crashed.has(position)) return;
        crashed.add(position);
        throw new InjectedFault(`lost the ack of position ${position}`);
      };
      await s.runToEnd(s.make());
      s.notes.push(`${crashed.size} acks lost, each batch delivered again`);
    }),
};

const crashInBatch: Scenario = {
  id: 'crash-in-batch',
  title: 'crash inside a batch (rolled back, delivered again)',
  statement: 'atomic-commit',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      const crashed = new Set<number>();
      s.hooks.beforeCommit = (record) => {
        if (crashed.has(record.position)) return;
        crashed.add(record.position);
        throw new InjectedFault(`crashed before the commit of the batch up to ${record.position}`);
      };
      await s.runToEnd(s.make());
      s.notes.push(`${crashed.size} batches rolled back after their handlers ran`);
    }),
};

const rewind: Scenario = {
  id: 'rewind',
  title: 'cursor rewound to 0',
  statement: 'ack-after-processing',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      const first = await s.runToEnd(s.make());
      await resetWhenReleased(s, first.name, subject.timeoutMs);
      await s.runToEnd(s.make());
    }),
};

/**
 * Rewinds the cursor once the stopped consumer's lease is released: on PostgreSQL the release can
 * still be in flight when `stop()` resolves, and `reset` refuses an owned consumer.
 */
async function resetWhenReleased<T extends ConsumerTarget<unknown>>(
  s: Session<T>,
  name: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await s.store.consumers.reset(name, 0);
      return;
    } catch (err) {
      if (!isIdemError(err) || err.code !== 'consumer_busy' || Date.now() > deadline) throw err;
      await new Promise((res) => setTimeout(res, 20));
    }
  }
}

/** About how many consumer instances the restart scenario starts. */
const RESTARTS = 10;

const restarts: Scenario = {
  id: 'restarts',
  title: 'consumer restarted between every batch',
  statement: 'ack-after-processing',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      // Each instance gets one batch of at most `chunk` events, then its subscription ends: about
      // ten instances, whatever the consumer's batching, each resuming from the last one's cursor.
      const chunk = Math.max(1, Math.ceil(history.length / RESTARTS));
      s.hooks.transform = async function* (it) {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          const m = r.value;
          if (m.kind !== 'events') {
            yield m;
            continue;
          }
          yield { ...m, events: m.events.slice(0, chunk) };
          return;
        }
      };
      let starts = 0;
      for (;;) {
        const c = s.make();
        starts++;
        let onAck!: () => void;
        const acked = new Promise<'acked'>((res) => (onAck = () => res('acked')));
        s.hooks.acked = () => onAck();
        await s.start(c);
        const caught = c.whenCaughtUp({ timeoutMs: subject.timeoutMs }).then(() => 'caught' as const);
        // A stop rejects the wait for the catch-up; the race has been decided by then.
        caught.catch(() => undefined);
        const first = await Promise.race([acked, caught]).finally(() => c.stop());
        if (first === 'caught' || starts > history.length + 1) break;
      }
      s.notes.push(`${starts} consumer instances`);
    }),
};

/** The pair (X, Y): Y is the next version of X's stream and the closest such pair in delivery order. */
function latePair(delivered: readonly RecordedEvent[]): [RecordedEvent, RecordedEvent] | null {
  const lastIndex = new Map<string, number>();
  let best: [RecordedEvent, RecordedEvent] | null = null;
  let distance = Infinity;
  for (let i = 0; i < delivered.length; i++) {
    const e = delivered[i]!;
    const prev = lastIndex.get(e.stream);
    if (prev !== undefined && delivered[prev]!.version === e.version - 1 && i - prev < distance) {
      best = [delivered[prev]!, e];
      distance = i - prev;
    }
    lastIndex.set(e.stream, i);
  }
  return best;
}

const versionGap: Scenario = {
  id: 'version-gap',
  title: 'a version delivered late (entity-version guard)',
  statement: 'gaps-and-duplicates',
  skip: (facts) =>
    !facts.entityVersions
      ? 'the consumer keeps no entity versions (no entity-version guard)'
      : latePair(facts.delivered)
        ? null
        : 'the history has no stream with two consecutive versions',
  run: (subject, history, facts) =>
    scenario(subject, history, async (s) => {
      const [x, y] = latePair(facts.delivered)!;
      s.hooks.transform = async function* (it) {
        // Holds the messages from X's on until Y's arrives, then delivers Y just before X.
        const held: SubscriptionMessage[] = [];
        let done = false;
        for (let r = await it.next(); !r.done; r = await it.next()) {
          const m = r.value;
          if (done) {
            yield m;
            continue;
          }
          const hasX = m.kind === 'events' && m.events.some((e) => e.id === x.id);
          if (held.length === 0 && !hasX) {
            yield m;
            continue;
          }
          held.push(m);
          if (m.kind !== 'events' || !m.events.some((e) => e.id === y.id)) continue;
          done = true;
          const late = held.map((h) =>
            h.kind === 'events' ? { ...h, events: h.events.filter((e) => e.id !== y.id) } : h,
          );
          const xs = late[0]! as Extract<SubscriptionMessage, { kind: 'events' }>;
          const at = xs.events.findIndex((e) => e.id === x.id);
          late[0] = { ...xs, events: [...xs.events.slice(0, at), y, ...xs.events.slice(at)] };
          for (const h of late) if (h.kind !== 'events' || h.events.length > 0) yield h;
        }
        for (const h of done ? [] : held) yield h;
      };
      s.notes.push(`${y.stream} v${y.version} delivered before v${x.version}`);
      try {
        await s.runToEnd(s.make());
      } catch (err) {
        if (!(isIdemError(err) && err.code === 'wrong_expected_version')) throw err;
        // gaps: 'fail' is a policy too: the consumer stops before the gap, and starts again in order.
        s.notes.push(`the consumer stopped on the gap (${err.message}); restarted in order`);
        delete s.hooks.transform;
        await s.runToEnd(s.make());
      }
    }),
};

export const SCENARIOS: readonly Scenario[] = [
  twice,
  crashAfterCommit,
  crashInBatch,
  rewind,
  restarts,
  versionGap,
];
