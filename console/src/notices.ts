// What the page tells the user outside any one page: errors (the alert region) and whether
// the server is reachable (pollers report here and back off while it is not).

import { store } from "./store";

export interface Notice {
  id: number;
  text: string;
}

export const errors = store<Notice[]>([]);
let nextId = 1;

export function showError(text: string): void {
  const list = errors.get().filter((n) => n.text !== text);
  errors.set([...list, { id: nextId++, text }].slice(-3));
}

export function dismissError(id: number): void {
  errors.set(errors.get().filter((n) => n.id !== id));
}

/** null while the server answers; otherwise when the next retry is due (ms since epoch). */
export const unreachable = store<number | null>(null);

/** The delay before retry number `failures` (1-based): 1 s, 2 s, 4 s, 8 s, then 10 s. */
export function backoff(failures: number): number {
  return Math.min(1000 * 2 ** Math.max(0, failures - 1), 10_000);
}

export function reportDown(retryInMs: number): void {
  unreachable.set(Date.now() + retryInMs);
}

export function reportUp(): void {
  unreachable.set(null);
}
