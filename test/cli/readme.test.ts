import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDir } from '../support/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('has the two set-up commands, and no other command before them', () => {
    const blocks = [...README.matchAll(/```(\w*)\n([\s\S]*?)```/g)];
    assert.deepEqual(
      blocks.slice(0, 2).map((b) => b[2]!.trim()),
      ['npm install && npm start', 'npm test'],
    );
  });

  it('its API example runs and prints what its comments say', async () => {
    const code = /```ts\n([\s\S]*?)```/.exec(README)?.[1];
    assert.ok(code, 'README has a ts example');
    const dir = tempDir();
    try {
      // Run the example against the source (the package self-reference `idem/...` needs dist/).
      const source = code
        .replace(/from 'idem\/(\w+)'/g, (_m, sub: string) => `from '${ROOT}src/${sub}/index.ts'`)
        .replace("'./data/example.db'", JSON.stringify(dir.file('example.db')));
      const file = dir.file('example.mts');
      writeFileSync(file, source);
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file], {
        cwd: ROOT,
      });
      const lines = stdout.trim().split('\n');
      assert.equal(lines[0], '1 true');
      assert.match(lines[1]!, /^1 invoice\.issued \{ amount: 100 \}$/);
      assert.match(lines[2]!, /^2 invoice\.paid \{ amount: 100 \}$/);
      assert.match(lines[3]!, /^2 invoice-42 invoice\.paid$/);
      assert.equal(lines.length, 4);
    } finally {
      await dir.cleanup();
    }
  });
});
