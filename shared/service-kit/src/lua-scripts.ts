import { readFileSync } from 'node:fs';

/**
 * `--- @include "<file>"` on a line of its own: the file's text goes there
 * (the shape of BullMQ's src/commands/script-loader.ts). The path is relative
 * to the including file; `.lua` is added when it has no extension.
 */
const INCLUDE = /^---[ \t]*@include[ \t]+(["'])(.+?)\1[ \t;]*$/gm;

/**
 * The text of the Lua script at `url` with its includes resolved, as Redis
 * runs it. An included file may include others; each file is emitted once per
 * script, where it is first included (a later include of it is dropped), so
 * two includes that share a third do not define its functions twice.
 * Throws, naming the chain of includes, on a missing file or a circle.
 */
export function loadLuaScript(url: URL): string {
  return resolve(url, new Set(), []);
}

function resolve(url: URL, emitted: Set<string>, stack: string[]): string {
  const path = url.pathname;
  if (stack.includes(path)) throw new Error(`Lua include circle: ${[...stack, path].join(' -> ')}`);
  let text: string;
  try {
    text = readFileSync(url, 'utf8');
  } catch (cause) {
    const from = stack.length > 0 ? ` (included by ${stack.join(' -> ')})` : '';
    throw new Error(`Lua script ${path} cannot be read${from}`, { cause });
  }
  emitted.add(path);
  const inner = [...stack, path];
  return text.replace(INCLUDE, (_line, _quote, name: string) => {
    const target = new URL(/\.[a-z]+$/i.test(name) ? name : `${name}.lua`, url);
    if (inner.includes(target.pathname)) {
      throw new Error(`Lua include circle: ${[...inner, target.pathname].join(' -> ')}`);
    }
    if (emitted.has(target.pathname)) return '';
    return resolve(target, emitted, inner).replace(/\n$/, '');
  });
}

/**
 * The JSON of a script's packed argument. JSON.stringify escapes a lone surrogate
 * as `\udXXX`, which Redis' cjson refuses ("invalid unicode escape"); such a string
 * is made well-formed first (the lone surrogate becomes U+FFFD), as it would be sent
 * as a plain argument. Strings nested in strings (a row's JSON) are escaped twice and
 * reach the script as they are.
 */
export function packScriptArgument(value: unknown): string {
  const json = JSON.stringify(value);
  if (!json.includes('\\ud')) return json;
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' ? v.toWellFormed() : v));
}
