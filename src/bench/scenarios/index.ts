import type { Scenario } from '../types.js';
import { sqliteAppend } from './sqliteAppend.js';

/** Every scenario, in run order. */
export const SCENARIOS: readonly Scenario[] = [sqliteAppend];
