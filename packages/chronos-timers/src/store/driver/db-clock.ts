/**
 * The database clock, estimated in process: `now()` of the database plus the time elapsed on
 * the local clock since it was read. Used for in-process maths that must agree with the
 * database (the next cron occurrence, "is this `at` in the past"); due-ness itself is always
 * decided in SQL (I5). Re-read every `refreshMs`, so a process whose clock runs fast or slow
 * still computes times by the database's.
 */
import { systemClock, type Clock } from '../../clock.js';
import { sql, type Executor } from './db.js';

// clock_timestamp(), not now(): inside a caller's long transaction now() is the transaction's start.
const dbNow = sql('db_now', 'SELECT clock_timestamp() AS now');

export class DbClock {
  #offsetMs = 0;
  #readAt = -Infinity;
  #reading: Promise<void> | null = null;

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock = systemClock,
    private readonly refreshMs = 30_000,
  ) {}

  /**
   * The database's time, estimated. `via` is the executor to read it on when a refresh is due —
   * the caller's transaction, when there is one (PGlite has one connection, held by it).
   */
  async now(via: Executor = this.db): Promise<Date> {
    if (this.clock.now().getTime() - this.#readAt > this.refreshMs || this.#readAt === -Infinity) {
      this.#reading ??= this.#read(via).finally(() => (this.#reading = null));
      await this.#reading;
    }
    return new Date(this.clock.now().getTime() + this.#offsetMs);
  }

  async #read(via: Executor): Promise<void> {
    const before = this.clock.now().getTime();
    const [row] = await via.query<{ now: Date }>(dbNow);
    const after = this.clock.now().getTime();
    this.#offsetMs = row!.now.getTime() - (before + after) / 2;
    this.#readAt = after;
  }
}
