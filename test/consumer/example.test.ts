import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { POSTGRES_URL, postgresAvailable, servicesRequired } from '../support/services.js';

const SCRIPT = fileURLToPath(new URL('../../examples/billing/run.ts', import.meta.url));

function run(env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('examples/billing (npm run example:billing)', () => {
  it('bills every invoice exactly once, also after a full redelivery', async () => {
    const pgUp = await postgresAvailable();
    if (!pgUp && servicesRequired())
      throw new Error(`postgres is required (IDEM_REQUIRE_SERVICES=1) but unreachable at ${POSTGRES_URL}`);
    const env = { ...process.env };
    if (pgUp) env.IDEM_POSTGRES_URL = POSTGRES_URL;
    else delete env.IDEM_POSTGRES_URL;
    const { code, out } = await run(env);
    assert.equal(code, 0, out);
    assert.match(
      out,
      /sqlite: first run processed 500 of 500 delivered; redelivery processed 0, skipped 500 duplicates/,
    );
    assert.match(out, /sqlite: invoices=300 .* OK/);
    assert.match(out, /sqlite: ledger rows=500/);
    if (pgUp) assert.match(out, /postgres: invoices=300 .* OK/);
    else console.log(`# PostgreSQL part skipped: unreachable at ${POSTGRES_URL}`);
  });
});
