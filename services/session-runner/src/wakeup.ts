/**
 * The pause of a loop that polls for work and is also told when work arrived
 * (the row relay, the receipt sender): `pause` ends after its delay, at the
 * next `ring`, or at `close`. A ring between `reset` and `pause` is not lost:
 * the pause ends at once.
 */
export class Wakeup {
  #rung = false;
  #closed = false;
  #wake: (() => void) | undefined;

  /** Work arrived: ends the pause under way, or the next one. */
  ring(): void {
    this.#rung = true;
    this.#wake?.();
  }

  /** Forgets earlier rings; called before the loop reads its work. */
  reset(): void {
    this.#rung = false;
  }

  /** Waits `ms`, less when rung since the last reset; at once after close. */
  pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#rung || this.#closed) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  /** Ends the pause under way and every later one. */
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }
}
