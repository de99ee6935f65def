import type FastCheck from 'fast-check';
import type { Consumer } from '../consumer/consumer.js';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { matchesFilter, type EventFilter } from '../core/filter.js';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { TestEvent } from './history.js';
import type { Subject } from './subject.js';

/** Most samples `verifyConsumer` takes. */
export const MAX_SAMPLES = 10_000;
/** Largest seed (seeds are integers from 0). */
export const MAX_SEED = 2 ** 31 - 1;
/** A derived history holds between these many events. */
const MIN_DERIVED = 30;
const MAX_DERIVED = 120;
/** Entities built from each sample stream, at most. */
const MAX_ENTITIES = 4;

/** How a history was derived from samples: enough to derive it again. */
export interface Derivation {
  seed: number;
  /** Samples given, and how many of them the consumer's filter matches (the ones used). */
  samples: number;
  used: number;
  filter: EventFilter;
}

type Fc = typeof FastCheck;
let loaded: Promise<Fc> | undefined;

/** fast-check, an optional peer dependency, loaded only when samples are given. */
function loadFastCheck(): Promise<Fc> {
  loaded ??= import('fast-check').then(
    (mod) => (mod as { default?: Fc }).default ?? (mod as unknown as Fc),
    (err: unknown) => {
      loaded = undefined;
      const code = (err as { code?: string }).code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
        throw new IdemError(
          'unavailable',
          'verifyConsumer derives histories from samples with the "fast-check" package, which is not installed; install it with: npm install --save-dev fast-check',
          { package: 'fast-check' },
          { cause: err },
        );
      throw err;
    },
  );
  return loaded;
}

/** A seed for a run that was given none: printed in the report so the run can be replayed. */
export function randomSeed(): number {
  return Math.floor(Math.random() * MAX_SEED);
}

/** The samples checked: a list of 1..MAX_SAMPLES events, each with a string stream and type and data. */
export function checkSamples(samples: unknown): TestEvent[] {
  if (!Array.isArray(samples))
    throw new InvalidInputError('samples', 'must be a list of events { stream, type, data }');
  if (samples.length === 0) throw new InvalidInputError('samples', 'must hold at least one event');
  if (samples.length > MAX_SAMPLES)
    throw new InvalidInputError('samples', `must hold at most ${MAX_SAMPLES} events`);
  samples.forEach((e: Partial<TestEvent> | null, i) => {
    if (!e || typeof e.stream !== 'string' || typeof e.type !== 'string' || !('data' in e))
      throw new InvalidInputError(`samples[${i}]`, 'must have a string stream and type, and data');
  });
  return samples as TestEvent[];
}

/**
 * The consumer's filter, as it subscribes: the consumer is built on a fresh workspace over a source
 * whose `subscribe` records the filter and refuses, so the consumer never reads an event.
 */
export async function consumerFilter<T extends ConsumerTarget<unknown>>(
  subject: Subject<T>,
): Promise<EventFilter> {
  const ws = await subject.backend.open();
  let seen: EventFilter | undefined;
  const refusal = new Error('the testkit only reads the filter');
  const source = new Proxy(ws.store, {
    get(real, prop) {
      if (prop === 'subscribe')
        return (_consumer: string, options?: { filter?: EventFilter }) => {
          seen = options?.filter ?? {};
          return Promise.reject(refusal);
        };
      const v: unknown = Reflect.get(real, prop, real);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(real) : v;
    },
  });
  let consumer: Consumer | undefined;
  try {
    consumer = subject.consumer(source, ws.target, { version: 1 });
    await consumer.start();
  } catch (err) {
    if (err !== refusal && seen === undefined)
      throw new IdemError(
        'invalid_input',
        `the consumer fails to start, so its filter cannot be read: ${err instanceof Error ? err.message : String(err)}`,
        {},
        { cause: err },
      );
  } finally {
    await consumer?.stop();
    await ws.close();
  }
  return seen ?? {};
}

/**
 * The stream of the `k`th entity built from a sample stream: the sample's own stream first, then
 * `account-7-g1`, `account-7-g2`: same category and same prefix, so the filter still matches them.
 */
function entityStream(stream: string, k: number): string {
  return k === 0 ? stream : `${stream}-g${k}`;
}

/**
 * A history derived from the samples the filter matches, with fast-check from `seed`: each sample
 * stream gives 1 to 4 entities; each event is a sample (its type, data and metadata) appended to
 * one of its stream's entities, so versions run in order per entity and entities interleave.
 * The same samples, filter and seed give the same history.
 */
export async function deriveHistory(
  samples: readonly TestEvent[],
  filter: EventFilter,
  seed: number,
): Promise<{ events: TestEvent[]; derivation: Derivation }> {
  const used = samples.filter((e) => matchesFilter(filter, e));
  if (used.length === 0)
    throw new InvalidInputError(
      'samples',
      `must hold at least one event the consumer's filter matches (filter ${JSON.stringify(filter)})`,
    );
  const fc = await loadFastCheck();
  const byStream = new Map<string, TestEvent[]>();
  for (const e of used) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
  const streams = [...byStream.keys()];
  const arb = fc
    .array(fc.integer({ min: 1, max: MAX_ENTITIES }), {
      minLength: streams.length,
      maxLength: streams.length,
    })
    .chain((entities) =>
      fc.array(
        fc
          .integer({ min: 0, max: streams.length - 1 })
          .chain((s) =>
            fc.tuple(
              fc.constant(s),
              fc.integer({ min: 0, max: entities[s]! - 1 }),
              fc.integer({ min: 0, max: byStream.get(streams[s]!)!.length - 1 }),
            ),
          ),
        { minLength: MIN_DERIVED, maxLength: MAX_DERIVED },
      ),
    );
  const [picks] = fc.sample(arb, { seed, numRuns: 1 });
  const events = picks!.map(([s, k, i]): TestEvent => {
    const sample = byStream.get(streams[s]!)![i]!;
    return {
      stream: entityStream(sample.stream, k),
      type: sample.type,
      data: structuredClone(sample.data),
      ...(sample.metadata ? { metadata: structuredClone(sample.metadata) } : {}),
    };
  });
  return { events, derivation: { seed, samples: samples.length, used: used.length, filter } };
}
