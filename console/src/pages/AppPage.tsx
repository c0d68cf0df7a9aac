// One application: sync status, paused banner, live resources, drift, deployment history,
// and the actions the caller's role allows.

import { api, type Whoami } from "../api";
import { AppActions } from "../components/AppActions";
import { Badge } from "../components/Badge";
import { DeploymentTable } from "../components/DeploymentTable";
import { DriftTable, LiveTable } from "../components/Tables";
import { ago, dateTime, sentence, shortId, shortSha } from "../format";
import { useAction, usePoll } from "../hooks";

export function AppPage({ name, may }: { name: string; may: Whoami["may"] }) {
  const app = usePoll(() => api.app(name), () => 3000, [name]);
  const history = usePoll(() => api.deployments({ app: name, limit: 50 }), () => 3000, [name]);
  const resume = useAction(api.resume, () => app.reload());
  const a = app.data;
  const now = Date.now();

  if (!a) {
    return (
      <section>
        <h1>{name}</h1>
        {app.error ? <p class="notice notice-error">{app.error}</p> : <p class="loading">Loading…</p>}
      </section>
    );
  }
  const drift = a.drift ?? [];
  const live = a.live ?? [];
  return (
    <section aria-labelledby="app-title" data-testid="app-page">
      <p class="crumbs">
        <a href="/apps">Applications</a> /
      </p>
      <h1 id="app-title">{a.name}</h1>
      <div class="status-line" aria-live="polite">
        <span data-testid="app-status" data-status={a.sync_status}>
          <Badge status={a.sync_status} />
        </span>{" "}
        <span class="reason">{a.sync_reason}</span>
      </div>
      {app.error && <p class="notice notice-error">{app.error}</p>}
      {a.paused && (
        <div class="banner banner-paused" role="status" data-testid="paused">
          <p>
            <strong>Paused</strong> by {a.paused.by} {ago(a.paused.at, now)} (
            {dateTime(a.paused.at)}){a.paused.reason ? `: ${sentence(a.paused.reason)}` : "."}
            {a.paused.commit && (
              <>
                {" "}
                Pinned to commit <code title={a.paused.commit}>{shortSha(a.paused.commit)}</code> by a
                rollback.
              </>
            )}{" "}
            No new deployment starts until it is resumed.
          </p>
          {may.deploy && (
            <button type="button" data-testid="resume" disabled={resume.busy} onClick={() => resume.run(a.name)}>
              Resume
            </button>
          )}
        </div>
      )}
      <dl class="facts">
        <dt>Kind</dt>
        <dd>{a.kind}</dd>
        <dt>Config</dt>
        <dd>
          <code>
            {a.repo}:{a.path}
          </code>
        </dd>
        <dt>Health</dt>
        <dd data-testid="app-health">
          {a.no_live_state ? <Badge status="UNKNOWN" label="no live state" /> : <Badge status={a.health ?? "UNKNOWN"} />}
        </dd>
        <dt>Last deployment</dt>
        <dd>
          {a.last_result ? (
            <>
              <Badge status={a.last_result.status} />{" "}
              <a href={`/deployments/${encodeURIComponent(a.last_result.deployment)}`}>{shortId(a.last_result.deployment)}</a>
            </>
          ) : (
            <span class="muted">none</span>
          )}
        </dd>
        {a.paused?.commit && (
          <>
            <dt>Pinned</dt>
            <dd>
              <Badge status="PINNED" label={`pinned at ${shortSha(a.paused.commit)}`} /> by a rollback; the branch moves on
              without it until the app is resumed
            </dd>
          </>
        )}
        <dt>Running commit</dt>
        <dd>
          <code title={a.running_commit ?? ""}>{shortSha(a.running_commit)}</code>
        </dd>
        <dt>Active deployment</dt>
        <dd>
          {a.active_deployment ? (
            <a href={`/deployments/${encodeURIComponent(a.active_deployment)}`}>{shortId(a.active_deployment)}</a>
          ) : (
            "none"
          )}
        </dd>
        {Object.keys(a.labels).length > 0 && (
          <>
            <dt>Labels</dt>
            <dd>
              {Object.entries(a.labels).map(([k, v]) => (
                <span class="label">
                  {k}={v}
                </span>
              ))}
            </dd>
          </>
        )}
      </dl>
      {may.deploy && <AppActions app={a} history={history.data ?? []} changed={app.reload} />}

      <h2>Drift</h2>
      {drift.length > 0 ? (
        <DriftTable
          drift={drift}
          caption={`Fields that differ from Git${a.drift_changed_at ? `, since ${dateTime(a.drift_changed_at)}` : ""}`}
        />
      ) : (
        <p class="empty" data-testid="drift-empty">
          {a.no_live_state
            ? `No live state: ${a.no_live_state}, so nothing is compared with Git.`
            : a.sync_status === "SYNCED" && (a.live ?? []).length > 0
              ? "No drift: the live state matches Git."
              : "No drifted fields reported."}
        </p>
      )}

      <h2>Live resources</h2>
      {live.length > 0 ? <LiveTable live={live} /> : <p class="empty">No live resources reported.</p>}

      <h2>Deployments</h2>
      {history.error && <p class="notice notice-error">{history.error}</p>}
      {history.data && history.data.length > 0 && <DeploymentTable list={history.data} showApp={false} />}
      {history.data && history.data.length === 0 && <p class="empty">No deployments yet.</p>}
    </section>
  );
}
