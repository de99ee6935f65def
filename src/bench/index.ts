// The benchmark harness, for `npm run bench` and `idem bench`.
export { runBench, benchScenarioNames, type BenchOptions } from './runBench.js';
export { formatTable } from './report.js';
export type { BenchReport, BenchRow, SkippedScenario } from './types.js';
