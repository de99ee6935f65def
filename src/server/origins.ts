/**
 * Cross-site protection. Without tokens every caller may do everything, so a web page the developer
 * visits must not reach the server: requests whose `Host` (DNS rebinding) or `Origin` (a cross-site
 * fetch or WebSocket) is not loopback are refused. With tokens a browser page cannot attach the
 * token to another site's requests, and only the origins listed in `allowedOrigins` (a dashboard
 * hosted elsewhere) and the server's own origin may send requests with an `Origin`.
 */
import { isIP } from 'node:net';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { clip } from './clip.js';

/** `localhost`, `127.0.0.0/8`, `::1` and `::ffff:127.x.y.z`, with or without brackets. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return /^::ffff:127\.\d+\.\d+\.\d+$/.test(h);
}

/** A loopback name as a browser sees it: also `*.localhost`, which browsers resolve to loopback themselves. */
function isLoopbackName(host: string): boolean {
  return isLoopback(host) || host.toLowerCase().endsWith('.localhost');
}

/** The host name of a `Host` header value (`127.0.0.1:4680`, `[::1]:80`, `localhost`). */
function hostName(hostHeader: string): string {
  if (hostHeader.startsWith('[')) return hostHeader.slice(0, hostHeader.indexOf(']') + 1);
  const colon = hostHeader.lastIndexOf(':');
  return colon < 0 ? hostHeader : hostHeader.slice(0, colon);
}

/** `scheme://host[:port]` of a URL, or null when it is not one (`null`, garbage). */
function originOf(text: string): URL | null {
  try {
    const url = new URL(text);
    return url.origin === 'null' ? null : url;
  } catch {
    return null;
  }
}

const HOW_TO =
  'without API tokens the server answers only requests whose Host and Origin are loopback ' +
  '(localhost, 127.0.0.1, [::1]); to serve other hosts or web pages, configure tokens ' +
  '(IDEM_TOKENS or idem serve --tokens FILE) and list the pages allowed with --allow-origin';

export class OriginPolicy {
  private readonly allowed: ReadonlySet<string>;

  constructor(
    private readonly tokensEnabled: boolean,
    allowedOrigins: readonly string[] = [],
  ) {
    this.allowed = new Set(
      allowedOrigins.map((o, i) => {
        const url = typeof o === 'string' ? originOf(o) : null;
        if (!url || !/^https?:$/.test(url.protocol) || url.origin !== o.replace(/\/$/, '')) {
          throw new InvalidInputError(
            `allowedOrigins[${i}]`,
            'must be an origin: http(s)://host[:port], without a path',
          );
        }
        return url.origin;
      }),
    );
  }

  /** True when `origin` is in the configured list: such requests get CORS headers. */
  listed(origin: string | undefined): origin is string {
    return origin !== undefined && this.allowed.has(origin);
  }

  /** Throws `forbidden` for a request the rules above refuse. */
  check(host: string | undefined, origin: string | undefined): void {
    if (origin !== undefined && !this.listed(origin)) {
      const url = originOf(origin);
      const ok = this.tokensEnabled
        ? url !== null && host !== undefined && url.host === host.toLowerCase()
        : url !== null && isLoopbackName(url.hostname);
      if (!ok) {
        const why = this.tokensEnabled
          ? 'is neither this server nor in the allowed origins (--allow-origin)'
          : `is not loopback: ${HOW_TO}`;
        throw new IdemError('forbidden', `cross-site request refused: Origin "${clip(origin)}" ${why}`, {
          origin: clip(origin),
        });
      }
    }
    if (!this.tokensEnabled && host !== undefined && !isLoopbackName(hostName(host))) {
      throw new IdemError('forbidden', `request refused: Host "${clip(host)}" is not loopback: ${HOW_TO}`, {
        host: clip(host),
      });
    }
  }
}
