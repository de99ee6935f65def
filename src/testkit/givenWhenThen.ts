import { AssertionError } from 'node:assert';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { SqliteTarget } from '../sqlite/target.js';
import { sqliteBackend, type VerifyBackend } from './backend.js';
import type { EffectRow } from './effectSpy.js';
import { settleIds, type TestEvent } from './history.js';
import { inSession } from './session.js';
import { canonical, diffStates } from './stateDiff.js';
import type { ConsumerFactory, StateReader } from './subject.js';

export interface WhenOptions<T extends ConsumerTarget<unknown>> {
  /** `twice` delivers every event two times in a row (the runtime must skip the copies). @default 'once' */
  deliver?: 'once' | 'twice';
  /** Where it runs. @default `sqliteBackend()` */
  backend?: VerifyBackend<T>;
  /** Longest wait for the consumer to catch up, in ms. @default 30000 */
  timeoutMs?: number;
}

/** What the consumer left: its state as JSON and the outbox (every pending effect dispatched once to a spy). */
export interface Outcome {
  state: unknown;
  effects: EffectRow[];
}

export interface When {
  /**
   * Runs the consumer over the events and checks its state: deep-equal to `expected` (object keys
   * in any order), or `expected(state)` for a function, which throws to fail. Rejects with an
   * `AssertionError` (expected, actual and the differing paths in its message) that node:test,
   * vitest and jest all report with a diff.
   */
  then(expected: unknown): Promise<Outcome>;
  /** Runs the consumer and expects it to fail (onError: stop) with a message matching `pattern`. */
  thenFails(pattern: RegExp): Promise<void>;
  /** Runs the consumer and returns what it left, for checks of your own. */
  run(): Promise<Outcome>;
}

export interface Given {
  when<T extends ConsumerTarget<unknown> = SqliteTarget>(
    consumer: ConsumerFactory<T>,
    read: StateReader<T>,
    options?: WhenOptions<T>,
  ): When;
}

/**
 * Given/When/Then for unit tests of a consumer's handler, on real stores (temporary SQLite files by
 * default), with no test runner imported:
 *
 * ```ts
 * await given([{ stream: 'account-1', type: 'deposit.made', data: { amount: 5 } }])
 *   .when(consumer, read)
 *   .then([{ account: 'account-1', balance: 5 }]);
 * ```
 *
 * Always end the chain with `then`, `thenFails` or `run`, and await it.
 */
export function given(events: readonly TestEvent[]): Given {
  const history = settleIds(events);
  return {
    when<T extends ConsumerTarget<unknown>>(
      consumer: ConsumerFactory<T>,
      read: StateReader<T>,
      options: WhenOptions<T> = {},
    ): When {
      const run = async (): Promise<Outcome> => {
        const subject = {
          consumer,
          read,
          effects: undefined,
          backend: options.backend ?? (sqliteBackend() as unknown as VerifyBackend<T>),
          timeoutMs: options.timeoutMs ?? 30_000,
        };
        const outcome = await inSession(subject, async (s) => {
          if (options.deliver === 'twice') {
            s.hooks.transform = async function* (it) {
              for (let r = await it.next(); !r.done; r = await it.next()) {
                const m = r.value;
                yield m.kind === 'events' ? { ...m, events: m.events.flatMap((e) => [e, e]) } : m;
              }
            };
          }
          await s.prime(history);
          await s.runToEnd(s.make());
        });
        return { state: outcome.state, effects: outcome.effects.rows };
      };
      return {
        run,
        async then(expected: unknown): Promise<Outcome> {
          const outcome = await run();
          if (typeof expected === 'function') {
            (expected as (state: unknown) => void)(outcome.state);
            return outcome;
          }
          const want = canonical(expected);
          const got = canonical(outcome.state);
          const diff = diffStates(want, got);
          if (diff.length > 0) {
            const where = diff
              .map(
                (d) => `  ${d.path}: expected ${JSON.stringify(d.expected)}, got ${JSON.stringify(d.actual)}`,
              )
              .join('\n');
            throw new AssertionError({
              message: `the consumer's state differs from the expected one:\n${where}`,
              expected: want,
              actual: got,
              operator: 'deepStrictEqual',
            });
          }
          return outcome;
        },
        async thenFails(pattern: RegExp): Promise<void> {
          let failure: unknown = null;
          try {
            await run();
          } catch (err) {
            failure = err;
          }
          const message = failure instanceof Error ? failure.message : String(failure);
          if (failure === null || !pattern.test(message))
            throw new AssertionError({
              message:
                failure === null
                  ? `the consumer did not fail (expected ${String(pattern)})`
                  : `the consumer failed with "${message}", which does not match ${String(pattern)}`,
              expected: pattern,
              actual: failure,
              operator: 'match',
            });
        },
      };
    },
  };
}
