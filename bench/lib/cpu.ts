/** CPU time of this process in milliseconds (user + system) since `since`, or since start. */
export function cpuMs(since?: NodeJS.CpuUsage): number {
  const usage = process.cpuUsage(since);
  return (usage.user + usage.system) / 1000;
}

/** CPU milliseconds spent per 1,000 messages. */
export function perThousand(ms: number, messages: number): number {
  return messages > 0 ? (ms / messages) * 1000 : Number.NaN;
}
