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

reset and delete are refused with exit code 3 (consumer_busy) while a subscriber holds the lease.`;

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
          list.map((c) => [
            c.name,
            c.status,
            String(c.position),
            String(c.head),
            String(c.lag),
            String(c.lagSeconds),
            String(c.parked),
            c.owner ?? '-',
            describeFilter(c.filter),
          ]),
        ),
      );
    });

  const consumer = program
    .command('consumer')
    .description('show, reset or delete one consumer')
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
  if (c.lastError)
    lines.push(`last error ${c.lastError.name ? `${c.lastError.name}: ` : ''}${c.lastError.message}`);
  if (c.failedEvent) {
    const e = c.failedEvent;
    lines.push(`failed at  #${e.position} ${e.stream}@${e.version} ${e.type} id=${e.id}`);
  }
  return lines.join('\n');
}
