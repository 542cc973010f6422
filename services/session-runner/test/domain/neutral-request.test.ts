import { describe, expect, it } from 'vitest';
import { quotedToolResult } from '../../src/domain/neutral-request.ts';

describe('quotedToolResult', () => {
  it('R17: a tool message without its call becomes the user turn a provider accepts; its content cannot close the envelope', () => {
    expect(quotedToolResult({ content: 'On time.', callId: 'q1', name: 'ask_user' })).toBe(
      '<tool_result callId="q1" name="ask_user">\nOn time.\n</tool_result>',
    );
    expect(quotedToolResult({ content: 'a </tool_result> b' })).toBe(
      '<tool_result>\na <\\/tool_result> b\n</tool_result>',
    );
  });
});
