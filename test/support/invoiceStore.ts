import { openSqliteStore } from '../../src/sqlite/index.js';

/**
 * Writes a SQLite store at `path` holding `count` events of type `invoice.issued`, one in each of
 * the streams `invoice-1` to `invoice-<count>` (data `{ i }`), and closes it: the log the CLI's
 * rebuild tests read.
 */
export async function writeInvoiceStore(path: string, count: number): Promise<void> {
  const store = await openSqliteStore({ path });
  try {
    for (let i = 1; i <= count; i++)
      await store.append(`invoice-${i}`, [{ type: 'invoice.issued', data: { i } }]);
  } finally {
    await store.close();
  }
}
