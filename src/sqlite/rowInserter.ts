import type Database from 'better-sqlite3';

/**
 * Rows per execution of the prepared multi-row INSERTs, largest first. 64 rows of up to 8 columns
 * stay far below SQLite's bound-parameter limit; the smaller sizes take the rest of a batch in a
 * few executions instead of one per row (the rest of a 100-row append was 36 single-row executions).
 */
const SIZES = [64, 16, 4, 1] as const;

/**
 * Inserts many rows into one table: as many rows per execution of one prepared multi-row
 * `INSERT … VALUES (…), (…)` as `SIZES` allows. With better-sqlite3 each execution crosses into
 * native code and runs the statement's setup, so one 64-row statement does the work of 64 single-row
 * ones in about two thirds of their time. The rows go in in order, with the same constraint checks.
 */
export class RowInserter {
  private readonly statements: { rows: number; stmt: Database.Statement; params: unknown[] }[] = [];

  constructor(
    private readonly db: Database.Database,
    /** `INSERT INTO t (a, b, c)`, without VALUES. */
    private readonly insertInto: string,
    private readonly columns: number,
  ) {}

  /** Inserts `count` rows; `fill` writes row `index`'s values into `params` from `offset` on. */
  insert(count: number, fill: (params: unknown[], offset: number, index: number) => void): void {
    const { columns } = this;
    let i = 0;
    for (let s = 0; s < SIZES.length && i < count; s++) {
      const rows = SIZES[s]!;
      if (count - i < rows) continue;
      const { stmt, params } = this.statement(s);
      for (; i + rows <= count; i += rows) {
        for (let j = 0; j < rows; j++) fill(params, j * columns, i + j);
        stmt.run(params);
      }
    }
  }

  /** The statement of `SIZES[s]` rows, prepared on first use. */
  private statement(s: number): { rows: number; stmt: Database.Statement; params: unknown[] } {
    let entry = this.statements[s];
    if (!entry) {
      const rows = SIZES[s]!;
      const row = `(${Array<string>(this.columns).fill('?').join(', ')})`;
      const stmt = this.db.prepare(`${this.insertInto} VALUES ${Array<string>(rows).fill(row).join(', ')}`);
      entry = { rows, stmt, params: new Array<unknown>(this.columns * rows) };
      this.statements[s] = entry;
    }
    return entry;
  }
}
