import { describeDispatcher } from './dispatcher.suite.js';
import { describeEffects } from './effects.suite.js';
import { makeSqliteFixture } from './support/fixture.js';

describeEffects('sqlite target', makeSqliteFixture);
describeDispatcher('sqlite target', makeSqliteFixture);
