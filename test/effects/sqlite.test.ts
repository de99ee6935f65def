import { describeEffects } from './effects.suite.js';
import { makeSqliteFixture } from './support/fixture.js';

describeEffects('sqlite target', makeSqliteFixture);
