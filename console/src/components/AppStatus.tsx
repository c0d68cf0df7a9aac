// An app's status beyond its sync status, the same in the apps list and on its page: its
// health (or that it has no live state), how its last deployment ended, and whether it is
// paused or pinned while its branch moves on.

import type { App } from "../api";
import { ago, commits, shortId, shortSha } from "../format";
import { Badge } from "./Badge";

/** HEALTHY ... UNKNOWN, or "no live state" for an app no platform plugin deploys. */
export function HealthBadge({ app }: { app: App }) {
  const health = app.no_live_state ? "NO_LIVE_STATE" : (app.health ?? "UNKNOWN");
  return (
    <span data-testid="app-health" data-health={health} title={app.no_live_state ?? undefined}>
      {app.no_live_state ? <Badge status="UNKNOWN" label="no live state" /> : <Badge status={health} label={`health: ${health.toLowerCase()}`} />}
    </span>
  );
}

/** How the last deployment ended, linked; "none" before the first one ended. */
export function LastResult({ app, now }: { app: App; now: number }) {
  const last = app.last_result;
  if (!last) {
    return (
      <span class="muted" data-testid="app-last" data-status="NONE">
        none
      </span>
    );
  }
  return (
    <span data-testid="app-last" data-status={last.status}>
      <Badge status={last.status} />{" "}
      <a href={`/deployments/${encodeURIComponent(last.deployment)}`} title={last.deployment}>
        {shortId(last.deployment)}
      </a>{" "}
      <span class="muted">
        at <code title={last.commit}>{shortSha(last.commit)}</code>, {ago(last.at, now)}
      </span>
    </span>
  );
}

/**
 * Where the app stands against its branch: "pinned at X, the branch is N commits ahead"
 * (amber) when it is paused behind, "pinned at X" or "paused" when paused level with it,
 * "N commits behind its branch" when a deployment is yet to catch up; nothing otherwise.
 */
export function BranchNote({ app }: { app: App }) {
  const ahead = app.ahead ?? 0;
  if (app.paused) {
    const at = app.paused.commit ?? app.running_commit;
    const pin = at ? `pinned at ${shortSha(at)}` : "paused";
    const text = ahead > 0 ? `${pin}, the branch is ${commits(ahead)} ahead` : app.paused.commit ? pin : "paused";
    return (
      <span class="branch-note branch-note-warn" data-testid="app-branch" data-ahead={ahead} data-paused="true">
        <Badge status={app.paused.commit || ahead > 0 ? "PINNED" : "PAUSED"} label={text} />
      </span>
    );
  }
  if (ahead > 0) {
    return (
      <span class="branch-note" data-testid="app-branch" data-ahead={ahead} data-paused="false">
        <Badge status="BEHIND" label={`${commits(ahead)} behind its branch`} />
      </span>
    );
  }
  return null;
}
