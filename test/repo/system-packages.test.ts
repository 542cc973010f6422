/**
 * test/setup/system-packages.ts: which Debian packages a run installs. Only those a selected file
 * needs and the machine lacks: the browser test needs chromium, the secured-connection suites
 * openssl, a unit test neither.
 */
import { describe, expect, it } from 'vitest';
import { missingPackages } from '../setup/system-packages.ts';

const sources: Record<string, string> = {
  'services/session-runner/test/http/inspector/inspector.browser.test.ts':
    "import { chromium } from 'playwright-core';",
  'test/contract/secured-connections.test.ts': "import { startSecured } from '../support/secured-services.ts';",
  'shared/bus/test/partition-for-key.test.ts': "import { partitionForKey } from '../src/index.ts';",
};
const read = (file: string) => sources[file] ?? '';
const none = () => false;

describe('system packages for the selected tests', () => {
  it('the browser test needs chromium, a secured-connection suite openssl, a unit test nothing', () => {
    const names = (files: string[], has = none) => missingPackages(files, has, read).map((pkg) => pkg.debian);
    expect(names(['services/session-runner/test/http/inspector/inspector.browser.test.ts'])).toEqual(['chromium']);
    expect(names(['test/contract/secured-connections.test.ts'])).toEqual(['openssl']);
    expect(names(['shared/bus/test/partition-for-key.test.ts'])).toEqual([]);
    expect(names(Object.keys(sources))).toEqual(['chromium', 'openssl']);
  });

  it('what the machine has is never installed; an unreadable selection looks at every package', () => {
    const hasChromium = (command: string) => command === 'chromium';
    expect(missingPackages(Object.keys(sources), hasChromium, read).map((pkg) => pkg.debian)).toEqual(['openssl']);
    expect(missingPackages([], none, read).map((pkg) => pkg.debian)).toEqual(['chromium', 'openssl']);
    expect(missingPackages([], () => true, read)).toEqual([]);
  });
});
