/**
 * The behaviour suite of the consumer runtime, written against the target port, so that every target
 * runs it: SQLite and PostgreSQL.
 *
 * ```ts
 * describeConsumer('sqlite target', makeSqliteFixture);
 * ```
 */
import { describeBatchHandler } from './suite/batchHandler.js';
import { describeErrorsAndGaps } from './suite/errors.js';
import { describeLedgerAndGuards } from './suite/ledger.js';
import { describeLifecycleAndMetrics } from './suite/lifecycle.js';
import { describeLedgerRetention } from './suite/retention.js';
import { describeOperations } from './suite/operations.js';
import { describeTarget } from './suite/target.js';
import type { MakeTargetFixture } from './support/targetFixture.js';

export function describeConsumer<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describeLedgerAndGuards(label, make);
  describeErrorsAndGaps(label, make);
  describeBatchHandler(label, make);
  describeLifecycleAndMetrics(label, make);
  describeOperations(label, make);
  describeTarget(label, make);
  describeLedgerRetention(label, make);
}
