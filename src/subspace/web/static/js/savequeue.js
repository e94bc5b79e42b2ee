// The writes of one page, sent one at a time in the order they were made: a bullet created and
// typed into at once is created before its text is saved. Each write carries the page version it
// was made from (base_version) and takes the new one from the answer, so a write made from a
// version another window replaced is refused (409 stale_page) instead of overwriting it.

import { ApiError } from "./api.js";

const RETRY_DELAYS_MS = [1000, 2000, 4000, 8000, 15000]; // then every 15 s until it goes through

/** Whether trying the same write again later can succeed: the network or the server failed. */
export function isTransient(error) {
  if (!(error instanceof ApiError)) return error?.name !== "AbortError";
  return error.status >= 500 || error.status === 408 || error.status === 429;
}

export class SaveQueue {
  /**
   * `version`: the page version the view read. Callbacks:
   * onState("saving" | "saved" | "retrying" | "error", message) — what to show the user;
   * onStale(refusedOps) — the page moved on: the refused write and every one after it, unsent;
   * onRejected(op, error) — the server refused one write for good (the others go on).
   */
  constructor({ version, onState, onStale, onRejected }) {
    this.version = version;
    this.onState = onState;
    this.onStale = onStale;
    this.onRejected = onRejected;
    this.ops = [];
    this.running = false;
    this.pendingText = 0; // edits waiting for the typing pause, counted as unsaved
    this.stopped = false;
    this.failure = null; // the error being retried
    this.rejected = new Map(); // bullet (or "title") → why its text was refused for good
  }

  /**
   * Queue `op`: {run(baseVersion) → new version (or null to keep it), refused() → text or null,
   * node (the bullet it writes, if any), kind}. A "text", "create" or "title" op that goes
   * through clears an earlier refusal of the same text.
   */
  push(op) {
    if (this.stopped) return;
    this.ops.push(op);
    this.report();
    if (!this.running) this.drain();
  }

  /**
   * The server changed the page itself (an answer bullet was written): take its new version
   * from `read()` before the next waiting write, so that write is not refused as stale.
   */
  sync(read) {
    if (this.stopped) return;
    const op = { kind: "sync", refused: () => null, run: read };
    this.ops.splice(this.running ? 1 : 0, 0, op);
    this.report();
    if (!this.running) this.drain();
  }

  get idle() {
    return !this.running && this.ops.length === 0 && this.pendingText === 0;
  }

  /** Forget every queued write (after a reload from the server). */
  reset(version) {
    this.ops = [];
    this.version = version;
    this.stopped = false;
    this.failure = null;
    this.rejected.clear();
    this.report();
  }

  report() {
    if (this.failure) return;
    if (this.rejected.size) {
      this.onState("error", [...this.rejected.values()][0]);
      return;
    }
    this.onState(this.idle ? "saved" : "saving");
  }

  async drain() {
    this.running = true;
    let attempt = 0;
    while (this.ops.length && !this.stopped) {
      const op = this.ops[0];
      try {
        const version = await op.run(this.version);
        if (typeof version === "number") this.version = version;
        this.ops.shift();
        attempt = 0;
        this.failure = null;
        if (["text", "create", "title"].includes(op.kind)) this.rejected.delete(op.node || op.kind);
      } catch (error) {
        if (error instanceof ApiError && error.code === "stale_page") {
          const refused = this.ops;
          this.ops = [];
          this.stopped = true;
          this.running = false;
          this.onStale(refused);
          return;
        }
        if (isTransient(error)) {
          this.failure = error;
          this.onState("retrying", error.message);
          const delay = RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)];
          attempt += 1;
          await new Promise((resolve) => setTimeout(resolve, delay));
          continue;
        }
        this.ops.shift();
        this.failure = null;
        this.rejected.set(op.node || op.kind, error.message);
        this.onRejected(op, error);
      }
      this.report();
    }
    this.running = false;
    this.report();
  }
}
