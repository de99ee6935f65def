import { describe } from 'node:test';
import { requireOrSkip } from '../support/services.js';
import { makePostgresFixture } from './support/targetFixture.js';
import { describeErrorsAndGaps } from './suites/errors.suite.js';
import { describeLedgerAndGuards } from './suites/ledger.suite.js';
import { describeLifecycleAndMetrics } from './suites/lifecycle.suite.js';
import { describeTarget } from './suites/target.suite.js';

// Each test gets its own PostgreSQL database (dropped afterwards); skipped when PostgreSQL is down,
// unless IDEM_REQUIRE_SERVICES=1.
const skip = await requireOrSkip('postgres');
describe('postgres target', { skip }, () => {
  describeLedgerAndGuards('postgres target', makePostgresFixture);
  describeErrorsAndGaps('postgres target', makePostgresFixture);
  describeLifecycleAndMetrics('postgres target', makePostgresFixture);
  describeTarget('postgres target', makePostgresFixture);
});
