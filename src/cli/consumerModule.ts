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

/** Whether tsx's loader is registered in this process by `importUserModule`. */
let tsxRegistered = false;

/**
 * Imports a user's module (`field`: the flag that named it, for errors): a JS module as it is; a
 * TypeScript one through tsx when tsx is installed (in the current project, else beside idem), which
 * finds `.ts` files imported as `.js` and reads the project's tsconfig; without tsx, by node itself
 * where it strips types (Node 22.18 and later), else refused with what to do.
 */
export async function importUserModule(path: string, field: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(path).href;
  if (!TS.has(extname(path))) return (await import(url)) as Record<string, unknown>;
  const api = tsxApi();
  if (api) {
    if (!tsxRegistered) {
      const { register } = (await import(api)) as { register: () => unknown };
      register();
      tsxRegistered = true;
    }
    return (await import(url)) as Record<string, unknown>;
  }
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const install = 'install tsx (`npm install --save-dev tsx`), or give the compiled .js file';
    if (e.code === 'ERR_UNKNOWN_FILE_EXTENSION')
      throw new InvalidInputError(field, `${path} is TypeScript and tsx is not installed: ${install}`);
    if (e.code === 'ERR_MODULE_NOT_FOUND' || e.code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX')
      throw new InvalidInputError(
        field,
        `${path}: ${e.message} (node read this TypeScript itself, without tsx: it finds no .ts file imported as .js and strips types only): ${install}`,
      );
    throw err;
  }
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
  const mod = await importUserModule(path, '--consumer');
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
