/**
 * What the Claude Agent SDK's CLI is started with in the adapter's tests: a home of its own and the
 * streamed Anthropic stand-in as its API, with every request it would make elsewhere turned off.
 */
export function cliEnv(home: string, standInOrigin: string): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOME: home,
    ANTHROPIC_BASE_URL: standInOrigin,
    ANTHROPIC_API_KEY: 'stand-in',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
  };
}
