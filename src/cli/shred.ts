import type { Command } from 'commander';
import { validateSubject } from '../core/encryption.js';
import { InvalidInputError } from '../core/errors.js';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output } from './output.js';
import { UsageError } from './usageError.js';

const HELP = `
Crypto-shredding: deletes SUBJECT's key from the store's key table (a store whose events are
encrypted with encrypt: { subject }). The events stay, with their ids, versions and positions, and
read back with data null and metadata.shredded true. It cannot be undone. With --url, the server's
store does it (admin scope). A store whose keys live in your own key provider: delete them there.
See docs/data-lifecycle.md.

Examples:
  $ idem shred customer-42 --yes --db ./data/idem.db
  $ idem shred customer-42 --yes --url http://127.0.0.1:4680 --json`;

/** `idem shred SUBJECT`. */
export function registerShred(program: Command, ctx: CliContext): void {
  withStoreOptions(program.command('shred').description("delete a subject's key: its events' data is erased"))
    .argument('<subject>', 'the subject id whose key to delete')
    .option('--yes', 'confirm: the data cannot be recovered afterwards')
    .addHelpText('after', HELP)
    .action(async (subject: string, flags: StoreFlags & { yes?: boolean; json?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      const s = validateSubject(subject, '<subject>');
      if (flags.yes !== true)
        throw new UsageError(
          `shred deletes the key of ${s} for good: its events' data is lost. Add --yes to confirm`,
        );
      const r = await withStore(flags, ctx.env, async (store) => {
        if (!store.shred) throw new InvalidInputError('--url', 'this store keeps no subject keys');
        return store.shred(s);
      });
      out.data(r);
      out.line(
        r.shredded
          ? `${s}: key deleted; its events read back with data null`
          : `${s}: no key (nothing to shred)`,
      );
    });
}
