// Fault suite, scenarios 2-3 at the quick size: server SIGKILL during appends; network cuts under remote consumers.
import { describeQuickFaults } from './quickRun.js';

describeQuickFaults('faults: server kills and network cuts', [
  'server-sigkill-appends-sqlite',
  'server-sigkill-appends-postgres',
  'network-cuts-remote',
  'network-cuts-remote-postgres',
]);
