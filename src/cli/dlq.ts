import type { Command } from 'commander';
import type {
  DeadLetter,
  DeadLetterBulkResult,
  DeadLetterBulkSkipOptions,
  DeadLetterSelector,
} from '../core/subscription.js';
import { requireInteger } from './parse.js';
import { validateConsumerName } from '../core/validation.js';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, plural, table } from './output.js';
import { UsageError } from './usageError.js';

interface SelectFlags extends StoreFlags {
  stream?: string;
  id?: string;
  all?: boolean;
  error?: string;
  limit?: string;
  by?: string;
}

const HELP = `
Dead letters are events a consumer could not handle, kept per consumer with the error. While an entity
(stream) has one, that consumer's later events of the stream are parked behind it, in order.

Examples:
  $ idem dlq list billing_v2
  $ idem dlq list billing_v2 --all --json     # include resolved and skipped entries
  $ idem dlq retry billing_v2 --stream invoice-42
  $ idem dlq skip billing_v2 --id 0190a6c2-8e1f-7c3a-9b2d-3f4e5a6b7c8d --by alice
  $ idem dlq retry billing_v2 --all                       # every parked entity, in pages
  $ idem dlq retry billing_v2 --error ECONNREFUSED --limit 1000
  $ idem dlq skip billing_v2 --error "card declined" --by alice`;

const BULK_HELP = `
--all acts on every entity (stream) with a dead letter; --error TEXT on those whose dead letter's
error has that code or name, or a message containing TEXT; --limit N on at most N entities (in
stream-name order). Entities are taken a page (500) at a time, one transaction each, so memory stays
bounded however many there are; progress goes to stderr after each page. A retry redelivers each
entity's events in their original order.`;

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
      .option('--id <id>', "an event id: act on that event's entity")
      .option('--all', 'every entity with a dead letter')
      .option('--error <text>', 'the entities whose error code or name is TEXT, or whose message contains it')
      .option('--limit <n>', 'with --all or --error: at most N entities');
    if (verb === 'skip') cmd.option('--by <name>', 'who skips (recorded; default: $USER)');
    cmd
      .addHelpText(
        'after',
        `${BULK_HELP}\n\nExamples:\n  $ idem dlq ${verb} billing_v2 --stream invoice-42\n  $ idem dlq ${verb} billing_v2 --id <event-id>\n  $ idem dlq ${verb} billing_v2 --all --limit 10000\n  $ idem dlq ${verb} billing_v2 --error ECONNREFUSED`,
      )
      .action(async (consumer: string, flags: SelectFlags) => {
        const out = new Output(ctx.io, flags.json === true);
        const name = validateConsumerName(consumer, '<consumer>');
        if (flags.all === true || flags.error !== undefined) {
          await bulk(verb, name, flags, out);
          return;
        }
        if (flags.limit !== undefined) throw new UsageError('--limit goes with --all or --error');
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

  async function bulk(verb: 'retry' | 'skip', name: string, flags: SelectFlags, out: Output): Promise<void> {
    if (
      flags.stream !== undefined ||
      flags.id !== undefined ||
      (flags.all === true) === (flags.error !== undefined)
    )
      throw new UsageError('give exactly one of --stream, --id, --all and --error');
    const options: DeadLetterBulkSkipOptions = {
      onProgress: (p) =>
        out.note(`${verb === 'retry' ? 'retrying' : 'skipped'} ${progress(p)} (through ${p.last})`),
    };
    if (flags.error !== undefined) options.error = flags.error;
    if (flags.limit !== undefined) options.limit = requireInteger(flags.limit, '--limit', 1);
    const r = await withStore(flags, ctx.env, (store) =>
      verb === 'retry'
        ? store.deadLetters.retryMany(name, options)
        : store.deadLetters.skipMany(name, { ...options, by: flags.by ?? ctx.env.USER ?? 'cli' }),
    );
    out.data({ consumer: name, action: verb, ...r });
    const which = flags.error !== undefined ? ` matching ${JSON.stringify(flags.error)}` : '';
    out.line(
      `${verb === 'retry' ? 'retrying' : 'skipped'} ${progress(r)}${which} for ${name}` +
        (r.done ? '' : `; more remain after ${r.last} (run again to go on)`),
    );
  }
}

function progress(p: DeadLetterBulkResult): string {
  return `${plural(p.events, 'dead letter')} of ${`${p.entities} ${p.entities === 1 ? 'entity' : 'entities'}`}`;
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
