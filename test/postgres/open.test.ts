import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { openPostgresStore } from '../../src/postgres/index.js';
import { isIdemError } from '../../src/core/errors.js';
import { appendChannel } from '../../src/postgres/schemaName.js';

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

describe('idem/postgres without a database', () => {
  it('names the package to install when pg is missing', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [
      '--import',
      fixture('hidePg.mjs'),
      '--import',
      'tsx',
      fixture('withoutPg.ts'),
    ]);
    const out = JSON.parse(stdout.trim()) as { code?: string; message?: string };
    assert.equal(out.code, 'unavailable');
    assert.match(out.message ?? '', /npm install pg/);
  });

  it('refuses bad options with invalid_input naming the field', async () => {
    const cases: [unknown, string][] = [
      [{}, 'connectionString'],
      [{ connectionString: 'postgres://x', pool: {} }, 'connectionString'],
      [{ connectionString: '' }, 'connectionString'],
      [{ connectionString: 'postgres://x', schema: 'bad-name' }, 'schema'],
      [{ connectionString: 'postgres://x', schema: '1abc' }, 'schema'],
      [{ connectionString: 'postgres://x', poolSize: 0 }, 'poolSize'],
      [{ connectionString: 'postgres://x', pageSize: 1.5 }, 'pageSize'],
      [{ connectionString: 'postgres://x', preparedStatements: 'yes' }, 'preparedStatements'],
    ];
    for (const [options, field] of cases) {
      await assert.rejects(
        openPostgresStore(options as Parameters<typeof openPostgresStore>[0]),
        (err: unknown) => isIdemError(err, 'invalid_input') && err.details.field === field,
        JSON.stringify(options),
      );
    }
  });
});

describe('idem/postgres with the server unreachable', () => {
  it('fails to open with unavailable, after retrying', async () => {
    await assert.rejects(
      openPostgresStore({
        connectionString: 'postgres://postgres@127.0.0.1:1/none',
        retry: { attempts: 2, initialDelayMs: 1 },
      }),
      (err: unknown) => isIdemError(err, 'unavailable') && /unreachable/.test(err.message),
    );
  });
});

describe('LISTEN/NOTIFY channel names', () => {
  it('fit in 63 bytes and stay distinct for long schema names', () => {
    const a = 'a'.repeat(55) + '_one';
    const b = 'a'.repeat(55) + '_two';
    assert.equal(appendChannel('idem'), 'idem_append_idem');
    assert.ok(appendChannel(a).length <= 63);
    assert.notEqual(appendChannel(a), appendChannel(b));
  });
});
