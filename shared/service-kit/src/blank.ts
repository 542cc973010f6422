import { z } from 'zod';

/** An unset or empty variable is absent: what every environment variable's schema starts from. */
export const blank = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema);
