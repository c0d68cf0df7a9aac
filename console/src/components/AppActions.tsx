// Sync, Pause and Rollback for one app. Rendered only for callers whose role may deploy.
// Sync opens a panel first: what deploying the branch head would change (the diff API) and
// the strategy; only Confirm sends the sync, and Cancel closes the panel with nothing sent.

import { useState } from "preact/hooks";
import { api, type App, type Deployment, type Strategy } from "../api";
import { dateTime, shortSha } from "../format";
import { useAction } from "../hooks";
import { navigate } from "../router";
import { Diff, useDiff } from "./Diff";

type Open = "none" | "sync" | "pause" | "rollback";

const STRATEGIES: { value: Strategy | ""; label: string; hint: string }[] = [
  { value: "", label: "Auto", hint: "as the app's config and the commit's changes decide" },
  { value: "QUICK_SYNC", label: "Quick sync", hint: "deploy it all at once" },
  { value: "PIPELINE", label: "Pipeline", hint: "run the app's pipeline" },
];

export function AppActions(props: { app: App; history: Deployment[]; changed: () => void }) {
  const { app, history, changed } = props;
  const [open, setOpen] = useState<Open>("none");
  const [strategy, setStrategy] = useState<Strategy | "">("");
  // Each opening of the sync panel compares the live state with the branch head again.
  const [diffRound, setDiffRound] = useState(0);
  const diff = useDiff(app.name, "", diffRound);
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
  const toggle = (which: Open) => {
    const next = open === which ? "none" : which;
    if (next === "sync") setDiffRound(diffRound + 1);
    setOpen(next);
  };

  return (
    <div class="actions">
      <div class="action-row">
        <button
          type="button"
          data-testid="sync"
          aria-expanded={open === "sync"}
          onClick={() => toggle("sync")}
        >
          Sync…
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
      {open === "sync" && (
        <form
          class="action-panel sync-panel"
          data-testid="sync-panel"
          aria-label={`Sync ${app.name}`}
          onSubmit={(e) => {
            e.preventDefault();
            sync.run(app.name, strategy || undefined);
          }}
        >
          <p>
            <strong>Sync {app.name}</strong> to the head of its branch.
          </p>
          {diff && <Diff loaded={diff} commit="" />}
          <fieldset class="strategies">
            <legend>Strategy</legend>
            {STRATEGIES.map((s) => (
              <label class="check" key={s.value}>
                <input
                  type="radio"
                  name="strategy"
                  value={s.value}
                  data-testid={`strategy-${s.value || "AUTO"}`}
                  checked={strategy === s.value}
                  onChange={() => setStrategy(s.value)}
                />
                <span>
                  {s.label} <span class="muted">({s.hint})</span>
                </span>
              </label>
            ))}
          </fieldset>
          <div class="action-row">
            <button type="submit" data-testid="sync-confirm" disabled={sync.busy}>
              {sync.busy ? "Syncing…" : "Confirm sync"}
            </button>
            <button type="button" class="secondary" data-testid="sync-cancel" onClick={() => setOpen("none")}>
              Cancel
            </button>
          </div>
        </form>
      )}
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
