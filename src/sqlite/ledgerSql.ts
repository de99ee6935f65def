/**
 * The SQLite target's ledger rows of one consumer (target migration 3), for `SELECT count(*) …` or
 * `DELETE …`; its one parameter is the consumer's name.
 */
export const LEDGER_OF_CONSUMER =
  'FROM idem_ledger WHERE consumer_id = (SELECT id FROM idem_target_consumers WHERE consumer = ?)';
