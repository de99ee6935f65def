// `npm run faults [--size quick|full] [--seed N] [--only name] [--json]` (see docs/reliability.md).
import { parseArgs } from 'node:util';
import { formatNotes, formatTable } from './report.js';
import { runFaults } from './runFaults.js';
import { SCENARIOS } from './scenarios/index.js';
import { passed } from './types.js';

const USAGE = `usage: npm run faults -- [--size quick|full] [--seed N] [--only name[,name]] [--json] [--list]`;

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        size: { type: 'string', default: 'full' },
        seed: { type: 'string' },
        only: { type: 'string', multiple: true },
        json: { type: 'boolean', default: false },
        list: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.list) {
    for (const s of SCENARIOS) console.log(`${s.name}: ${s.proves}`);
    return 0;
  }
  const size = values.size;
  if (size !== 'quick' && size !== 'full') {
    console.error(`--size must be quick or full\n${USAGE}`);
    return 2;
  }
  const seed = values.seed === undefined ? Date.now() % 2 ** 31 : Number(values.seed);
  if (!Number.isSafeInteger(seed) || seed < 0) {
    console.error(`--seed must be a non-negative integer\n${USAGE}`);
    return 2;
  }
  const only = (values.only ?? []).flatMap((o) => o.split(',')).filter((o) => o.length > 0);
  if (!values.json)
    console.log(`seed ${seed} (replay with --seed ${seed}), size ${size}, ${new Date().toISOString()}`);
  const results = await runFaults({ size, seed, only, log: (m) => console.error(`# ${m}`) });
  const failed = results.filter((r) => r.skipped === undefined && !passed(r)).length;
  if (values.json) {
    console.log(
      JSON.stringify(
        {
          seed,
          size,
          date: new Date().toISOString(),
          results: results.map((r) => ({ ...r, passed: passed(r) })),
          failed,
        },
        null,
        2,
      ),
    );
  } else {
    console.log(formatTable(results));
    console.log(formatNotes(results));
    console.log(failed === 0 ? 'all scenarios passed' : `${failed} scenario(s) FAILED`);
  }
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
