import { after } from 'node:test';
import { requireOrSkip } from '../support/services.js';
import { describeEffects } from './effects.suite.js';
import { postgresFixtures } from './support/fixture.js';

const skip = await requireOrSkip('postgres');
const fixtures = postgresFixtures();
after(() => fixtures.close());
describeEffects('postgres target', fixtures.make, skip);
