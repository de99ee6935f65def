// `npm run bench`: runs the benchmark scenarios (see docs/benchmarks.md).
import { benchMain } from '../src/bench/index.js';

process.exitCode = await benchMain(process.argv.slice(2));
