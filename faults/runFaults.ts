/** Runs fault scenarios one after another and collects their rows. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireOrSkip } from '../test/support/services.js';
import { seededRandom } from './random.js';
import { SCENARIOS } from './scenarios/index.js';
import { emptyBody, type ScenarioResult, type Size } from './types.js';

export interface RunOptions {
  size: Size;
  seed: number;
  /** Run only scenarios whose name contains one of these. */
  only?: readonly string[];
  log?: (message: string) => void;
}

export async function runFaults(options: RunOptions): Promise<ScenarioResult[]> {
  const log = options.log ?? ((): void => undefined);
  const picked = SCENARIOS.filter(
    (s) => !options.only || options.only.length === 0 || options.only.some((o) => s.name.includes(o)),
  );
  if (picked.length === 0)
    throw new Error(
      `no scenario matches ${options.only?.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`,
    );
  const results: ScenarioResult[] = [];
  for (const scenario of picked) {
    const started = Date.now();
    const base = { name: scenario.name, ...emptyBody() };
    const needs = [
      ...(scenario.postgres ? ['postgres' as const] : []),
      ...(scenario.nats ? ['nats' as const] : []),
    ];
    let skip: string | false = false;
    for (const service of needs) skip ||= await requireOrSkip(service);
    if (skip) {
      results.push({ ...base, skipped: skip, durationMs: 0 });
      log(`${scenario.name}: skipped (${skip})`);
      continue;
    }
    const dir = mkdtempSync(join(tmpdir(), `idem-faults-${scenario.name}-`));
    log(`${scenario.name}: running`);
    try {
      const random = seededRandom(options.seed).fork(scenario.name);
      const body = await scenario.run({
        size: options.size,
        seed: options.seed,
        random,
        dir,
        log: (m) => log(`${scenario.name}: ${m}`),
      });
      results.push({ name: scenario.name, ...body, durationMs: Date.now() - started });
    } catch (err) {
      const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
      results.push({
        ...base,
        error: message.split('\n').slice(0, 4).join(' | '),
        durationMs: Date.now() - started,
      });
    } finally {
      if (process.env.IDEM_KEEP_TEST_DATA === '1') log(`kept ${dir}`);
      else rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
    }
    const r = results.at(-1)!;
    log(
      `${scenario.name}: ${r.error ? 'ERROR' : 'finished'} in ${((Date.now() - started) / 1000).toFixed(1)} s (lost ${r.lost}, doubled ${r.doubled}, out-of-order ${r.outOfOrder})`,
    );
  }
  return results;
}
