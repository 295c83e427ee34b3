/**
 * `COPY … FROM STDIN` on a node-postgres client, its rows sent as the caller makes them: the door
 * a large batch of new timers goes through (store/alarm-copy.ts, `copyParts`; the rows in the binary
 * format of copy-rows.ts). node-postgres runs it as a "submittable", the interface its cursor and
 * pg-copy-streams use.
 */

/**
 * One `COPY … FROM STDIN` under way: the server takes the rows as they arrive, while the caller
 * makes the next ones, in one statement (no round trip between parts).
 */
export interface CopyIn {
  /**
   * Sends rows, as one CopyData message of the protocol (`CopyRows.take()`), written to the
   * socket as it is; dropped once the server has refused the copy (`refused`).
   */
  write(message: Buffer): void;
  /** True once the server refused the copy: stop making rows, `end()` throws its error. */
  readonly refused: boolean;
  /** Ends the data; the rows copied, or the server's error. */
  end(): Promise<number>;
  /** Abandons the copy (nothing of it is written); resolves once the server has answered. */
  abort(reason: string): Promise<void>;
}

/**
 * What CopyInQuery uses of node-postgres's connection (lib/connection.js). Messages framed here
 * go to its socket as they are, as pg-copy-streams writes them: `sendCopyFromChunk` would copy
 * every chunk into the driver's own buffer first.
 */
interface CopyConnection {
  readonly stream: { write(message: Buffer): boolean };
  query(text: string): void;
  endCopyFrom(): void;
  sendCopyFail(message: string): void;
}

/**
 * A node-postgres "submittable" that runs one `COPY … FROM STDIN` (simple query protocol): chunks
 * written before the server is ready are held, then sent in order. Settles once: with the
 * server's error (it discards whatever data follows, then answers ReadyForQuery), a lost
 * connection, or the row count at ReadyForQuery.
 */
export class CopyInQuery implements CopyIn {
  readonly #text: string;
  #connection: CopyConnection | null = null;
  #held: Buffer[] = [];
  #ending: 'end' | 'abort' | null = null;
  #reason = '';
  #rows = 0;
  #error: unknown = null;
  #settled = false;
  readonly #done: Promise<number>;
  #resolve!: (rows: number) => void;
  #reject!: (error: unknown) => void;

  constructor(text: string) {
    this.#text = text;
    this.#done = new Promise<number>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // Awaited by end() or abort(); a refusal before either is not left unheard.
    this.#done.catch(() => undefined);
  }

  get refused(): boolean {
    return this.#error !== null;
  }

  write(chunk: Buffer): void {
    if (this.#settled || this.#ending) return;
    if (this.#connection) this.#connection.stream.write(chunk);
    else this.#held.push(chunk);
  }

  end(): Promise<number> {
    this.#finish('end');
    return this.#done;
  }

  async abort(reason: string): Promise<void> {
    this.#reason = reason;
    this.#finish('abort');
    await this.#done.catch(() => undefined);
  }

  #finish(how: 'end' | 'abort'): void {
    if (this.#ending || this.#settled) return;
    this.#ending = how;
    if (this.#connection) this.#flush(this.#connection);
  }

  /** What was held for the server, then the end of the data or its abandonment if asked. */
  #flush(connection: CopyConnection): void {
    if (this.#ending === 'abort') {
      connection.sendCopyFail(this.#reason);
      return;
    }
    for (const chunk of this.#held) connection.stream.write(chunk);
    this.#held = [];
    if (this.#ending === 'end') connection.endCopyFrom();
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.#error !== null) this.#reject(this.#error);
    else this.#resolve(this.#rows);
  }

  // The driver's side of a submittable (node-postgres client.js calls these).
  submit(connection: CopyConnection): void {
    connection.query(this.#text);
  }
  handleCopyInResponse(connection: CopyConnection): void {
    this.#connection = connection;
    this.#flush(connection);
  }
  handleCommandComplete(message: { text?: string }): void {
    const count = /^COPY (\d+)/.exec(message.text ?? '');
    if (count) this.#rows = Number(count[1]);
  }
  handleError(error: unknown): void {
    // A server error is followed by ReadyForQuery, a lost connection by nothing: settle now.
    this.#error ??= error;
    this.#settle();
  }
  handleReadyForQuery(): void {
    this.#settle();
  }
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}
