// Deployment chains (an app's spec.postSync.chain), newest first, filtered by status: which
// app started each, how far its blocks have got, and why it ended as it did.

import { api, type Chain } from "../api";
import { Badge } from "../components/Badge";
import { ago, shortId } from "../format";
import { usePoll } from "../hooks";
import { setQuery, useLocation } from "../router";

const STATUS_FILTERS: [string, string][] = [
  ["", "Any"],
  ["RUNNING", "Running"],
  ["SUCCESS", "Success"],
  ["FAILURE", "Failure"],
  ["CANCELLED", "Cancelled"],
];

/** "2 of 3": the blocks that have deployed, of all (block 0, the first deployment, included). */
export function progress(c: Chain): string {
  const done = c.blocks.filter((b) => b.status === "SUCCESS").length;
  return `${done} of ${c.blocks.length}`;
}

export function ChainsPage() {
  const { query } = useLocation();
  const status = query.get("status") ?? "";
  const list = usePoll(() => api.chains({ status, limit: 100 }), () => 3000, [status]);
  const shown = list.data ?? null;
  const now = Date.now();
  return (
    <section aria-labelledby="chains-title">
      <h1 id="chains-title">Deployment chains</h1>
      <p class="hint">
        An app whose config has <code>spec.postSync.chain</code> starts a chain when it deploys successfully: the apps
        each block names deploy in order, a block only after the one before it has.
      </p>
      <form class="filters" role="search" aria-label="Filter chains" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status
          <select value={status} onChange={(e) => setQuery({ status: (e.target as HTMLSelectElement).value })}>
            {STATUS_FILTERS.map(([v, text]) => (
              <option value={v}>{text}</option>
            ))}
          </select>
        </label>
      </form>
      {list.error && <p class="notice notice-error">{list.error}</p>}
      {!shown && !list.error && <p class="loading">Loading chains…</p>}
      {shown && shown.length === 0 && <p class="empty">No chain matches.</p>}
      {shown && shown.length > 0 && (
        <div class="table-wrap">
          <table class="collapse" data-testid="chains">
            <thead>
              <tr>
                <th scope="col">Chain</th>
                <th scope="col">Started by</th>
                <th scope="col">Status</th>
                <th scope="col">Blocks done</th>
                <th scope="col">Created</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((c) => (
                <tr key={c.id} data-testid="chain-row" data-status={c.status}>
                  <th scope="row">
                    <a href={`/chains/${encodeURIComponent(c.id)}`}>
                      <code>{shortId(c.id)}</code>
                    </a>
                  </th>
                  <td data-label="Started by">
                    <a href={`/apps/${encodeURIComponent(c.app)}`}>{c.app}</a>
                  </td>
                  <td data-label="Status">
                    <Badge status={c.status} />
                  </td>
                  <td data-label="Blocks done">{progress(c)}</td>
                  <td data-label="Created" title={c.created_at}>
                    {ago(c.created_at, now)}
                  </td>
                  <td data-label="Reason" class="reason">
                    {c.status_reason}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
