// The folders of src/ form layers that point one way: each folder imports only the folders listed
// for it below, and the folder graph has no cycle. A new folder, or an import that climbs a layer,
// fails here until the table says where it belongs.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const SRC = 'src';

/** The folders each folder of src/ may import from ('.' is the root entry point, src/index.ts). */
const ALLOWED: Record<string, readonly string[]> = {
  core: [],
  subscriptions: ['core'],
  memory: ['core', 'subscriptions'],
  sqlite: ['core', 'subscriptions'],
  postgres: ['core', 'subscriptions'],
  effects: ['core'],
  consumer: ['core', 'effects'],
  client: ['core'],
  server: ['core', 'effects'],
  nats: ['core'],
  commands: ['core'],
  testkit: ['core', 'sqlite', 'consumer', 'effects'],
  '.': ['core', 'memory', 'consumer', 'effects', 'commands'],
  demo: ['core', 'sqlite', 'consumer', 'client', 'server'],
  bench: ['core', 'sqlite', 'postgres', 'consumer', 'client', 'server', 'nats', 'testkit'],
  cli: [
    'core',
    'memory',
    'sqlite',
    'postgres',
    'subscriptions',
    'effects',
    'consumer',
    'client',
    'server',
    'bench',
    'demo',
    'nats',
    'testkit',
  ],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(path);
    return d.name.endsWith('.ts') ? [path] : [];
  });
}

function folderOf(path: string): string {
  const parts = relative(SRC, path).split('/');
  return parts.length === 1 ? '.' : parts[0]!;
}

/** Every relative import or re-export in `file` (static or dynamic), as a path under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [
    ...text.matchAll(/\b(?:import|export)\s[^;]*?\sfrom\s+'(\.[^']+)'/g),
    ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g),
  ].map((m) => m[1]!);
  return specifiers.map((s) => resolve(dirname(file), s));
}

/** Folder -> folder -> one importing file, for the message. */
function folderGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    for (const target of importsOf(file)) {
      const to = folderOf(relative(process.cwd(), target));
      if (to === from) continue;
      const edges = graph.get(from) ?? new Map<string, string>();
      edges.set(to, edges.get(to) ?? relative(SRC, file));
      graph.set(from, edges);
    }
  }
  return graph;
}

describe('src/ layers', () => {
  const graph = folderGraph();

  it('every folder of src/ has a place in the layer table', () => {
    const folders = new Set(sourceFiles(SRC).map(folderOf));
    const missing = [...folders].filter((f) => !(f in ALLOWED));
    assert.deepEqual(missing, [], `folders without a layer: ${missing.join(', ')}`);
  });

  it('each folder imports only the folders below it', () => {
    const wrong: string[] = [];
    for (const [from, edges] of graph) {
      for (const [to, file] of edges) {
        if (!ALLOWED[from]?.includes(to)) wrong.push(`${file} imports ${to}/`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('core imports no other folder', () => {
    assert.deepEqual([...(graph.get('core')?.keys() ?? [])], []);
  });

  it('the layer table itself has no cycle', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (folder: string, path: string[]): void => {
      if (state.get(folder) === 'done') return;
      assert.notEqual(state.get(folder), 'visiting', `cycle: ${[...path, folder].join(' -> ')}`);
      state.set(folder, 'visiting');
      for (const next of ALLOWED[folder] ?? []) visit(next, [...path, folder]);
      state.set(folder, 'done');
    };
    for (const folder of Object.keys(ALLOWED)) visit(folder, []);
  });
});
