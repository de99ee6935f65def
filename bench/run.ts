// Runs the benchmark scenarios from the TypeScript sources: `idem bench` (see docs/benchmarks.md)
// without a build. `npm run bench` builds dist/ and runs the built `idem bench` instead.
import { main } from '../src/cli/main.js';

process.exitCode = await main([process.argv[0]!, 'idem', 'bench', ...process.argv.slice(2)]);
