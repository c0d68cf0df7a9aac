// One deployment: what and why, its pipeline updating live (polled every second until the
// deployment ends), each stage's log, and Approve / Cancel when the caller's role allows.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, isTerminal, type Deployment, type Stage, type Whoami } from "../api";
import { Badge } from "../components/Badge";
import { StageList, shownStages } from "../components/StageList";
import { dateTime, elapsed, sentence, shortId, shortSha, words } from "../format";
import { useAction, useNow, usePoll } from "../hooks";
import { useLocation } from "../router";

const POLL_MS = 1000;

export function DeploymentPage({ id, may }: { id: string; may: Whoami["may"] }) {
  const { query } = useLocation();
  const poll = usePoll(() => api.deployment(id), (d) => (isTerminal(d.status) ? null : POLL_MS), [id]);
  const d = poll.data;
  const running = !!d && d.stages.some((s) => s.status === "RUNNING");
  const now = useNow(running);
  const announcement = useTransitions(d);
  const approve = useAction(api.approve, () => poll.reload());

  if (!d) {
    return (
      <section>
        <h1>Deployment {shortId(id)}</h1>
        {poll.error ? <p class="notice notice-error">{poll.error}</p> : <p class="loading">Loading…</p>}
      </section>
    );
  }

  const approveButton = (s: Stage) =>
    may.approve && (
      <button
        type="button"
        data-testid="approve"
        disabled={approve.busy}
        onClick={() => approve.run(d.id, s.id)}
      >
        {approve.busy ? "Approving…" : "Approve"}
      </button>
    );

  return (
    <section aria-labelledby="deployment-title" data-testid="deployment-page">
      <p class="crumbs">
        <a href="/deployments">Deployments</a> / <a href={`/apps/${encodeURIComponent(d.app)}`}>{d.app}</a> /
      </p>
      <h1 id="deployment-title">
        Deployment of {d.app} <code title={d.commit}>{shortSha(d.commit)}</code>
      </h1>
      <div class="status-line" aria-live="polite">
        <span data-testid="deployment-status" data-status={d.status}>
          <Badge status={d.status} />
        </span>{" "}
        {d.status_reason && <span class="reason">{d.status_reason}</span>}
      </div>
      <p class="sr-only" aria-live="polite">
        {announcement}
      </p>
      {poll.error && <p class="notice notice-error">{poll.error}</p>}
      {d.status === "PENDING" && (
        <div class="banner banner-wait" role="status">
          <p>
            <strong>Waiting to start</strong>
            {d.status_reason ? `: ${sentence(d.status_reason)}` : "."}
            {d.blocked_by && (
              <>
                {" "}
                It waits for deployment{" "}
                <a href={`/deployments/${encodeURIComponent(d.blocked_by)}`}>{shortId(d.blocked_by)}</a> to finish.
              </>
            )}
          </p>
        </div>
      )}
      {d.rollback_of && (
        <div class="banner banner-info">
          <p>
            A rollback to the commit of deployment{" "}
            <a href={`/deployments/${encodeURIComponent(d.rollback_of)}`}>{shortId(d.rollback_of)}</a>.
          </p>
        </div>
      )}
      {d.chain && (
        <div class="banner banner-info" data-testid="chain-link">
          <p>
            {d.trigger === "ON_CHAIN" ? "Deployed by" : "Started"} deployment chain{" "}
            <a href={`/chains/${encodeURIComponent(d.chain)}`}>{shortId(d.chain)}</a>.
          </p>
        </div>
      )}
      {d.gate_skip && (
        <div class="banner banner-paused" data-testid="gate-skip">
          <p>
            The approval stage was skipped by {d.gate_skip.by}: {d.gate_skip.reason}
          </p>
        </div>
      )}
      <dl class="facts">
        <dt>Commit</dt>
        <dd>
          {d.commit_url ? (
            <a href={d.commit_url} data-testid="commit-link" rel="noreferrer" target="_blank">
              <code title={d.commit}>{shortSha(d.commit)}</code>
            </a>
          ) : (
            <code title={d.commit}>{shortSha(d.commit)}</code>
          )}{" "}
          on {d.branch}
          {d.commit_author && <> by {d.commit_author}</>}
          {d.commit_message && <div class="message">{d.commit_message.split("\n")[0]}</div>}
        </dd>
        <dt>Trigger</dt>
        <dd>
          {words(d.trigger)}
          {d.commander && ` by ${d.commander}`}
        </dd>
        {d.strategy && (
          <>
            <dt>Strategy</dt>
            <dd>{words(d.strategy)}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>{dateTime(d.created_at)}</dd>
        <dt>{d.completed_at ? "Took" : "Running for"}</dt>
        <dd>{elapsed(d.planned_at ?? d.created_at, d.completed_at, now)}</dd>
        {d.summary && (
          <>
            <dt>Summary</dt>
            <dd>{d.summary}</dd>
          </>
        )}
        <dt>ID</dt>
        <dd>
          <code>{d.id}</code>
        </dd>
      </dl>
      {may.deploy && !isTerminal(d.status) && <CancelControl id={d.id} changed={poll.reload} />}
      <h2>Pipeline</h2>
      <StageList deployment={d} now={now} linked={query.get("stage")} approve={approveButton} />
    </section>
  );
}

function CancelControl({ id, changed }: { id: string; changed: () => void }) {
  const [asking, setAsking] = useState(false);
  const [noRollback, setNoRollback] = useState(false);
  const cancel = useAction(api.cancel, () => {
    setAsking(false);
    changed();
  });
  return (
    <div class="actions">
      <button
        type="button"
        class="danger"
        data-testid="cancel"
        aria-expanded={asking}
        onClick={() => setAsking(!asking)}
      >
        Cancel deployment
      </button>
      {asking && (
        <form
          class="action-panel"
          onSubmit={(e) => {
            e.preventDefault();
            cancel.run(id, noRollback);
          }}
        >
          <label class="check">
            <input
              type="checkbox"
              checked={noRollback}
              onChange={(e) => setNoRollback((e.target as HTMLInputElement).checked)}
            />
            Skip the rollback stages
          </label>
          <button type="submit" class="danger" data-testid="cancel-confirm" disabled={cancel.busy}>
            Confirm cancel
          </button>
        </form>
      )}
    </div>
  );
}

/** A sentence for screen readers about the latest stage status change ("" at first load). */
function useTransitions(d: Deployment | null): string {
  const seen = useRef<Map<string, string> | null>(null);
  const [text, setText] = useState("");
  useEffect(() => {
    if (!d) return;
    const before = seen.current;
    const changes: string[] = [];
    for (const s of shownStages(d)) {
      const old = before?.get(s.id);
      if (before && old !== s.status) changes.push(`${s.name} ${words(s.status)}`);
    }
    seen.current = new Map(d.stages.map((s) => [s.id, s.status]));
    if (changes.length) setText(`Stage ${changes.join(", ")}.`);
  }, [d]);
  return text;
}
