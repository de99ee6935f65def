// Fault suite, scenario 1 at the quick size: consumer processes SIGKILLed in the handler, after commit, during ack.
import { describeQuickFaults } from './quickRun.js';

describeQuickFaults('faults: consumer SIGKILL loop', [
  'consumer-sigkill-sqlite',
  'consumer-sigkill-postgres',
]);
