import type { Scenario } from '../types.js';
import { consumerPostgres } from './consumerPostgres.js';
import { consumerSqlite } from './consumerSqlite.js';
import { postgresAppend } from './postgresAppend.js';
import { sqliteAppend } from './sqliteAppend.js';

/** Every scenario, in run order. */
export const SCENARIOS: readonly Scenario[] = [
  sqliteAppend,
  postgresAppend,
  consumerPostgres,
  consumerSqlite,
];
