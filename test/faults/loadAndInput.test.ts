// Fault suite, scenarios 7-9 at the quick size: sustained load; fuzzed HTTP requests and WebSocket frames; abuse.
import { describeQuickFaults } from './quickRun.js';

describeQuickFaults('faults: load and bad input', [
  'load-8-appenders-4-consumers',
  'load-8-appenders-4-consumers-postgres',
  'bad-input-fuzz',
  'abuse',
]);
