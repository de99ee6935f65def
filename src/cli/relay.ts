import type { Command } from 'commander';
import { InvalidInputError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import { sleep } from '../core/backoff.js';
import { createJetStreamRelay, type JetStreamRelay } from '../nats/index.js';
import type { CliContext } from './context.js';
import { describeTarget, withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output } from './output.js';
import { collect, filterFrom, parseInteger } from './parse.js';

interface RelayFlags extends StoreFlags {
  nats?: string;
  stream?: string;
  subject?: string;
  name?: string;
  create?: boolean;
  storage?: string;
  replicas?: string;
  duplicateWindow?: string;
  type?: string[];
  category?: string[];
  prefix?: string[];
  progress?: string;
  leaseTtl?: string;
}

const HELP = `
Publishes every committed event of the store, in position order, into a NATS JetStream stream, and
keeps doing so for new events until Ctrl-C (SIGINT) or SIGTERM. Each message has Nats-Msg-Id = the
event id, headers Idem-Stream, Idem-Version, Idem-Position, Idem-Type, Idem-Recorded-At and
Idem-Metadata, and the event's data as its body (see docs/nats.md).

The relay is a durable consumer of the store (default name nats_relay.<stream>): its cursor moves
after JetStream acknowledged the publishes, and on start it resumes after the position of the
stream's last message, so a restart never publishes an event twice. A second relay with the same
name waits as a standby. Progress goes to stderr; with --json, one status object per line on stdout.
Needs the NATS client packages: npm install @nats-io/transport-node @nats-io/jetstream

Examples:
  $ idem relay --nats nats://127.0.0.1:4222 --stream IDEM --create
  $ idem relay --nats nats://127.0.0.1:4222 --stream INVOICES --category invoice --postgres postgres://127.0.0.1/app`;

export function registerRelay(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('relay')
      .description("publish the store's events into a NATS JetStream stream, exactly once, in order")
      .option('--nats <url>', 'NATS server URL (repeat or comma-separate for a cluster)')
      .option('--stream <name>', 'JetStream stream to publish into')
      .option('--subject <subject>', 'subject of every message (default: <stream>.events)')
      .option('--name <consumer>', "the relay's consumer name in the store (default: nats_relay.<stream>)")
      .option('--create', 'create the JetStream stream when it does not exist')
      .option('--storage <kind>', 'with --create: file | memory (default file)')
      .option('--replicas <n>', 'with --create: copies of each message in a cluster (default 1)')
      .option('--duplicate-window <ms>', "with --create: JetStream's de-duplication window")
      .option('--type <type>', 'only this event type (repeatable)', collect)
      .option('--category <category>', 'only streams of this category (repeatable)', collect)
      .option('--prefix <prefix>', 'only streams starting with this prefix (repeatable)', collect)
      .option('--lease-ttl <ms>', "the relay consumer's lease: how soon a standby takes over (default 10000)")
      .option('--progress <seconds>', 'seconds between progress lines (default 5)'),
  )
    .addHelpText('after', HELP)
    .action(async (flags: RelayFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      if (!flags.nats) throw new InvalidInputError('--nats', 'is required (a NATS server URL)');
      if (!flags.stream) throw new InvalidInputError('--stream', 'is required (a JetStream stream name)');
      if (flags.storage !== undefined && flags.storage !== 'file' && flags.storage !== 'memory')
        throw new InvalidInputError('--storage', `must be file or memory (got "${flags.storage}")`);
      const replicas = parseInteger(flags.replicas, '--replicas', 1);
      const duplicateWindowMs = parseInteger(flags.duplicateWindow, '--duplicate-window', 1);
      const leaseTtlMs = parseInteger(flags.leaseTtl, '--lease-ttl', 1);
      const progressMs = (parseInteger(flags.progress, '--progress', 1) ?? 5) * 1000;
      const signal = ctx.stopSignal();
      await withStore(flags, ctx.env, async (store, target) => {
        const relay = createJetStreamRelay({
          store,
          servers: flags.nats!.split(','),
          stream: flags.stream!,
          filter: filterFrom(flags),
          ...(flags.subject !== undefined && { subject: flags.subject }),
          ...(flags.name !== undefined && { name: flags.name }),
          ...(leaseTtlMs !== undefined && { leaseTtlMs }),
          ...(flags.create === true && {
            create: {
              ...(flags.storage !== undefined && { storage: flags.storage as 'file' | 'memory' }),
              ...(replicas !== undefined && { replicas }),
              ...(duplicateWindowMs !== undefined && { duplicateWindowMs }),
            },
          }),
          onError: (err) =>
            out.note(`idem: relay: ${err.message}; starting over from the stream's last message`),
        });
        await relay.start();
        out.note(
          `idem: relaying ${describeTarget(target)} into JetStream stream ${flags.stream} as consumer ` +
            `"${relay.status().consumer}"; Ctrl-C to stop`,
        );
        try {
          await report(relay, store, out, signal, progressMs);
        } finally {
          await relay.stop();
        }
        const s = relay.status();
        // A failed relay's whenCaughtUp rejects with the error that stopped it (its code sets the exit code).
        if (s.state === 'failed') await relay.whenCaughtUp();
        out.note(
          `idem: relay stopped at position ${s.position}: ${s.published} published, ${s.duplicates} duplicates`,
        );
      });
    });
}

/** Prints the relay's progress every `everyMs` until the signal aborts or the relay stops running. */
async function report(
  relay: JetStreamRelay,
  store: EventStore,
  out: Output,
  signal: AbortSignal,
  everyMs: number,
): Promise<void> {
  let next = Date.now() + everyMs;
  while (!signal.aborted && relay.status().state === 'running') {
    await sleep(200, signal);
    if (signal.aborted || Date.now() < next) continue;
    next += everyMs;
    const s = relay.status();
    const head = await store.headPosition();
    out.data({ ...s, head });
    out.note(
      `relayed through position ${s.position} of ${head}: ${s.published} published, ` +
        `${s.duplicates} duplicates, ${s.restarts} restarts`,
    );
  }
}
