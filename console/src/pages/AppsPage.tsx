// Applications: sync status (with the drifted fields), paused marker and last deployment,
// filtered by status, kind and label; the filters live in the query string.

import { api, type App, type Deployment, type SyncStatus } from "../api";
import { Badge } from "../components/Badge";
import { DriftTable } from "../components/Tables";
import { ago, shortSha } from "../format";
import { usePoll } from "../hooks";
import { setQuery, useLocation } from "../router";

const STATUSES: SyncStatus[] = ["SYNCED", "OUT_OF_SYNC", "DEPLOYING", "INVALID_CONFIG", "UNKNOWN"];

interface Data {
  apps: App[];
  /** Each app's newest deployment, by app name. */
  last: Map<string, Deployment>;
}

async function load(): Promise<Data> {
  const [apps, deployments] = await Promise.all([api.apps(), api.deployments({ limit: 500 })]);
  const last = new Map<string, Deployment>();
  for (const d of deployments) if (!last.has(d.app)) last.set(d.app, d);
  return { apps, last };
}

/** "env=prod" matches that label's value; "env" matches any app that has the label. */
function labelMatches(app: App, filter: string): boolean {
  if (!filter) return true;
  const eq = filter.indexOf("=");
  if (eq < 0) return filter.trim() in app.labels;
  return app.labels[filter.slice(0, eq).trim()] === filter.slice(eq + 1).trim();
}

export function AppsPage() {
  const { query } = useLocation();
  const { data, error } = usePoll(load, () => 5000, []);
  const now = Date.now(); // "5m ago" is refreshed with each poll
  const filters = {
    status: query.get("status") ?? "",
    kind: query.get("kind") ?? "",
    label: query.get("label") ?? "",
  };
  const update = (k: keyof typeof filters) => (e: Event) =>
    setQuery({ ...filters, [k]: (e.target as HTMLInputElement).value });

  const kinds = [...new Set((data?.apps ?? []).map((a) => a.kind))].sort();
  const shown = (data?.apps ?? []).filter(
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
      {!data && !error && <p class="loading">Loading applications…</p>}
      {data && shown.length === 0 && (
        <p class="empty">
          {data.apps.length === 0
            ? "No applications yet: gannet lists the apps it finds in the repositories of gannet.yaml."
            : "No application matches these filters."}
        </p>
      )}
      {data && shown.length > 0 && (
        <div class="table-wrap">
          <table class="apps" data-testid="apps">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Sync status</th>
                <th scope="col">Last deployment</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((a) => (
                <AppRow key={a.id} app={a} last={data.last.get(a.name)} now={now} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function AppRow({ app, last, now }: { app: App; last?: Deployment; now: number }) {
  const drift = app.drift ?? [];
  return (
    <tr>
      <th scope="row">
        <a href={`/apps/${encodeURIComponent(app.name)}`}>{app.name}</a>
        {app.paused && (
          <>
            {" "}
            {app.paused.commit ? (
              <Badge status="PINNED" label={`pinned at ${shortSha(app.paused.commit)}`} />
            ) : (
              <Badge status="PAUSED" label="paused" />
            )}
          </>
        )}
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
      <td>{app.kind}</td>
      <td>
        <Badge status={app.sync_status} />{" "}
        <span data-testid="app-health" data-health={app.no_live_state ? "NO_LIVE_STATE" : app.health}>
          {app.no_live_state ? <Badge status="UNKNOWN" label="no live state" /> : app.health && <Badge status={app.health} />}
        </span>
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
      <td>
        {last ? (
          <>
            <Badge status={last.status} />{" "}
            <a href={`/deployments/${encodeURIComponent(last.id)}`}>
              {shortSha(last.commit)} · {ago(last.created_at, now)}
            </a>
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </td>
    </tr>
  );
}
