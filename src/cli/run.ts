// Runs the `idem` command from source: `node --import tsx src/cli/run.ts <verb> ...` (tests and development).
import { main } from './main.js';

process.exitCode = await main(process.argv);
