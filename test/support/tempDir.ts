import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TempDir {
  /** Absolute path of the new, empty directory. */
  path: string;
  /** `join(path, name)`. */
  file(name: string): string;
  /** Removes the directory and everything in it, unless IDEM_KEEP_TEST_DATA=1. Safe to call twice. */
  cleanup(): Promise<void>;
}

/**
 * Creates an empty directory under the OS temp dir (prefix `idem-test-`). Call `cleanup()` in a
 * `finally`. Set IDEM_KEEP_TEST_DATA=1 to keep it for debugging; its path is printed then.
 */
export function tempDir(prefix = 'idem-test-'): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  let cleaned = false;
  return {
    path,
    file: (name) => join(path, name),
    cleanup: () => {
      if (cleaned) return Promise.resolve();
      cleaned = true;
      if (process.env.IDEM_KEEP_TEST_DATA === '1') {
        console.error(`# kept test data in ${path}`);
        return Promise.resolve();
      }
      rmSync(path, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
      return Promise.resolve();
    },
  };
}
