import { z } from 'zod';

/** An unset or empty variable is absent. */
export const blank = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/** A TCP port with its default. */
export const portVar = (fallback: number) => blank(z.coerce.number().int().min(0).max(65_535).default(fallback));

/** `host:port,host:port` -> a list; absent means "not configured". */
export const hostListVar = () =>
  blank(
    z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.string().regex(/^[^\s:]+:\d+$/, 'expected host:port')).min(1))
      .optional(),
  );

export const redisUrlVar = () => blank(z.url({ protocol: /^rediss?$/ }).optional());

export const logLevelVar = () =>
  blank(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'));

export const kafkaClientVar = () => blank(z.enum(['kafkajs', 'platformatic']).default('platformatic'));
