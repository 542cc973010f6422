/**
 * fastJsonTraceSerializer writes the bytes of the SDK's JsonTraceSerializer
 * for any spans: random attribute values of every kind (escapes, non-ASCII,
 * lone surrogates, non-finite and negative-zero numbers, bytes, arrays,
 * maps), several resources and scopes, and the edge cases of each field.
 */
import { type SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { fastJsonTraceSerializer } from '../../shared/telemetry/src/otlp-json-spans.ts';

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CODE_POINTS = [0x00, 0x08, 0x09, 0x0a, 0x1f, 0x22, 0x27, 0x2f, 0x5c, 0x7f, 0xe9, 0x2028, 0xd800, 0xdfff, 0x1f680];
const NUMBERS = [0, -0, 1, -7, 42, 2 ** 53, 2 ** 60, 1e21, 0.25, -1.5e-7, Number.NaN, Number.POSITIVE_INFINITY, -1e308];

function randomString(next: () => number): string {
  let out = '';
  const length = Math.floor(next() * 12);
  for (let i = 0; i < length; i++) {
    out +=
      next() < 0.7
        ? String.fromCharCode(0x20 + Math.floor(next() * 95))
        : String.fromCodePoint(CODE_POINTS[Math.floor(next() * CODE_POINTS.length)]!);
  }
  return out;
}

function randomValue(next: () => number, depth = 0): unknown {
  const pick = Math.floor(next() * (depth > 1 ? 4 : 8));
  switch (pick) {
    case 0:
      return randomString(next);
    case 1:
      return NUMBERS[Math.floor(next() * NUMBERS.length)]!;
    case 2:
      return next() < 0.5;
    case 3:
      return Math.floor(next() * 1e9) - 5e8;
    case 4:
      return Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
    case 5:
      return Object.fromEntries(
        Array.from({ length: Math.floor(next() * 3) }, () => [randomString(next), randomValue(next, depth + 1)]),
      );
    case 6:
      return new Uint8Array(Array.from({ length: Math.floor(next() * 6) }, () => Math.floor(next() * 256)));
    default:
      return next() < 0.5 ? null : [null, undefined, 'x'];
  }
}

function randomAttributes(next: () => number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: Math.floor(next() * 6) }, (_, i) => [`${randomString(next)}${i}`, randomValue(next)]),
  );
}

const hex = (next: () => number, digits: number) =>
  Array.from({ length: digits }, () => Math.floor(next() * 16).toString(16)).join('');

describe('fastJsonTraceSerializer', () => {
  it('writes the bytes of the SDK serializer for random spans over several resources and scopes', () => {
    const resources = [
      resourceFromAttributes({ 'service.name': 'ctxflow-step-context', 'host.name': 'näme' }),
      resourceFromAttributes({ 'service.name': 'other' }, { schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' }),
    ];
    const scopes = [
      { name: 'ctxflow' },
      { name: 'ctxflow', version: '1.0.0', schemaUrl: 'https://example.com/s' },
      { name: 'other', version: '', schemaUrl: '' },
      { name: 'attributed', attributes: { 'scope.k': 'v', n: 1 }, droppedAttributesCount: 2 },
    ];
    for (let seed = 1; seed <= 40; seed++) {
      const next = random(seed);
      const spans: ReadableSpan[] = Array.from({ length: 1 + Math.floor(next() * 30) }, () => {
        const traceId = hex(next, 32);
        const hasParent = next() < 0.8;
        const state = next() < 0.2 ? new TraceState(next() < 0.5 ? 'a=1,b=2' : '') : undefined;
        const start: [number, number] =
          next() < 0.1 ? [0, Math.floor(next() * 1e9)] : [1.7e9 + Math.floor(next() * 1e6), Math.floor(next() * 1e9)];
        const end: [number, number] = [start[0] + Math.floor(next() * 3), Math.floor(next() * 1e9)];
        const context = {
          traceId,
          spanId: hex(next, 16),
          traceFlags: next() < 0.9 ? TraceFlags.SAMPLED : 3,
          traceState: state,
        };
        return {
          name: next() < 0.1 ? randomString(next) : 'ctxflow.step_context.apply',
          kind: (next() < 0.1 ? undefined : Math.floor(next() * 5)) as SpanKind,
          spanContext: () => context,
          parentSpanContext: hasParent
            ? {
                traceId,
                spanId: next() < 0.05 ? '' : hex(next, 16),
                traceFlags: 1,
                isRemote: next() < 0.5 ? true : undefined,
              }
            : undefined,
          startTime: start,
          endTime: end,
          duration: [0, 0],
          status:
            next() < 0.7
              ? { code: SpanStatusCode.UNSET }
              : { code: SpanStatusCode.ERROR, message: next() < 0.3 ? '' : randomString(next) },
          attributes: randomAttributes(next) as ReadableSpan['attributes'],
          links:
            next() < 0.3
              ? [
                  {
                    context: {
                      traceId: hex(next, 32),
                      spanId: hex(next, 16),
                      traceFlags: 1,
                      isRemote: true,
                      traceState: state,
                    },
                    ...(next() < 0.5
                      ? { attributes: randomAttributes(next) as ReadableSpan['attributes'], droppedAttributesCount: 1 }
                      : {}),
                  },
                ]
              : [],
          events:
            next() < 0.3
              ? [
                  {
                    name: randomString(next),
                    time: [start[0], Math.floor(next() * 1e9)],
                    ...(next() < 0.5 ? { attributes: randomAttributes(next) as ReadableSpan['attributes'] } : {}),
                    ...(next() < 0.3 ? { droppedAttributesCount: 4 } : {}),
                  },
                ]
              : [],
          ended: true,
          resource: resources[Math.floor(next() * resources.length)]!,
          instrumentationScope: scopes[Math.floor(next() * scopes.length)]!,
          droppedAttributesCount: next() < 0.1 ? (undefined as unknown as number) : Math.floor(next() * 3),
          droppedEventsCount: 0,
          droppedLinksCount: Math.floor(next() * 2),
        };
      });
      const expected = Buffer.from(JsonTraceSerializer.serializeRequest(spans)!);
      const actual = Buffer.from(fastJsonTraceSerializer.serializeRequest(spans)!);
      if (!actual.equals(expected))
        expect({ seed, actual: actual.toString() }).toEqual({ seed, actual: expected.toString() });
    }
  });

  it('an empty request, and the response it reads as the SDK does', () => {
    expect(Buffer.from(fastJsonTraceSerializer.serializeRequest([])!).toString()).toBe(
      Buffer.from(JsonTraceSerializer.serializeRequest([])!).toString(),
    );
    const response = new TextEncoder().encode('{"partialSuccess":{"rejectedSpans":"2"}}');
    expect(fastJsonTraceSerializer.deserializeResponse(response)).toEqual(
      JsonTraceSerializer.deserializeResponse(response),
    );
  });
});
