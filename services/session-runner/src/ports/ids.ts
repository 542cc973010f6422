/** Ids of new records (agents, sessions, runs, steps), injected so tests can name them. */
export interface Ids {
  /** A new id: `prefix`, '_', then 20 hex digits, unique for the life of the records. */
  newId(prefix: string): string;
}
