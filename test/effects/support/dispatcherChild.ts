// A dispatcher in its own process. With `hang`, its mail handler hangs mid-call, so the parent can
// SIGKILL it with the call's outcome unknown. Argument: JSON { target, mailUrl, leaseMs, hang, label }.
import pg from 'pg';
import type { ConsumerTarget } from '../../../src/core/consumerTarget.js';
import { createEffectDispatcher } from '../../../src/effects/dispatcher.js';
import { postgresTarget } from '../../../src/postgres/target.js';
import { sqliteTarget } from '../../../src/sqlite/target.js';
import type { EffectsFixture } from './fixture.js';
import { mailHandler } from './mailServer.js';

const config = JSON.parse(process.argv[2] ?? '{}') as {
  target: EffectsFixture['childTarget'];
  mailUrl: string;
  leaseMs: number;
  hang: boolean;
  label: string;
};
const target: ConsumerTarget<unknown> =
  config.target.kind === 'sqlite'
    ? sqliteTarget(config.target.path)
    : postgresTarget(new pg.Pool({ connectionString: config.target.connectionString, max: 2 }), {
        schema: config.target.schema,
      });
const dispatcher = createEffectDispatcher({
  target,
  handlers: {
    'send-receipt': mailHandler(config.mailUrl, config.hang ? '/send?hang=1' : '/send', config.label),
  },
  leaseMs: config.leaseMs,
  pollIntervalMs: 5,
  batchSize: 25,
});
await dispatcher.start();
process.stdout.write('ready\n');
