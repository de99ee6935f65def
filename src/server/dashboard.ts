/**
 * The dashboard at `/`: three static files from the package's `dashboard/` folder (a page, a script,
 * a style sheet), read once and served by the server itself. The page loads nothing from elsewhere,
 * and its Content-Security-Policy lets it load nothing but these files and call nothing but this server.
 */
import { readFileSync } from 'node:fs';

export interface DashboardFile {
  body: string;
  type: string;
}

/** `src/server` and `dist/server` both sit two folders below the package root. */
const ROOT = new URL('../../dashboard/', import.meta.url);

export const DASHBOARD_FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
};

export const DASHBOARD_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

const cache = new Map<string, DashboardFile>();

/** The file served at `path`, read on first use. */
export function dashboardFile(path: string): DashboardFile {
  let f = cache.get(path);
  if (!f) {
    const spec = DASHBOARD_FILES[path]!;
    f = { body: readFileSync(new URL(spec.file, ROOT), 'utf8'), type: spec.type };
    cache.set(path, f);
  }
  return f;
}
