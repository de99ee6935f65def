// Runs named fault scenarios at the quick size and asserts their counts (not their timings).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runFaults } from '../../faults/runFaults.js';

export const FAULTS_SEED = Number(process.env.IDEM_FAULTS_SEED ?? Date.now() % 2 ** 31);

export function describeQuickFaults(title: string, names: readonly string[]): void {
  describe(`${title} (quick size, seed ${FAULTS_SEED}; replay with npm run faults -- --size quick --seed ${FAULTS_SEED})`, () => {
    for (const name of names) {
      it(name, async (t) => {
        const [r] = await runFaults({ size: 'quick', seed: FAULTS_SEED, only: [name] });
        assert.ok(r && r.name === name, `scenario ${name} ran`);
        if (r.skipped !== undefined) {
          t.skip(r.skipped);
          return;
        }
        console.log(
          `# ${r.name}: faults=${r.faults} events=${r.events} delivered=${r.delivered} duplicates=${r.duplicates} lost=${r.lost} doubled=${r.doubled} out-of-order=${r.outOfOrder}; ${r.notes.join('; ')}`,
        );
        assert.equal(r.error, undefined, r.error);
        assert.ok(r.faultCount > 0 || name.startsWith('load'), 'faults were injected');
        assert.ok(r.events > 0, 'events were written');
        assert.equal(r.lost, 0, 'lost');
        assert.equal(r.doubled, 0, 'doubled');
        assert.equal(r.outOfOrder, 0, 'out of order');
      });
    }
  });
}
