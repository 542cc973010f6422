/**
 * The exactly-once checker of the fault tests: records every input id in the
 * order it was sent, per ordered stream (a session, or a session and ticket),
 * counts the faults injected, and at the end compares with what landed:
 * nothing lost, nothing doubled, nothing unknown, order kept per stream.
 */
import { expect } from 'vitest';

export interface ExactlyOnceReport {
  name: string;
  faults: number;
  inputs: number;
  /** Input ids that never landed. */
  lost: { stream: string; id: string }[];
  /** Input ids that landed more than once, with how often. */
  doubled: { stream: string; id: string; count: number }[];
  /** Ids that landed in a checked stream but were never sent to it. */
  unexpected: { stream: string; id: string }[];
  /** Streams whose landed ids (first landing of each) are not in sending order. */
  outOfOrder: { stream: string; sent: string[]; landed: string[] }[];
}

export class ExactlyOnce {
  readonly name: string;
  readonly #sent = new Map<string, string[]>();
  readonly #faults: string[] = [];

  constructor(name: string) {
    this.name = name;
  }

  /** Records one input id sent to `stream`; call in sending order. An id is sent once. */
  sent(stream: string, id: string): void {
    let ids = this.#sent.get(stream);
    if (!ids) {
      ids = [];
      this.#sent.set(stream, ids);
    }
    ids.push(id);
  }

  /** Records one injected fault (kill -9, SIGSTOP, a Redis restart, ...). */
  fault(what: string): void {
    this.#faults.push(what);
  }

  get faults(): readonly string[] {
    return this.#faults;
  }

  get inputs(): number {
    let n = 0;
    for (const ids of this.#sent.values()) n += ids.length;
    return n;
  }

  streams(): string[] {
    return [...this.#sent.keys()];
  }

  /**
   * Compares with what landed, per stream, in landing order. Every stream that
   * was sent to is checked (a stream missing from `landed` lost all of its ids);
   * `landed` streams that were never sent to are reported as unexpected.
   */
  verify(landed: ReadonlyMap<string, readonly string[]>): ExactlyOnceReport {
    const report: ExactlyOnceReport = {
      name: this.name,
      faults: this.#faults.length,
      inputs: this.inputs,
      lost: [],
      doubled: [],
      unexpected: [],
      outOfOrder: [],
    };
    for (const [stream, sent] of this.#sent) {
      const known = new Set(sent);
      const counts = new Map<string, number>();
      const firsts: string[] = [];
      for (const id of landed.get(stream) ?? []) {
        if (!known.has(id)) {
          report.unexpected.push({ stream, id });
          continue;
        }
        const count = (counts.get(id) ?? 0) + 1;
        counts.set(id, count);
        if (count === 1) firsts.push(id);
      }
      for (const id of sent) {
        const count = counts.get(id) ?? 0;
        if (count === 0) report.lost.push({ stream, id });
        if (count > 1) report.doubled.push({ stream, id, count });
      }
      const expectedOrder = sent.filter((id) => counts.has(id));
      if (expectedOrder.some((id, i) => firsts[i] !== id)) {
        report.outOfOrder.push({ stream, sent: expectedOrder, landed: firsts });
      }
    }
    for (const [stream, ids] of landed) {
      if (!this.#sent.has(stream)) for (const id of ids) report.unexpected.push({ stream, id });
    }
    return report;
  }

  /** verify(), prints the summary line, and asserts nothing lost, doubled, unknown or reordered. */
  check(landed: ReadonlyMap<string, readonly string[]>): ExactlyOnceReport {
    const report = this.verify(landed);
    process.stdout.write(`${summary(report)}\n`);
    // First few of each kind only: a broken run must still print a readable failure.
    expect({
      lost: report.lost.slice(0, 10),
      doubled: report.doubled.slice(0, 10),
      unexpected: report.unexpected.slice(0, 10),
      outOfOrder: report.outOfOrder.slice(0, 3),
    }).toEqual({ lost: [], doubled: [], unexpected: [], outOfOrder: [] });
    expect(report.inputs).toBeGreaterThan(0);
    return report;
  }
}

export function summary(report: ExactlyOnceReport): string {
  return (
    `[exactly-once] ${report.name}: ${report.faults} fault(s) injected, ${report.inputs} input id(s) checked: ` +
    `${report.lost.length} lost, ${report.doubled.length} doubled, ${report.unexpected.length} unexpected, ` +
    `${report.outOfOrder.length} stream(s) out of order`
  );
}
