// Polling and clock hooks shared by the pages.

import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, Unreachable } from "./api";
import { backoff, reportDown, reportUp, showError } from "./notices";

export interface Polled<T> {
  data: T | null;
  /** The server's message when the last load failed with an error status. */
  error: string | null;
  /** Loads again now (after an action changed something). */
  reload: () => void;
}

/**
 * Loads `load()` now and again after `every(data)` ms, or never again when that is null
 * (a finished deployment). While the server is unreachable it retries with backoff
 * (1 s, 2 s, 4 s ... 10 s) and reports that to the banner. `deps` restart the polling.
 */
export function usePoll<T>(
  load: () => Promise<T>,
  every: (data: T) => number | null,
  deps: unknown[],
): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const kick = useRef<() => void>(() => {});

  useEffect(() => {
    setData(null);
    setError(null);
    let stopped = false;
    let timer: number | undefined;
    let failures = 0;
    let running = false;
    const schedule = (ms: number) => {
      clearTimeout(timer);
      timer = window.setTimeout(tick, ms);
    };
    async function tick() {
      if (stopped || running) return;
      running = true;
      try {
        const value = await load();
        if (stopped) return;
        failures = 0;
        reportUp();
        setData(value);
        setError(null);
        const next = every(value);
        if (next !== null) schedule(next);
      } catch (e) {
        if (stopped) return;
        if (e instanceof Unreachable) {
          failures += 1;
          const delay = backoff(failures);
          reportDown(delay);
          schedule(delay);
        } else if (e instanceof ApiError) {
          setError(e.message);
          // 401 signs out (auth.rejected); anything else may be passing: look again later.
          if (e.status !== 401) schedule(5000);
        } else {
          setError(String(e));
        }
      } finally {
        running = false;
      }
    }
    kick.current = () => {
      failures = 0;
      schedule(0);
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);

  return { data, error, reload: () => kick.current() };
}

/** The current time, re-rendering every second while `ticking` (running stages' clocks). */
export function useNow(ticking: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!ticking) return;
    setNow(Date.now());
    const t = window.setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [ticking]);
  return now;
}

/**
 * Wraps a user action (a POST): `busy` while it runs, its error shown in the alert region,
 * `done` called with the result.
 */
export function useAction<A extends unknown[], R>(
  act: (...args: A) => Promise<R>,
  done: (result: R) => void,
): { run: (...args: A) => void; busy: boolean } {
  const [busy, setBusy] = useState(false);
  const run = (...args: A) => {
    if (busy) return;
    setBusy(true);
    act(...args)
      .then(done, (e: unknown) => {
        if (e instanceof Unreachable) showError("Server unreachable: the action was not sent.");
        else if (e instanceof ApiError && e.status !== 401) showError(e.message);
        else if (!(e instanceof ApiError)) showError(String(e));
      })
      .finally(() => setBusy(false));
  };
  return { run, busy };
}
