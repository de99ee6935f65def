// docs/testkit.md's first run: its module, through the real CLI, holds every statement; with the
// guard the page calls wrong, the statement it names fails.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/index.js';
import { idem } from './cli.js';

const DOC = readFileSync(new URL('../../docs/testkit.md', import.meta.url), 'utf8');
const INDEX = fileURLToPath(new URL('../../src/index.ts', import.meta.url));

describe('docs/testkit.md', () => {
  it("the first run's module holds every statement, and the wrong guard fails the one the page shows", async () => {
    const code = /```js\n([\s\S]*?)```/.exec(DOC)?.[1];
    assert.ok(code, 'docs/testkit.md has a js example');
    const wrongGuard = /`(guard: \{ name: 'amount', [^`]+\})`/.exec(DOC)?.[1];
    assert.ok(wrongGuard, 'docs/testkit.md shows the wrong guard');
    // The page imports the installed package; here the repository's source stands in for it.
    const module = code.replace("from 'idem'", `from ${JSON.stringify(INDEX)}`);
    const dir = tempDir();
    try {
      writeFileSync(dir.file('balances.mts'), module);
      writeFileSync(
        dir.file('balances-wrong.mts'),
        module.replace('    source,\n', `    source,\n    ${wrongGuard},\n`),
      );
      const [good, wrong] = await Promise.all([
        idem(['verify', '--consumer', dir.file('balances.mts'), '--seed', '1234']),
        idem(['verify', '--consumer', dir.file('balances-wrong.mts'), '--seed', '1234']),
      ]);
      assert.equal(good.code, 0, good.stderr + good.stdout);
      // The page's commands and their first line: 35 events derived from the samples with seed 1234.
      assert.match(
        good.stdout,
        /^balances_v1: 35 events derived from 3 of 4 samples with seed 1234 \(replay: --seed 1234\) on sqlite \(temporary files\)/,
      );
      assert.match(good.stdout, /ok: every statement holds\n$/);
      assert.equal(wrong.code, 1, wrong.stderr + wrong.stdout);
      assert.match(wrong.stdout, /Every effect has a stable deduplication key +FAILS +clean +2 of 35 events/);
      assert.match(wrong.stdout, /two different facts share a dedup key and one is lost/);
    } finally {
      await dir.cleanup();
    }
  });
});
