/**
 * Hides passwords in connection strings before the CLI prints them. It parses the string by hand
 * instead of with `new URL`, because the strings worth redacting are often the ones a URL parser
 * refuses (`postgres://:pw@host:1:2/db`, an unencoded `@` in the password).
 */

const MASK = '***';
/** Keys whose values are secrets, in a URL query or a key=value connection string. */
const SECRET_KEY = /^(?:ssl)?pass(?:word)?$|secret|token/i;

/** A URL (`scheme://user:password@host/db?password=...`) or a key=value string (`host=h password=pw`), with every password masked. */
export function redactConnectionString(text: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(text);
  if (!scheme) return redactKeyValues(text);
  const rest = text.slice(scheme[0].length);
  // The credentials end at the last `@`, so an unencoded `@`, `/` or `?` in the password stays inside
  // them. Should that `@` lie in the query instead, more than the password is masked, never less.
  const at = rest.lastIndexOf('@');
  let masked = rest;
  if (at >= 0) {
    const userInfo = rest.slice(0, at);
    const colon = userInfo.indexOf(':');
    if (colon >= 0) masked = `${userInfo.slice(0, colon)}:${MASK}${rest.slice(at)}`;
  }
  return scheme[0] + redactQuery(masked);
}

function redactQuery(query: string): string {
  return query.replace(/([?&;])([^=&#;]*)=([^&#;]*)/g, (whole, sep: string, key: string) =>
    SECRET_KEY.test(safeDecode(key)) ? `${sep}${key}=${MASK}` : whole,
  );
}

/** `host=h password='p w' dbname=d` (libpq's form): quoted values may hold spaces and escaped quotes. */
function redactKeyValues(text: string): string {
  return text.replace(
    /([A-Za-z_][\w-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)/g,
    (whole, key: string, eq: string) => (SECRET_KEY.test(key) ? `${key}${eq}${MASK}` : whole),
  );
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
