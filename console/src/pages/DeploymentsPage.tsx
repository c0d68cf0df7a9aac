// Deployments, newest first, filtered by app and status (kept in the query string).

import { api } from "../api";
import { DeploymentTable } from "../components/DeploymentTable";
import { usePoll } from "../hooks";
import { setQuery, useLocation } from "../router";

const STATUS_FILTERS: [string, string][] = [
  ["", "Any"],
  ["PENDING,PLANNED,RUNNING,ROLLING_BACK", "Not finished"],
  ["PENDING", "Pending"],
  ["RUNNING", "Running"],
  ["ROLLING_BACK", "Rolling back"],
  ["SUCCESS", "Success"],
  ["FAILURE", "Failure"],
  ["CANCELLED", "Cancelled"],
];

export function DeploymentsPage() {
  const { query } = useLocation();
  const app = query.get("app") ?? "";
  const status = query.get("status") ?? "";
  const list = usePoll(() => api.deployments({ app, status, limit: 100 }), () => 3000, [app, status]);
  const apps = usePoll(api.apps, () => 30_000, []);
  const names = (apps.data ?? []).map((a) => a.name).sort();

  return (
    <section aria-labelledby="deployments-title">
      <h1 id="deployments-title">Deployments</h1>
      <form class="filters" role="search" aria-label="Filter deployments" onSubmit={(e) => e.preventDefault()}>
        <label>
          App
          <select value={app} onChange={(e) => setQuery({ app: (e.target as HTMLSelectElement).value, status })}>
            <option value="">Any</option>
            {names.map((n) => (
              <option value={n}>{n}</option>
            ))}
            {app && !names.includes(app) && <option value={app}>{app}</option>}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => setQuery({ app, status: (e.target as HTMLSelectElement).value })}>
            {STATUS_FILTERS.map(([v, text]) => (
              <option value={v}>{text}</option>
            ))}
            {status && !STATUS_FILTERS.some(([v]) => v === status) && <option value={status}>{status}</option>}
          </select>
        </label>
      </form>
      {list.error && <p class="notice notice-error">{list.error}</p>}
      {!list.data && !list.error && <p class="loading">Loading deployments…</p>}
      {list.data && list.data.length === 0 && <p class="empty">No deployment matches.</p>}
      {list.data && list.data.length > 0 && <DeploymentTable list={list.data} showApp={true} />}
    </section>
  );
}
