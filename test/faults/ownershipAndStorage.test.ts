// Fault suite, scenarios 4-6 at the quick size: split brain, poison events, database faults.
import { describeQuickFaults } from './quickRun.js';

describeQuickFaults('faults: ownership, poison events and database faults', [
  'split-brain-sigstop-sqlite',
  'split-brain-sigstop-postgres',
  'poison-dead-letter-sqlite',
  'poison-dead-letter-postgres',
  'pg-terminate-backend',
  'sqlite-disk-full',
]);
