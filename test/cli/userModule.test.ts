// `idem consumer rebuild --module` and `idem verify --consumer` load the user's module: a TypeScript
// one through tsx (which idem finds in the project or beside itself), so that it may import its
// sibling .ts files as `.js`, as TypeScript projects write them. The command runs as a plain node
// process here, without a TypeScript loader of its own.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from '../support/index.js';
import { writeInvoiceStore } from '../support/invoiceStore.js';
import { idem } from './cli.js';

describe('user modules in TypeScript', () => {
  it('consumer rebuild --module loads a .ts projection whose import of a .ts sibling is written .js', async () => {
    const dir = tempDir();
    try {
      const db = dir.file('store.db');
      const tdb = dir.file('target.db');
      await writeInvoiceStore(db, 3);
      // An ES module project, as `import`/`export` in .ts files are written for.
      writeFileSync(dir.file('package.json'), '{ "type": "module" }\n');
      writeFileSync(
        dir.file('tables.ts'),
        `export function invoicesTable(suffix: string): string {\n  return \`invoices\${suffix}\`;\n}\n`,
      );
      writeFileSync(
        dir.file('projection.ts'),
        [
          `import { invoicesTable } from './tables.js';`,
          `interface Ctx { tx: { prepare(sql: string): { run(...args: unknown[]): unknown } }; tableSuffix: string }`,
          `export default {`,
          `  filter: { types: ['invoice.issued'] },`,
          `  handle: async (e: { id: string }, ctx: Ctx): Promise<void> => {`,
          `    const table: string = invoicesTable(ctx.tableSuffix);`,
          `    ctx.tx.prepare(\`CREATE TABLE IF NOT EXISTS \${table} (event_id TEXT PRIMARY KEY)\`).run();`,
          `    ctx.tx.prepare(\`INSERT INTO \${table} (event_id) VALUES (?)\`).run(e.id);`,
          `  },`,
          `};`,
          ``,
        ].join('\n'),
      );
      const r = await idem([
        'consumer',
        'rebuild',
        'invoices_v1',
        '--as',
        'invoices_v2',
        '--module',
        dir.file('projection.ts'),
        '--db',
        db,
        '--target-db',
        tdb,
        '--json',
      ]);
      assert.equal(r.code, 0, r.stderr);
      const progress = JSON.parse(r.stdout) as { name: string; caughtUp: boolean; position: number };
      assert.deepEqual([progress.name, progress.caughtUp, progress.position], ['invoices_v2', true, 3]);
      const target = new Database(tdb, { readonly: true });
      try {
        const tables = target
          .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'invoices%'`)
          .pluck()
          .all() as string[];
        assert.equal(tables.length, 1, `one invoices table: ${tables.join(', ')}`);
        assert.equal(target.prepare(`SELECT count(*) FROM "${tables[0]}"`).pluck().get(), 3);
      } finally {
        target.close();
      }
    } finally {
      await dir.cleanup();
    }
  });
});
