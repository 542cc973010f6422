import { byteLength, MAX_ITEM_BYTES } from '@ctxflow/contracts';

/**
 * R35: the notice a client answer after its deadline becomes. An answer too
 * long for one row (MAX_ITEM_BYTES, measured as the item's JSON, as every item
 * is) is not refused, which would lose it: its text is cut to fit and the row
 * ends by saying how many characters were left out (as an over-size batch ends
 * with a notice saying how many items were left out).
 */
export function lateAnswerContent(tool: string, callId: string, answer: string): string {
  const head = `Late answer from tool ${tool} (call ${callId}), after its deadline:\n`;
  const fits = (content: string) => byteLength({ kind: 'notice', content }) <= MAX_ITEM_BYTES;
  const whole = head + answer;
  if (fits(whole)) return whole;
  const cut = (kept: number) =>
    `${head}${answer.slice(0, kept)}\n[${answer.length - kept} more characters of this answer left out: it was over the ${MAX_ITEM_BYTES}-byte row limit]`;
  // The longest prefix that fits, by bisection (each try measures one row, so a 1 MiB answer costs ~20 measures).
  let low = 0;
  let high = Math.min(answer.length, MAX_ITEM_BYTES);
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(cut(mid))) low = mid;
    else high = mid - 1;
  }
  // Never end on half a surrogate pair.
  if (low > 0 && /[\uD800-\uDBFF]/.test(answer[low - 1]!)) low -= 1;
  return cut(low);
}
