// `idem/testkit`: proves a user's own consumer against the production checklist of the pattern.
export { verifyConsumer } from './verifyConsumer.js';
export type { VerifyConsumerOptions } from './verifyConsumer.js';
export { STATEMENTS } from './checklist.js';
export type { Counterexample, ScenarioResult, StatementResult, VerifyReport } from './checklist.js';
export type { StatementId, ScenarioId } from './scenarios.js';
export type { StateDifference } from './stateDiff.js';
export type { TestEvent } from './history.js';
export type { Derivation } from './derive.js';
export type { ConsumerFactory, Deployment, StateReader } from './subject.js';
export { sqliteBackend } from './backend.js';
export type { VerifyBackend, Workspace } from './backend.js';
export { given } from './givenWhenThen.js';
export type { Given, Outcome, When, WhenOptions } from './givenWhenThen.js';
export type { EffectRow } from './effectSpy.js';
