import type { Scenario } from '../types.js';
import { catchUp } from './catchUp.js';
import { consumerPostgres } from './consumerPostgres.js';
import { consumerSqlite } from './consumerSqlite.js';
import { deliveryPostgres, deliverySqlite } from './delivery.js';
import { idleSubscriptionsScenario } from './idleSubscriptions.js';
import { liveLatency } from './liveLatency.js';
import { postgresAppend } from './postgresAppend.js';
import { redelivery } from './redelivery.js';
import { sqliteAppend } from './sqliteAppend.js';

/**
 * Every scenario, in run order: the numbering (1, 2, 3, 4, 5, 6, 7), with delivery (what the
 * consumer scenarios 3 and 4 stand on) after them.
 */
export const SCENARIOS: readonly Scenario[] = [
  sqliteAppend,
  postgresAppend,
  consumerPostgres,
  consumerSqlite,
  liveLatency,
  catchUp,
  redelivery,
  deliverySqlite,
  deliveryPostgres,
  idleSubscriptionsScenario,
];
