/**
 * `--- @include "<file>"` in a Lua script is replaced by that file's text, each
 * file once per script, where first included; a missing file or a circle is
 * an error naming the chain of includes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadLuaScript, packScriptArgument } from '@ctxflow/service-kit';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'lua-scripts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): URL {
  const path = join(dir, name);
  writeFileSync(path, text);
  return pathToFileURL(path);
}

describe('loadLuaScript', () => {
  it('puts each included file where it is first included, once, includes of includes too', () => {
    file('base.lua', 'local function base() end\n');
    file('a.lua', '--- @include "base"\nlocal function a() end\n');
    file('b.lua', "--- @include 'base.lua'\nlocal function b() end\n");
    const top = file('top.lua', '-- top\n--- @include "a"\n--- @include "b"\nreturn 1\n');
    expect(loadLuaScript(top)).toBe(
      '-- top\nlocal function base() end\nlocal function a() end\n\nlocal function b() end\nreturn 1\n',
    );
  });

  it('leaves a script without includes as it is, and an @include inside a line alone', () => {
    const text = '-- say --- @include "x" here\nreturn 2\n';
    expect(loadLuaScript(file('plain.lua', text))).toBe(text);
  });

  it('names the chain of includes of a missing file', () => {
    file('broken.lua', '--- @include "absent"\n');
    const top = file('uses-broken.lua', '--- @include "broken"\n');
    expect(() => loadLuaScript(top)).toThrow(
      `Lua script ${join(dir, 'absent.lua')} cannot be read (included by ${join(dir, 'uses-broken.lua')} -> ${join(dir, 'broken.lua')})`,
    );
  });

  it('refuses a circle of includes', () => {
    file('ping.lua', '--- @include "pong"\n');
    file('pong.lua', '--- @include "ping"\n');
    expect(() => loadLuaScript(pathToFileURL(join(dir, 'ping.lua')))).toThrow(
      `Lua include circle: ${join(dir, 'ping.lua')} -> ${join(dir, 'pong.lua')} -> ${join(dir, 'ping.lua')}`,
    );
  });
});

describe('packScriptArgument', () => {
  it('is the JSON of the value, a lone surrogate made U+FFFD; a string nested in a string is left as it is', () => {
    const row = JSON.stringify({ content: 'row \ud800' });
    expect(packScriptArgument({ a: 'plain', rows: [row] })).toBe(JSON.stringify({ a: 'plain', rows: [row] }));
    expect(packScriptArgument({ key: 'k\ud800', high: '\udbff!', pair: '\ud83d\ude00', rows: [row] })).toBe(
      JSON.stringify({ key: 'k\ufffd', high: '\ufffd!', pair: '\ud83d\ude00', rows: [row] }),
    );
  });
});
