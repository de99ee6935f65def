// `idem demo`: loaded by the CLI only when the verb runs.
export { runDemo, DEFAULT_DEMO_EVENTS, type DemoOptions } from './runDemo.js';
export { formatReport, type DemoReport, type Sums } from './report.js';
