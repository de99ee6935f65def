/**
 * API tokens: who may call the server, with which scopes, on which streams.
 * Secrets are kept only as SHA-256 digests and compared in constant time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IdemError, InvalidInputError } from '../core/errors.js';

export type Scope = 'read' | 'append' | 'subscribe' | 'admin';
export const SCOPES: readonly Scope[] = ['read', 'append', 'subscribe', 'admin'];

/** One configured token. Give either the secret (`token`) or its digest (`sha256`, lowercase hex). */
export interface TokenConfig {
  /** A label shown in logs, consumer owners and dead-letter skips. */
  name: string;
  token?: string;
  sha256?: string;
  /** `admin` implies the other three. */
  scopes: Scope[];
  /** When given, the token may only touch streams starting with one of these prefixes. */
  streamPrefixes?: string[];
}

/** Who is calling: a token's name, scopes and stream restriction (or the anonymous caller when no tokens are configured). */
export interface Principal {
  name: string;
  scopes: ReadonlySet<Scope>;
  /** `null`: every stream. */
  streamPrefixes: readonly string[] | null;
  anonymous: boolean;
}

export const ANONYMOUS: Principal = {
  name: 'anonymous',
  scopes: new Set(SCOPES),
  streamPrefixes: null,
  anonymous: true,
};

interface StoredToken {
  digest: Buffer;
  principal: Principal;
}

export function sha256Hex(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** The configured tokens. With none, every request is the anonymous caller with every scope. */
export class TokenRegistry {
  private readonly tokens: StoredToken[];

  constructor(configs: readonly TokenConfig[]) {
    this.tokens = configs.map((c, i) => toStored(c, `tokens[${i}]`));
  }

  get enabled(): boolean {
    return this.tokens.length > 0;
  }

  get size(): number {
    return this.tokens.length;
  }

  /**
   * The principal for an `Authorization` header value (`Bearer <secret>`).
   * Throws `unauthorized` when tokens are configured and the header is missing or matches none.
   */
  authenticate(header: string | undefined): Principal {
    if (!this.enabled) return ANONYMOUS;
    const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) throw new IdemError('unauthorized', 'a bearer token is required (Authorization: Bearer <token>)');
    const digest = createHash('sha256').update(m[1]!, 'utf8').digest();
    let found: Principal | null = null;
    // Compare against every token without stopping early, so timing does not tell which one matched.
    for (const t of this.tokens) {
      if (timingSafeEqual(t.digest, digest) && found === null) found = t.principal;
    }
    if (!found) throw new IdemError('unauthorized', 'the bearer token is not valid');
    return found;
  }
}

function toStored(c: TokenConfig, field: string): StoredToken {
  if (c === null || typeof c !== 'object') throw new InvalidInputError(field, 'must be an object');
  if (typeof c.name !== 'string' || c.name.length === 0)
    throw new InvalidInputError(`${field}.name`, 'must be a non-empty string');
  let hex: string;
  if (typeof c.token === 'string' && c.token.length > 0) {
    if (/\s/.test(c.token)) throw new InvalidInputError(`${field}.token`, 'must not contain whitespace');
    hex = sha256Hex(c.token);
  } else if (typeof c.sha256 === 'string' && /^[0-9a-f]{64}$/i.test(c.sha256)) {
    hex = c.sha256.toLowerCase();
  } else {
    throw new InvalidInputError(field, 'needs "token" (the secret) or "sha256" (its hex digest)');
  }
  if (!Array.isArray(c.scopes) || c.scopes.length === 0) {
    throw new InvalidInputError(`${field}.scopes`, `must be a non-empty array of ${SCOPES.join(', ')}`);
  }
  const scopes = new Set<Scope>();
  c.scopes.forEach((s, i) => {
    if (!SCOPES.includes(s))
      throw new InvalidInputError(`${field}.scopes[${i}]`, `must be one of ${SCOPES.join(', ')}`);
    scopes.add(s);
  });
  if (scopes.has('admin')) for (const s of SCOPES) scopes.add(s);
  let prefixes: string[] | null = null;
  if (c.streamPrefixes !== undefined) {
    if (!Array.isArray(c.streamPrefixes) || c.streamPrefixes.length === 0) {
      throw new InvalidInputError(
        `${field}.streamPrefixes`,
        'must be a non-empty array of strings when given',
      );
    }
    c.streamPrefixes.forEach((p, i) => {
      if (typeof p !== 'string' || p.length === 0) {
        throw new InvalidInputError(`${field}.streamPrefixes[${i}]`, 'must be a non-empty string');
      }
    });
    prefixes = [...c.streamPrefixes];
  }
  return {
    digest: Buffer.from(hex, 'hex'),
    principal: { name: c.name, scopes, streamPrefixes: prefixes, anonymous: false },
  };
}

/**
 * Parses token configuration text, as found in a tokens file or `IDEM_TOKENS`:
 * - JSON: `[{ "name", "token" | "sha256", "scopes", "streamPrefixes"? }]` or `{ "tokens": [...] }`;
 * - compact: entries separated by `;` or newlines, each `name=secret:scope,scope[:prefix,prefix]`.
 */
export function parseTokens(text: string, source = 'tokens'): TokenConfig[] {
  const trimmed = text.trim();
  if (trimmed.length === 0) return [];
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (err) {
      // The parser's message quotes the text around the mistake, which holds secrets: only its position is kept.
      const at = /position (\d+)/.exec((err as Error).message)?.[1];
      throw new InvalidInputError(
        source,
        `is not valid JSON${at === undefined ? '' : ` (at character ${at})`}`,
      );
    }
    const list = Array.isArray(parsed) ? parsed : (parsed as { tokens?: unknown }).tokens;
    if (!Array.isArray(list))
      throw new InvalidInputError(source, 'must be a JSON array of tokens or { "tokens": [...] }');
    return list as TokenConfig[];
  }
  return trimmed
    .split(/[;\n]/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0 && !s.startsWith('#'))
    .map((entry, i): TokenConfig => {
      const m = /^([^=\s]+)=([^:\s]+):([^:\s]+)(?::(\S+))?$/.exec(entry);
      if (!m)
        throw new InvalidInputError(
          `${source}[${i}]`,
          'must look like name=secret:scope,scope[:prefix,prefix]',
        );
      const config: TokenConfig = { name: m[1]!, token: m[2]!, scopes: m[3]!.split(',') as Scope[] };
      if (m[4] !== undefined) config.streamPrefixes = m[4].split(',');
      return config;
    });
}

/** Tokens from a file (JSON or compact form) and/or the `IDEM_TOKENS` environment variable. */
export function loadTokens(options: { file?: string; env?: NodeJS.ProcessEnv } = {}): TokenConfig[] {
  const out: TokenConfig[] = [];
  if (options.file !== undefined) out.push(...parseTokens(readFileSync(options.file, 'utf8'), options.file));
  const envText = (options.env ?? process.env).IDEM_TOKENS;
  if (envText !== undefined) out.push(...parseTokens(envText, 'IDEM_TOKENS'));
  return out;
}
