// Applications: sync status (with the drifted fields), health, whether the app is paused or
// behind its branch, and how its last deployment ended, filtered by status, kind and label;
// the filters live in the query string. Below 640 px wide each row reads as a card.

import { api, type App, type SyncStatus } from "../api";
import { BranchNote, HealthBadge, LastResult } from "../components/AppStatus";
import { Badge } from "../components/Badge";
import { DriftTable } from "../components/Tables";
import { shortId } from "../format";
import { usePoll } from "../hooks";
import { setQuery, useLocation } from "../router";

const STATUSES: SyncStatus[] = ["SYNCED", "OUT_OF_SYNC", "DEPLOYING", "INVALID_CONFIG", "UNKNOWN"];

/** "env=prod" matches that label's value; "env" matches any app that has the label. */
function labelMatches(app: App, filter: string): boolean {
  if (!filter) return true;
  const eq = filter.indexOf("=");
  if (eq < 0) return filter.trim() in app.labels;
  return app.labels[filter.slice(0, eq).trim()] === filter.slice(eq + 1).trim();
}

export function AppsPage() {
  const { query } = useLocation();
  const { data: apps, error } = usePoll(api.apps, () => 5000, []);
  const now = Date.now(); // "5m ago" is refreshed with each poll
  const filters = {
    status: query.get("status") ?? "",
    kind: query.get("kind") ?? "",
    label: query.get("label") ?? "",
  };
  const update = (k: keyof typeof filters) => (e: Event) =>
    setQuery({ ...filters, [k]: (e.target as HTMLInputElement).value });

  const kinds = [...new Set((apps ?? []).map((a) => a.kind))].sort();
  const shown = (apps ?? []).filter(
    (a) =>
      (!filters.status || a.sync_status === filters.status) &&
      (!filters.kind || a.kind === filters.kind) &&
      labelMatches(a, filters.label),
  );

  return (
    <section aria-labelledby="apps-title">
      <h1 id="apps-title">Applications</h1>
      <form class="filters" role="search" aria-label="Filter applications" onSubmit={(e) => e.preventDefault()}>
        <label>
          Sync status
          <select value={filters.status} onChange={update("status")}>
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Kind
          <select value={filters.kind} onChange={update("kind")}>
            <option value="">Any</option>
            {kinds.map((k) => (
              <option value={k}>{k}</option>
            ))}
            {filters.kind && !kinds.includes(filters.kind) && <option value={filters.kind}>{filters.kind}</option>}
          </select>
        </label>
        <label>
          Label
          <input
            type="search"
            placeholder="env=prod"
            value={filters.label}
            onChange={update("label")}
          />
        </label>
      </form>
      {error && <p class="notice notice-error">{error}</p>}
      {!apps && !error && <p class="loading">Loading applications…</p>}
      {apps && shown.length === 0 && (
        <p class="empty">
          {apps.length === 0
            ? "No applications yet: gannet lists the apps it finds in the repositories of gannet.yaml."
            : "No application matches these filters."}
        </p>
      )}
      {apps && shown.length > 0 && (
        <div class="table-wrap">
          <table class="apps collapse" data-testid="apps">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Status</th>
                <th scope="col">Last deployment</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((a) => (
                <AppRow key={a.id} app={a} now={now} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function AppRow({ app, now }: { app: App; now: number }) {
  const drift = app.drift ?? [];
  return (
    <tr data-app={app.name}>
      <th scope="row">
        <a href={`/apps/${encodeURIComponent(app.name)}`}>{app.name}</a> <BranchNote app={app} />
        {Object.keys(app.labels).length > 0 && (
          <div class="labels">
            {Object.entries(app.labels).map(([k, v]) => (
              <span class="label">
                {k}={v}
              </span>
            ))}
          </div>
        )}
      </th>
      <td data-label="Kind">{app.kind}</td>
      <td data-label="Status">
        <Badge status={app.sync_status} /> <HealthBadge app={app} />
        {app.sync_reason && <div class="reason">{app.sync_reason}</div>}
        {drift.length > 0 && (
          <details class="drift-details">
            <summary>
              {drift.length} drifted field{drift.length === 1 ? "" : "s"}
            </summary>
            <DriftTable drift={drift} />
          </details>
        )}
      </td>
      <td data-label="Last deployment">
        <LastResult app={app} now={now} />
        {app.active_deployment && (
          <div>
            <Badge status="DEPLOYING" />{" "}
            <a href={`/deployments/${encodeURIComponent(app.active_deployment)}`} title={app.active_deployment}>
              {shortId(app.active_deployment)}
            </a>
          </div>
        )}
      </td>
    </tr>
  );
}
