// `/health` asks the store for its migration status through the port: a schema behind the code is
// reported by the server, and by a remote store reading that server.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import { STORE_MIGRATIONS } from '../../src/sqlite/migrations.js';
import { startTestServer } from './serverFixture.js';

describe('/health migrations', () => {
  it('importing idem/server loads no SQLite driver (a PostgreSQL deployment needs none)', () => {
    const script = [
      "import { createRequire } from 'node:module';",
      "await import('./src/server/index.ts');",
      'const loaded = Object.keys(createRequire(import.meta.url).cache);',
      "console.log(JSON.stringify(loaded.filter((path) => path.includes('better-sqlite3'))));",
    ].join('\n');
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    assert.deepEqual(JSON.parse(out), []);
  });

  it('a SQLite schema behind the code makes /health 503, and the remote store reports the same status', async () => {
    const fixture = await startTestServer();
    const remote = connect(fixture.url);
    try {
      const latest = Math.max(...STORE_MIGRATIONS.map((m) => m.version));
      assert.deepEqual(await remote.migrationStatus(), { current: latest, expected: latest });
      fixture.store.db.prepare('DELETE FROM idem_schema WHERE version = ?').run(latest);

      const res = await fetch(`${fixture.url}/health`);
      const report = (await res.json()) as { status: string; migrations: Record<string, unknown> };
      assert.equal(res.status, 503);
      assert.equal(report.status, 'error');
      assert.equal(report.migrations.ok, false);
      assert.equal(report.migrations.expected, latest);
      assert.ok((report.migrations.current as number) < latest, JSON.stringify(report));
      assert.deepEqual(await remote.migrationStatus(), {
        current: report.migrations.current,
        expected: latest,
      });
    } finally {
      await remote.close();
      await fixture.cleanup();
    }
  });
});
