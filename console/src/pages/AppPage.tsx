// One application: sync status, health, last result, paused banner and how far the branch
// has moved on, what deploying the branch head (or another commit) would change, live
// resources, drift, deployment history, and the actions the caller's role allows.

import { useState } from "preact/hooks";
import { api, type Whoami } from "../api";
import { AppActions } from "../components/AppActions";
import { BranchNote, HealthBadge, LastResult } from "../components/AppStatus";
import { Badge } from "../components/Badge";
import { DeploymentTable } from "../components/DeploymentTable";
import { Diff, useDiff } from "../components/Diff";
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
        <dd>
          <HealthBadge app={a} />
        </dd>
        <dt>Last deployment</dt>
        <dd>
          <LastResult app={a} now={now} />
        </dd>
        {(a.paused || (a.ahead ?? 0) > 0) && (
          <>
            <dt>Branch</dt>
            <dd>
              <BranchNote app={a} />
              {a.head_commit && (
                <>
                  {" "}
                  <span class="muted">
                    head <code title={a.head_commit}>{shortSha(a.head_commit)}</code>
                  </span>
                </>
              )}
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

      <ChangesAtCommit app={a.name} />

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

/**
 * What deploying the branch head, or a commit the user names, would change. Compared on
 * demand, not on every visit: reading some platforms' live state is costly (Terraform plans).
 */
function ChangesAtCommit({ app }: { app: string }) {
  const [commit, setCommit] = useState("");
  const [asked, setAsked] = useState({ commit: "", round: 0 });
  const loaded = useDiff(app, asked.commit, asked.round);
  return (
    <section aria-labelledby="changes-title" data-testid="changes">
      <h2 id="changes-title">What a deployment would change</h2>
      <form
        class="filters"
        aria-label="Compare the live state with a commit"
        onSubmit={(e) => {
          e.preventDefault();
          setAsked({ commit: commit.trim(), round: asked.round + 1 });
        }}
      >
        <label>
          Commit
          <input
            type="text"
            data-testid="diff-commit"
            placeholder="the branch head"
            spellcheck={false}
            autocomplete="off"
            value={commit}
            onInput={(e) => setCommit((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="submit" class="secondary align-end" data-testid="diff-compare">
          Compare with the live state
        </button>
      </form>
      {loaded ? (
        <Diff loaded={loaded} commit={asked.commit} />
      ) : (
        <p class="empty">Compare the live state with the branch head (or a commit on the branch) to see what deploying it would change.</p>
      )}
    </section>
  );
}
