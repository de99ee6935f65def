import type { Scenario } from '../types.js';
import { catchUp } from './catchUp.js';
import { consumerGroup } from './consumerGroup.js';
import { consumerPostgres } from './consumerPostgres.js';
import { consumerSqlite } from './consumerSqlite.js';
import { deliveryPostgres, deliverySqlite } from './delivery.js';
import { httpAppend } from './httpAppend.js';
import { idleSubscriptionsScenario } from './idleSubscriptions.js';
import { jetstream } from './jetstream.js';
import { ledgerRetention } from './ledgerRetention.js';
import { liveLatency } from './liveLatency.js';
import { postgresAppend } from './postgresAppend.js';
import { postgresRead } from './postgresRead.js';
import { redelivery } from './redelivery.js';
import { sqliteAppend } from './sqliteAppend.js';
import { testkitVerify } from './testkitVerify.js';

/**
 * Every scenario, in run order (the order of the table in docs/benchmarks.md), with delivery (what
 * the consumer scenarios stand on) after them.
 */
export const SCENARIOS: readonly Scenario[] = [
  sqliteAppend,
  postgresAppend,
  postgresRead,
  httpAppend,
  consumerPostgres,
  consumerSqlite,
  ledgerRetention,
  liveLatency,
  catchUp,
  redelivery,
  deliverySqlite,
  deliveryPostgres,
  idleSubscriptionsScenario,
  jetstream,
  testkitVerify,
  consumerGroup,
];
