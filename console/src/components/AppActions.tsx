// Sync, Pause and Rollback for one app. Rendered only for callers whose role may deploy.

import { useState } from "preact/hooks";
import { api, type App, type Deployment } from "../api";
import { dateTime, shortSha } from "../format";
import { useAction } from "../hooks";
import { navigate } from "../router";

type Open = "none" | "pause" | "rollback";

export function AppActions(props: { app: App; history: Deployment[]; changed: () => void }) {
  const { app, history, changed } = props;
  const [open, setOpen] = useState<Open>("none");
  const [strategy, setStrategy] = useState("");
  const [reason, setReason] = useState("");
  const [target, setTarget] = useState("");
  const toDeployment = (d: Deployment) => navigate(`/deployments/${encodeURIComponent(d.id)}`);
  const sync = useAction(api.sync, toDeployment);
  const pause = useAction(api.pause, () => {
    setOpen("none");
    setReason("");
    changed();
  });
  const rollback = useAction(api.rollback, toDeployment);

  // Earlier successful deployments: every SUCCESS but the newest (what runs now).
  const earlier = history.filter((d) => d.status === "SUCCESS").slice(1);
  const toggle = (which: Open) => setOpen(open === which ? "none" : which);

  return (
    <div class="actions">
      <div class="action-row">
        <label class="inline">
          Strategy
          <select value={strategy} onChange={(e) => setStrategy((e.target as HTMLSelectElement).value)}>
            <option value="">As configured</option>
            <option value="QUICK_SYNC">Quick sync</option>
            <option value="PIPELINE">Pipeline</option>
          </select>
        </label>
        <button
          type="button"
          data-testid="sync"
          disabled={sync.busy}
          onClick={() => sync.run(app.name, (strategy || undefined) as "QUICK_SYNC" | "PIPELINE" | undefined)}
        >
          {sync.busy ? "Syncing…" : "Sync"}
        </button>
        {!app.paused && (
          <button
            type="button"
            class="secondary"
            data-testid="pause"
            aria-expanded={open === "pause"}
            onClick={() => toggle("pause")}
          >
            Pause
          </button>
        )}
        <button
          type="button"
          class="secondary"
          data-testid="rollback"
          aria-expanded={open === "rollback"}
          onClick={() => toggle("rollback")}
        >
          Roll back
        </button>
      </div>
      {open === "pause" && (
        <form
          class="action-panel"
          onSubmit={(e) => {
            e.preventDefault();
            pause.run(app.name, reason.trim());
          }}
        >
          <p>A paused app gets no new deployments until it is resumed.</p>
          <label>
            Reason (optional)
            <input
              type="text"
              maxLength={256}
              value={reason}
              onInput={(e) => setReason((e.target as HTMLInputElement).value)}
            />
          </label>
          <button type="submit" data-testid="pause-confirm" disabled={pause.busy}>
            Pause {app.name}
          </button>
        </form>
      )}
      {open === "rollback" && (
        <form
          class="action-panel"
          onSubmit={(e) => {
            e.preventDefault();
            rollback.run(app.name, target || undefined);
          }}
        >
          <label>
            Roll back to
            <select value={target} onChange={(e) => setTarget((e.target as HTMLSelectElement).value)}>
              <option value="">The previous successful deployment</option>
              {earlier.map((d) => (
                <option value={d.id}>
                  {shortSha(d.commit)} {d.commit_message.split("\n")[0].slice(0, 60)} ({dateTime(d.completed_at)})
                </option>
              ))}
            </select>
          </label>
          <p class="hint">
            The rollback pins the app to that commit (it shows as paused) until it is resumed.
          </p>
          <button type="submit" class="danger" data-testid="rollback-confirm" disabled={rollback.busy}>
            Roll back {app.name}
          </button>
        </form>
      )}
    </div>
  );
}
