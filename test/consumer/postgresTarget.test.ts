import { after, describe } from 'node:test';
import { requireOrSkip } from '../support/services.js';
import { postgresFixtures } from './support/targetFixture.js';
import { describeErrorsAndGaps } from './suites/errors.suite.js';
import { describeLedgerAndGuards } from './suites/ledger.suite.js';
import { describeLifecycleAndMetrics } from './suites/lifecycle.suite.js';
import { describeTarget } from './suites/target.suite.js';

// One temporary PostgreSQL database for the file, a schema per test (both dropped afterwards);
// skipped when PostgreSQL is down, unless IDEM_REQUIRE_SERVICES=1.
const skip = await requireOrSkip('postgres');
const fixtures = postgresFixtures();
const makePostgresFixture = fixtures.make;
after(() => fixtures.close());
describe('postgres target', { skip }, () => {
  describeLedgerAndGuards('postgres target', makePostgresFixture);
  describeErrorsAndGaps('postgres target', makePostgresFixture);
  describeLifecycleAndMetrics('postgres target', makePostgresFixture);
  describeTarget('postgres target', makePostgresFixture);
});
