import type { Command } from 'commander';
import type { ConsumerInfo } from '../core/subscription.js';
import { validateConsumerName } from '../core/validation.js';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, table } from './output.js';
import { requireInteger } from './parse.js';

const LIST_HELP = `
Lists the named consumers with their cursor (last acknowledged position), lag and status.

Examples:
  $ idem consumers
  $ idem consumers --json | jq '.[] | select(.lag > 1000) | .name'`;

const CONSUMER_HELP = `
Examples:
  $ idem consumer show billing_v2
  $ idem consumer reset billing_v2 --to 0      # replay everything (while no subscriber owns it)
  $ idem consumer delete billing_v1            # remove the cursor and dead letters
  $ idem consumer release billing_v2           # end the lease of an owner that is gone
  $ idem consumer pause billing_v2             # its owner receives nothing new; the cursor stays
  $ idem consumer resume billing_v2            # delivery continues at the cursor

reset and delete are refused with exit code 3 (consumer_busy) while a subscriber holds the lease.
release ends that lease at once (the old owner is fenced); an unknown name exits 1 (not_found).`;

const RELEASE_HELP = `
Ends the consumer's lease now: the owner is cleared and the epoch moves on, so the old owner's next
renewal, ack or park is refused (fenced) and another subscriber may take the consumer at once.
For an owner that is gone but whose lease has not run out, or a lease stored with an absurd end.
A consumer without an owner is left as it is. Exit codes: 0 released, 1 not_found, 2 invalid name.

Example:
  $ idem consumer release billing_v2
  $ idem consumer release billing_v2 --url http://127.0.0.1:4500 --token "$ADMIN_TOKEN"`;

const PAUSE_HELP = `
Pauses the consumer: its owner commits and acknowledges what it has in flight, then receives
nothing new until the consumer is resumed; the cursor stays where it is. The pause is stored with
the consumer, so it outlasts restarts of the server and of the consumer. The owner learns of it at
once when it runs against the same server (or process), else at its next lease renewal (a third of
the lease). Status: paused. Exit codes: 0 paused, 1 not_found, 2 invalid name.

Examples:
  $ idem consumer pause billing_v2
  $ idem consumer pause billing_v2 --by "ops: provider maintenance"
  $ idem consumer resume billing_v2`;

export function registerConsumers(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program.command('consumers').description('list durable consumers with cursor, lag and status'),
  )
    .addHelpText('after', LIST_HELP)
    .action(async (flags: StoreFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const list = await withStore(flags, ctx.env, (store) => store.consumers.list());
      out.data(list);
      if (list.length === 0) {
        out.note('no consumers');
        return;
      }
      out.line(
        table(
          ['NAME', 'STATUS', 'POSITION', 'HEAD', 'LAG', 'LAG_S', 'PARKED', 'OWNER', 'FILTER'],
          list.flatMap((c) => [
            [
              c.name,
              c.error ? `${c.status} (error: ${c.error.code})` : c.status,
              String(c.position),
              String(c.head),
              String(c.lag),
              String(c.lagSeconds),
              String(c.parked),
              c.owner ?? '-',
              describeFilter(c.filter) + (c.partitions ? ` partitions=${c.partitions.length}` : ''),
            ],
            // A consumer group: one row per partition under it.
            ...(c.partitions ?? []).map((p) => [
              `  ${c.name}#${p.index}`,
              p.status,
              String(p.position),
              String(c.head),
              String(p.lag),
              '',
              '',
              p.owner ?? '-',
              `epoch ${p.epoch}`,
            ]),
          ]),
        ),
      );
    });

  const consumer = program
    .command('consumer')
    .description('show, reset, release, pause, resume or delete one consumer')
    .addHelpText('after', CONSUMER_HELP);

  withStoreOptions(
    consumer.command('show').description("a consumer's cursor, lag, owner, status and last error"),
  )
    .argument('<name>', 'consumer name')
    .addHelpText('after', '\nExample:\n  $ idem consumer show billing_v2 --json')
    .action(async (name: string, flags: StoreFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const info = await withStore(flags, ctx.env, (store) =>
        store.consumers.get(validateConsumerName(name, '<name>')),
      );
      out.data(info);
      out.line(describeConsumer(info));
    });

  withStoreOptions(consumer.command('reset').description("move a consumer's cursor back or forward"))
    .argument('<name>', 'consumer name')
    .requiredOption(
      '--to <position>',
      'the new cursor: the last position to treat as handled (0 = replay all)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  $ idem consumer reset billing_v2 --to 0\n  $ idem consumer reset billing_v2 --to 1200',
    )
    .action(async (name: string, flags: StoreFlags & { to?: string }) => {
      const out = new Output(ctx.io, flags.json === true);
      const to = requireInteger(flags.to, '--to', 0);
      const info = await withStore(flags, ctx.env, async (store) => {
        const n = validateConsumerName(name, '<name>');
        await store.consumers.reset(n, to);
        return store.consumers.get(n);
      });
      out.data(info);
      out.line(
        `consumer ${info.name} reset to position ${info.position} (head ${info.head}, lag ${info.lag})`,
      );
    });

  withStoreOptions(
    consumer.command('delete').description('remove a consumer, its cursor and its dead letters'),
  )
    .argument('<name>', 'consumer name')
    .addHelpText('after', '\nExample:\n  $ idem consumer delete billing_v1')
    .action(async (name: string, flags: StoreFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      await withStore(flags, ctx.env, (store) =>
        store.consumers.delete(validateConsumerName(name, '<name>')),
      );
      out.data({ deleted: name });
      out.line(`consumer ${name} deleted`);
    });

  withStoreOptions(
    consumer.command('release').description("end a consumer's lease now (fences the old owner)"),
  )
    .argument('<name>', 'consumer name')
    .addHelpText('after', RELEASE_HELP)
    .action(async (name: string, flags: StoreFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const info = await withStore(flags, ctx.env, async (store) => {
        const n = validateConsumerName(name, '<name>');
        await store.consumers.release(n);
        return store.consumers.get(n);
      });
      out.data(info);
      out.line(`consumer ${info.name} released (status ${info.status}, epoch ${info.epoch})`);
    });

  withStoreOptions(
    consumer.command('pause').description('stop delivery to a consumer, keeping its cursor (stored)'),
  )
    .argument('<name>', 'consumer name')
    .option('--by <label>', 'who pauses it, recorded with the pause (default: user@host)')
    .addHelpText('after', PAUSE_HELP)
    .action(async (name: string, flags: StoreFlags & { by?: string }) => {
      const out = new Output(ctx.io, flags.json === true);
      const info = await withStore(flags, ctx.env, async (store) => {
        const n = validateConsumerName(name, '<name>');
        await store.consumers.pause(n, flags.by === undefined ? {} : { by: flags.by });
        return store.consumers.get(n);
      });
      out.data(info);
      out.line(`consumer ${info.name} paused at position ${info.position} (lag ${info.lag})`);
    });

  withStoreOptions(consumer.command('resume').description('resume delivery to a paused consumer'))
    .argument('<name>', 'consumer name')
    .addHelpText('after', PAUSE_HELP)
    .action(async (name: string, flags: StoreFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const info = await withStore(flags, ctx.env, async (store) => {
        const n = validateConsumerName(name, '<name>');
        await store.consumers.resume(n);
        return store.consumers.get(n);
      });
      out.data(info);
      out.line(`consumer ${info.name} resumed at position ${info.position} (status ${info.status})`);
    });
}

export function describeFilter(f: ConsumerInfo['filter']): string {
  const parts: string[] = [];
  if (f.types) parts.push(`types=${f.types.join(',')}`);
  if (f.categories) parts.push(`categories=${f.categories.join(',')}`);
  if (f.streamPrefixes) parts.push(`prefixes=${f.streamPrefixes.join(',')}`);
  return parts.length === 0 ? '(all events)' : parts.join(' ');
}

function describeConsumer(c: ConsumerInfo): string {
  const lines = [
    `consumer   ${c.name}`,
    `status     ${c.status}`,
    `filter     ${describeFilter(c.filter)}`,
    `position   ${c.position} (head ${c.head})`,
    `lag        ${c.lag} events, ${c.lagSeconds} s`,
    `parked     ${c.parked}`,
    `owner      ${c.owner ?? '-'} (epoch ${c.epoch}${c.leaseExpiresAt ? `, lease until ${c.leaseExpiresAt}` : ''})`,
    `created    ${c.createdAt}`,
    `updated    ${c.updatedAt}`,
  ];
  if (c.pause)
    lines.push(`paused     ${c.pause.reason} since ${c.pause.since}${c.pause.by ? ` by ${c.pause.by}` : ''}`);
  if (c.partitions) {
    lines.push(`partitions ${c.partitions.length}`);
    for (const p of c.partitions) {
      lines.push(
        `  #${String(p.index).padEnd(3)} position ${p.position}  lag ${p.lag}  epoch ${p.epoch}  owner ${p.owner ?? '-'}`,
      );
    }
  }
  if (c.error) lines.push(`error      ${c.error.code}: ${c.error.message}`);
  if (c.lastError)
    lines.push(`last error ${c.lastError.name ? `${c.lastError.name}: ` : ''}${c.lastError.message}`);
  if (c.failedEvent) {
    const e = c.failedEvent;
    lines.push(`failed at  #${e.position} ${e.stream}@${e.version} ${e.type} id=${e.id}`);
  }
  return lines.join('\n');
}
