import { makeSqliteFixture } from './support/targetFixture.js';
import { describeBatchHandler } from './suites/batchHandler.suite.js';
import { describeErrorsAndGaps } from './suites/errors.suite.js';
import { describeLedgerAndGuards } from './suites/ledger.suite.js';
import { describeLifecycleAndMetrics } from './suites/lifecycle.suite.js';
import { describeTarget } from './suites/target.suite.js';

describeLedgerAndGuards('sqlite target', makeSqliteFixture);
describeErrorsAndGaps('sqlite target', makeSqliteFixture);
describeBatchHandler('sqlite target', makeSqliteFixture);
describeLifecycleAndMetrics('sqlite target', makeSqliteFixture);
describeTarget('sqlite target', makeSqliteFixture);
