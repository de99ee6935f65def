// The dispatcher suite runs dispatchers in child processes (two racing, one killed mid-call), so it
// has its own files, which `npm run test:fast` leaves out.
import { after } from 'node:test';
import { requireOrSkip } from '../support/services.js';
import { describeDispatcher } from './dispatcher.suite.js';
import { postgresFixtures } from './support/fixture.js';

const skip = await requireOrSkip('postgres');
const fixtures = postgresFixtures();
after(() => fixtures.close());
describeDispatcher('postgres target', fixtures.make, skip);
