/** Progress goes to stderr, so `--json` keeps stdout for the JSON document alone. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}
