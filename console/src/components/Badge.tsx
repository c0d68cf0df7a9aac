// A status as a coloured label whose text says the status (colour is never the only cue).

import { words } from "../format";

const TONE: Record<string, string> = {
  SUCCESS: "ok",
  SYNCED: "ok",
  HEALTHY: "ok",
  pass: "ok",
  FAILURE: "bad",
  OUT_OF_SYNC: "warn",
  UNHEALTHY: "bad",
  INVALID_CONFIG: "bad",
  fail: "bad",
  RUNNING: "busy",
  DEPLOYING: "busy",
  ROLLING_BACK: "warn",
  DEGRADED: "bad",
  MISSING: "bad",
  PROGRESSING: "busy",
  PINNED: "warn",
  PAUSED: "warn",
  BEHIND: "busy",
  PENDING: "wait",
  PLANNED: "wait",
  WAITING: "wait",
  // Plan previews: a change is worth a look, not a failure.
  QUEUED: "wait",
  DONE: "ok",
  NO_CHANGES: "ok",
  CHANGES: "warn",
  ERROR: "bad",
  FAILED: "bad",
};

export function Badge({ status, label }: { status: string; label?: string }) {
  const tone = TONE[status] ?? "muted";
  return <span class={`badge badge-${tone}`}>{label ?? words(status)}</span>;
}
