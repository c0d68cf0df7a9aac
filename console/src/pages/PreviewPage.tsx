// One plan preview (the page a pull request's check run links): what merging its head into
// the watched branch would change, app by app (kind, result, summary, the pipeline the merge
// would run), then each app's details as its platform gave them, polled while it runs.

import { api, type AppPreview, type Preview } from "../api";
import { Badge } from "../components/Badge";
import { dateTime, sentence, shortSha } from "../format";
import { usePoll } from "../hooks";
import { iso, pullRequest } from "./PreviewsPage";

const POLL_MS = 2000;

const ENDED = ["DONE", "SUPERSEDED", "FAILED"];

/** What a finished preview says about merging. */
function verdict(p: Preview): string {
  if (p.status === "SUPERSEDED") return "A newer head of the pull request replaced this preview.";
  if (p.status === "FAILED") return "The preview could not be made.";
  if (!ENDED.includes(p.status)) return p.status === "QUEUED" ? "Waiting to start." : "Reading the apps…";
  if (p.result === "CHANGES") return "Merging would change something.";
  if (p.result === "ERROR") return "An app's preview failed.";
  return "Merging changes nothing.";
}

function credentials(read: boolean): string {
  return read
    ? "read with the deploy target's planPreview credentials"
    : "not read from the platform: the app's files are compared";
}

export function PreviewPage({ id }: { id: string }) {
  const poll = usePoll(() => api.preview(id), (p) => (ENDED.includes(p.status) ? null : POLL_MS), [id]);
  const p = poll.data;
  if (!p) {
    return (
      <section>
        <h1>Plan preview {id}</h1>
        {poll.error ? <p class="notice notice-error">{poll.error}</p> : <p class="loading">Loading…</p>}
      </section>
    );
  }
  return (
    <section aria-labelledby="preview-title" data-testid="preview-page">
      <p class="crumbs">
        <a href="/previews">Plan previews</a> /
      </p>
      <h1 id="preview-title">
        Plan preview of {p.repo} {p.pr === null ? `at ${shortSha(p.head)}` : `pull request ${pullRequest(p)}`}
      </h1>
      <div class="status-line" aria-live="polite">
        <span data-testid="preview-status" data-status={p.status}>
          <Badge status={p.status} />
        </span>{" "}
        <span data-testid="preview-result" data-result={p.result}>
          <Badge status={p.result} />
        </span>{" "}
        <span class="reason">{verdict(p)}</span>
      </div>
      {p.reason && (
        <p class="reason" data-testid="preview-reason">
          {sentence(p.reason)}
        </p>
      )}
      <dl class="facts">
        <dt>Head</dt>
        <dd>
          <code>{p.head}</code>
        </dd>
        <dt>Into</dt>
        <dd>
          {p.base_ref}
          {p.base && (
            <>
              {" "}
              at <code title={p.base}>{shortSha(p.base)}</code>
            </>
          )}
          {p.merge_base && (
            <>
              , merge base <code title={p.merge_base}>{shortSha(p.merge_base)}</code>
            </>
          )}
        </dd>
        <dt>{p.pr === null ? "Asked by" : "Opened by"}</dt>
        <dd>
          {p.author}
          {p.fork && " (from a fork)"}
        </dd>
        <dt>Credentials</dt>
        <dd data-testid="preview-credentials">
          {p.credentials
            ? "the deploy targets' planPreview credentials"
            : "none: every app's files are compared, no platform is read"}
        </dd>
        <dt>Created</dt>
        <dd>{dateTime(iso(p.created_at))}</dd>
        <dt>Updated</dt>
        <dd>{dateTime(iso(p.updated_at))}</dd>
        <dt>ID</dt>
        <dd>
          <code>{p.id}</code>
        </dd>
      </dl>
      <h2>Applications</h2>
      {p.apps.length === 0 ? (
        <p class="empty">
          {p.status === "QUEUED" ? "The apps are selected when the preview starts." : "No app is touched by the changes."}
        </p>
      ) : (
        <>
          <div class="table-wrap">
            <table class="collapse" data-testid="preview-apps">
              <thead>
                <tr>
                  <th scope="col">App</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Result</th>
                  <th scope="col">Summary</th>
                  <th scope="col">Pipeline</th>
                </tr>
              </thead>
              <tbody>
                {p.apps.map((a, i) => (
                  <tr key={a.app} data-testid="preview-app" data-app={a.name} data-result={a.result}>
                    <th scope="row">
                      <a href={`#app-${i}`}>{a.name}</a>
                    </th>
                    <td data-label="Kind">{a.kind || "—"}</td>
                    <td data-label="Result">
                      <Badge status={a.result} />
                    </td>
                    <td data-label="Summary" class="reason">
                      {a.summary}
                    </td>
                    <td data-label="Pipeline" class="reason">
                      {a.pipeline || "—"}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {p.apps.map((a, i) => (
            <AppSection key={a.app} app={a} index={i} />
          ))}
        </>
      )}
    </section>
  );
}

function AppSection({ app: a, index }: { app: AppPreview; index: number }) {
  return (
    <section id={`app-${index}`} data-testid="preview-app-details" data-app={a.name} aria-label={`${a.name} details`}>
      <h3>
        {a.name} {a.kind && <span class="muted">({a.kind})</span>} <Badge status={a.result} />
      </h3>
      <dl class="facts">
        <dt>App</dt>
        <dd>
          <code>{a.app}</code>
        </dd>
        <dt>Pipeline</dt>
        <dd>{a.pipeline || "—"}</dd>
        <dt>Why</dt>
        <dd>{a.why || "—"}</dd>
        <dt>Credentials</dt>
        <dd data-testid="app-credentials" data-read={String(a.credentials)}>
          {credentials(a.credentials)}
        </dd>
      </dl>
      {a.details.trim() ? (
        <pre class="log-lines preview-details" data-testid="app-details">
          {a.details}
        </pre>
      ) : (
        <p class="empty">{a.result === "PENDING" ? "Its read is running." : "No details."}</p>
      )}
    </section>
  );
}
