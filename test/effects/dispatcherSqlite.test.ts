// The dispatcher suite runs dispatchers in child processes (two racing, one killed mid-call), so it
// has its own files, which `npm run test:fast` leaves out.
import { describeDispatcher } from './dispatcher.suite.js';
import { makeSqliteFixture } from './support/fixture.js';

describeDispatcher('sqlite target', makeSqliteFixture);
