// A fault-scenario relay process: `node --import tsx relayChild.ts '<json config>'`.
// stdout: `running` once the relay started; it then relays until it is killed.
import { writeSync } from 'node:fs';
import type { EventStore } from '../../src/core/eventStore.js';
import { createJetStreamRelay } from '../../src/nats/index.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';

export interface RelayChildConfig {
  store: { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string };
  nats: string;
  stream: string;
  leaseTtlMs: number;
}

const say = (line: string): void => {
  writeSync(1, `${line}\n`);
};

const config = JSON.parse(process.argv[2] ?? '{}') as RelayChildConfig;
const store: EventStore =
  config.store.kind === 'sqlite'
    ? await openSqliteStore({ path: config.store.path, durability: 'normal' })
    : await openPostgresStore({ connectionString: config.store.url, poolSize: 2 });
const relay = createJetStreamRelay({
  store,
  servers: config.nats,
  stream: config.stream,
  leaseTtlMs: config.leaseTtlMs,
});
await relay.start();
say('running');
