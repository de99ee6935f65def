import type { Command } from 'commander';
import type { DeadLetter, DeadLetterSelector } from '../core/subscription.js';
import { validateConsumerName } from '../core/validation.js';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, plural, table } from './output.js';
import { UsageError } from './usageError.js';

interface SelectFlags extends StoreFlags {
  stream?: string;
  id?: string;
  by?: string;
}

const HELP = `
Dead letters are events a consumer could not handle, kept per consumer with the error. While an entity
(stream) has one, that consumer's later events of the stream are parked behind it, in order.

Examples:
  $ idem dlq list billing_v2
  $ idem dlq list billing_v2 --all --json     # include resolved and skipped entries
  $ idem dlq retry billing_v2 --stream invoice-42
  $ idem dlq skip billing_v2 --id 0190a6c2-8e1f-7c3a-9b2d-3f4e5a6b7c8d --by alice`;

export function registerDlq(program: Command, ctx: CliContext): void {
  const dlq = program
    .command('dlq')
    .description("list, retry or skip a consumer's dead letters")
    .addHelpText('after', HELP);

  withStoreOptions(dlq.command('list').description("a consumer's dead letters (parked and retrying)"))
    .argument('<consumer>', 'consumer name')
    .option('--all', 'include resolved and skipped entries')
    .addHelpText('after', '\nExample:\n  $ idem dlq list billing_v2')
    .action(async (consumer: string, flags: StoreFlags & { all?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      const name = validateConsumerName(consumer, '<consumer>');
      const list = await withStore(flags, ctx.env, (store) =>
        store.deadLetters.list(name, flags.all ? { all: true } : {}),
      );
      out.data(list);
      if (list.length === 0) {
        out.note(`no dead letters for ${name}`);
        return;
      }
      out.line(
        table(
          ['POSITION', 'STREAM@VERSION', 'TYPE', 'STATUS', 'ATTEMPTS', 'REASON / BEHIND', 'ID'],
          list.map(row),
        ),
      );
    });

  for (const verb of ['retry', 'skip'] as const) {
    const cmd = withStoreOptions(
      dlq
        .command(verb)
        .description(
          verb === 'retry'
            ? "redeliver an entity's parked events in their original order"
            : "discard an entity's parked events (recording who skipped them)",
        ),
    )
      .argument('<consumer>', 'consumer name')
      .option('--stream <stream>', 'the entity whose parked events to act on')
      .option('--id <id>', "an event id: act on that event's entity");
    if (verb === 'skip') cmd.option('--by <name>', 'who skips (recorded; default: $USER)');
    cmd
      .addHelpText(
        'after',
        `\nExamples:\n  $ idem dlq ${verb} billing_v2 --stream invoice-42\n  $ idem dlq ${verb} billing_v2 --id <event-id>`,
      )
      .action(async (consumer: string, flags: SelectFlags) => {
        const out = new Output(ctx.io, flags.json === true);
        const name = validateConsumerName(consumer, '<consumer>');
        const selector = selectorFrom(flags);
        const n = await withStore(flags, ctx.env, (store) =>
          verb === 'retry'
            ? store.deadLetters.retry(name, selector)
            : store.deadLetters.skip(name, selector, { by: flags.by ?? ctx.env.USER ?? 'cli' }),
        );
        out.data({ consumer: name, ...selector, [verb === 'retry' ? 'retried' : 'skipped']: n });
        const what =
          'stream' in selector ? `stream ${selector.stream}` : `the entity of event ${selector.id}`;
        out.line(
          `${verb === 'retry' ? 'retrying' : 'skipped'} ${plural(n, 'dead letter')} of ${what} for ${name}`,
        );
      });
  }
}

function selectorFrom(flags: SelectFlags): DeadLetterSelector {
  if ((flags.stream === undefined) === (flags.id === undefined))
    throw new UsageError('give exactly one of --stream and --id');
  return flags.stream !== undefined ? { stream: flags.stream } : { id: flags.id! };
}

function row(d: DeadLetter): string[] {
  const e = d.event;
  const why = d.behind ? `parked behind ${d.behind}` : `${d.reason}${d.error ? `: ${d.error.message}` : ''}`;
  return [String(e.position), `${e.stream}@${e.version}`, e.type, d.status, String(d.attempts), why, e.id];
}
