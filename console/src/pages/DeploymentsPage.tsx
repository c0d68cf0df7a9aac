// Deployments, newest first, a page at a time, filtered by app and status. The filters, the
// page size (`limit`) and the page (`before`, the server's cursor) live in the query string,
// so a page can be linked; "Older" follows the server's `next`, "Newer" goes back along the
// pages this tab has walked (or to the newest when the page was opened from a link).

import { useRef } from "preact/hooks";
import { api } from "../api";
import { DeploymentTable } from "../components/DeploymentTable";
import { usePoll } from "../hooks";
import { href, setQuery, useLocation } from "../router";

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

const PAGE = 50;

export function DeploymentsPage() {
  const { query } = useLocation();
  const app = query.get("app") ?? "";
  const status = query.get("status") ?? "";
  const before = query.get("before") ?? "";
  const limit = Math.min(Math.max(Number(query.get("limit")) || PAGE, 1), 500);
  const list = usePoll(
    () => api.deploymentsPage({ app, status, limit, before }),
    () => 3000,
    [app, status, before, limit],
  );
  const apps = usePoll(api.apps, () => 30_000, []);
  const names = (apps.data ?? []).map((a) => a.name).sort();
  // The cursors of the pages walked through with "Older", newest first ("" is the first page).
  const trail = useRef<string[]>([]);
  // Back to a page of the trail (the browser's Back): the pages after it are no longer behind.
  const at = trail.current.indexOf(before);
  if (at >= 0) trail.current = trail.current.slice(0, at);
  const page = (cursor: string) =>
    href("/deployments", { app, status, limit: limit === PAGE ? "" : String(limit), before: cursor });
  const filter = (changes: { app?: string; status?: string }) => {
    trail.current = [];
    setQuery({ app, status, limit: limit === PAGE ? "" : String(limit), ...changes });
  };
  const newer = trail.current.length > 0 ? trail.current[trail.current.length - 1] : "";
  const next = list.data?.next ?? "";
  const shown = list.data?.deployments ?? null;

  return (
    <section aria-labelledby="deployments-title">
      <h1 id="deployments-title">Deployments</h1>
      <form class="filters" role="search" aria-label="Filter deployments" onSubmit={(e) => e.preventDefault()}>
        <label>
          App
          <select value={app} onChange={(e) => filter({ app: (e.target as HTMLSelectElement).value })}>
            <option value="">Any</option>
            {names.map((n) => (
              <option value={n}>{n}</option>
            ))}
            {app && !names.includes(app) && <option value={app}>{app}</option>}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => filter({ status: (e.target as HTMLSelectElement).value })}>
            {STATUS_FILTERS.map(([v, text]) => (
              <option value={v}>{text}</option>
            ))}
            {status && !STATUS_FILTERS.some(([v]) => v === status) && <option value={status}>{status}</option>}
          </select>
        </label>
      </form>
      {list.error && <p class="notice notice-error">{list.error}</p>}
      {!shown && !list.error && <p class="loading">Loading deployments…</p>}
      {shown && shown.length === 0 && <p class="empty">{before ? "No older deployment matches." : "No deployment matches."}</p>}
      {shown && shown.length > 0 && <DeploymentTable list={shown} showApp={true} />}
      {shown && (before || next) && (
        <nav class="pager" aria-label="Pages of deployments" data-testid="pager">
          {before ? (
            <a href={page(newer)} data-testid="newer" onClick={() => trail.current.pop()}>
              ← {trail.current.length > 0 ? "Newer" : "Newest"}
            </a>
          ) : (
            <span />
          )}
          {next && (
            <a href={page(next)} data-testid="older" onClick={() => trail.current.push(before)}>
              Older →
            </a>
          )}
        </nav>
      )}
    </section>
  );
}
