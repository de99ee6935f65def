import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidInputError } from '../core/errors.js';
import type { ConsumerFactory, StateReader, TestEvent } from '../testkit/index.js';
import type { EffectHandlers } from '../effects/dispatcher.js';
import type { ConsumerTarget } from '../core/consumerTarget.js';

/** What `idem verify --consumer FILE` needs from the module. */
export interface ConsumerModule {
  consumer: ConsumerFactory<ConsumerTarget<unknown>>;
  read: StateReader<ConsumerTarget<unknown>>;
  events: TestEvent[] | (() => Iterable<TestEvent>) | undefined;
  /** Example events the testkit derives a history from, when there are no events. */
  samples: TestEvent[] | undefined;
  effects: EffectHandlers | undefined;
}

const TS = new Set(['.ts', '.mts', '.cts', '.tsx']);

/**
 * Imports a JS module, or a TypeScript one through tsx when it is installed (in the current project,
 * else beside idem): the loader is registered only when node cannot import the file by itself.
 */
async function importModule(path: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!TS.has(extname(path)) || code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw err;
  }
  const api = tsxApi();
  if (!api)
    throw new InvalidInputError(
      '--consumer',
      `${path} is TypeScript and tsx is not installed: run \`npm install --save-dev tsx\`, or give the compiled .js file`,
    );
  const { register } = (await import(api)) as { register: () => unknown };
  register();
  // Node caches the failed import of `url`: a query makes the retry a new module request.
  return (await import(`${url}?tsx`)) as Record<string, unknown>;
}

function tsxApi(): string | null {
  for (const from of [resolve('package.json'), fileURLToPath(import.meta.url)]) {
    try {
      // The ESM entry of `tsx/esm/api`, from tsx's own export map (require.resolve gives the CommonJS one).
      const pkgPath = createRequire(from).resolve('tsx/package.json');
      const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as {
        exports?: Record<string, { import?: { default?: string } } | string>;
      };
      const entry = pkg.exports?.['./esm/api'];
      const file = typeof entry === 'object' ? entry.import?.default : undefined;
      if (file) return pathToFileURL(join(dirname(pkgPath), file)).href;
    } catch {
      // Not installed there; try the next place.
    }
  }
  return null;
}

/** Loads the module and checks its exports; a missing one is `invalid_input` naming it (exit 2). */
export async function loadConsumerModule(
  file: string,
  eventsFile: string | undefined,
): Promise<ConsumerModule> {
  const path = resolve(file);
  const mod = await importModule(path);
  const missing: string[] = [];
  if (typeof mod.consumer !== 'function')
    missing.push('consumer (a function (source, target, { version }) => createConsumer(...))');
  if (typeof mod.read !== 'function') missing.push('read (a function (target, { version }) => JSON state)');
  const given = mod.events;
  const samples = mod.samples;
  const hasEvents = eventsFile !== undefined || Array.isArray(given) || typeof given === 'function';
  if (!hasEvents && !Array.isArray(samples))
    missing.push(
      'events (an array of { stream, type, data }) nor samples (example events to derive a history from), or give --events FILE.jsonl',
    );
  if (missing.length > 0)
    throw new InvalidInputError('--consumer', `${file} does not export ${missing.join('; nor ')}`);
  const effects = mod.effects;
  if (effects !== undefined && (effects === null || typeof effects !== 'object'))
    throw new InvalidInputError(
      '--consumer',
      `${file} exports effects that is not an object of handlers by kind`,
    );
  return {
    consumer: mod.consumer as ConsumerFactory<ConsumerTarget<unknown>>,
    read: mod.read as StateReader<ConsumerTarget<unknown>>,
    events: eventsFile !== undefined ? readEventsFile(eventsFile) : (given as ConsumerModule['events']),
    samples: hasEvents ? undefined : (samples as TestEvent[]),
    effects: effects as EffectHandlers | undefined,
  };
}

/** One event per line: `{"stream": ..., "type": ..., "data": ..., "metadata"?: ..., "id"?: ...}`. */
export function readEventsFile(file: string): TestEvent[] {
  const events: TestEvent[] = [];
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.trim() === '') return;
      let e: unknown;
      try {
        e = JSON.parse(line);
      } catch (err) {
        throw new InvalidInputError(`--events line ${i + 1}`, `must be JSON (${(err as Error).message})`);
      }
      const o = e as Partial<TestEvent> | null;
      if (
        !o ||
        typeof o !== 'object' ||
        typeof o.stream !== 'string' ||
        typeof o.type !== 'string' ||
        !('data' in o)
      )
        throw new InvalidInputError(`--events line ${i + 1}`, 'must be an object with stream, type and data');
      events.push(o as TestEvent);
    });
  return events;
}
