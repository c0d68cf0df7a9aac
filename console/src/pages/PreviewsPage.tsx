// Plan previews, newest first, of a repository and one of its pull requests: what merging
// each head would change, and how far each preview has got.

import { api, type Preview } from "../api";
import { Badge } from "../components/Badge";
import { ago, shortId, shortSha } from "../format";
import { usePoll } from "../hooks";
import { setQuery, useLocation } from "../router";

/** A preview's time (milliseconds since the epoch) as RFC 3339, as the format helpers read it. */
export function iso(millis: number | null | undefined): string | null {
  return millis === null || millis === undefined ? null : new Date(millis).toISOString();
}

/** "#42", or "—" for a preview asked for through the API. */
export function pullRequest(p: Preview): string {
  return p.pr === null ? "—" : `#${p.pr}`;
}

export function PreviewsPage() {
  const { query } = useLocation();
  const repo = query.get("repo") ?? "";
  const pr = repo ? (query.get("pr") ?? "") : "";
  const list = usePoll(() => api.previews({ repo, pr, limit: 100 }), () => 5000, [repo, pr]);
  const shown = list.data ?? null;
  const now = Date.now();
  const filter = (next: { repo?: string; pr?: string }) => setQuery({ repo, pr, ...next });
  return (
    <section aria-labelledby="previews-title">
      <h1 id="previews-title">Plan previews</h1>
      <p class="hint">
        A pull request to a watched branch (or <code>gannet plan-preview --head SHA</code>) gets a plan preview: each
        app the changes touch, read against its platform with the preview credentials, and what merging would change.
        The pull request's check run links here.
      </p>
      <form class="filters" role="search" aria-label="Filter plan previews" onSubmit={(e) => e.preventDefault()}>
        <label>
          Repository
          <input
            type="text"
            value={repo}
            placeholder="any"
            data-testid="filter-repo"
            onChange={(e) => filter({ repo: (e.target as HTMLInputElement).value.trim() })}
          />
        </label>
        <label>
          Pull request
          <input
            type="number"
            min="1"
            value={pr}
            disabled={!repo}
            title={repo ? undefined : "Name the repository first"}
            data-testid="filter-pr"
            onChange={(e) => filter({ pr: (e.target as HTMLInputElement).value.trim() })}
          />
        </label>
      </form>
      {list.error && <p class="notice notice-error">{list.error}</p>}
      {!shown && !list.error && <p class="loading">Loading plan previews…</p>}
      {shown && shown.length === 0 && <p class="empty">No plan preview matches.</p>}
      {shown && shown.length > 0 && (
        <div class="table-wrap">
          <table class="collapse" data-testid="previews">
            <thead>
              <tr>
                <th scope="col">Preview</th>
                <th scope="col">Repository</th>
                <th scope="col">Pull request</th>
                <th scope="col">Head</th>
                <th scope="col">Status</th>
                <th scope="col">Result</th>
                <th scope="col">Age</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((p) => (
                <tr key={p.id} data-testid="preview-row" data-status={p.status} data-result={p.result}>
                  <th scope="row">
                    <a href={`/previews/${encodeURIComponent(p.id)}`} title={p.id}>
                      <code>{shortId(p.id)}</code>
                    </a>
                  </th>
                  <td data-label="Repository">{p.repo}</td>
                  <td data-label="Pull request">{pullRequest(p)}</td>
                  <td data-label="Head">
                    <code title={p.head}>{shortSha(p.head)}</code>
                  </td>
                  <td data-label="Status">
                    <Badge status={p.status} />
                  </td>
                  <td data-label="Result">
                    <Badge status={p.result} />
                  </td>
                  <td data-label="Age" title={iso(p.created_at) ?? ""}>
                    {ago(iso(p.created_at), now)}
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
