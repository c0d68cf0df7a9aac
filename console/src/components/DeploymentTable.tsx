// A list of deployments, newest first, under a heading per day ("Today", "Yesterday", then
// dates): used by the deployments page and an app's history. A rollback says which
// deployment's commit it brings back. Below 640 px wide each row reads as a card.

import type { Deployment } from "../api";
import { ago, dayKey, dayLabel, elapsed, shortId, shortSha, words } from "../format";
import { Badge } from "./Badge";

/** `list` cut into runs of the same day (the viewer's), in order. */
function byDay(list: Deployment[]): Deployment[][] {
  const days: Deployment[][] = [];
  let key = "";
  for (const d of list) {
    const k = dayKey(Date.parse(d.created_at));
    if (days.length === 0 || k !== key) days.push([]);
    key = k;
    days[days.length - 1].push(d);
  }
  return days;
}

export function DeploymentTable({ list, showApp }: { list: Deployment[]; showApp: boolean }) {
  const now = Date.now();
  const columns = showApp ? 7 : 6;
  return (
    <div class="table-wrap">
      <table class="deployments collapse" data-testid="deployments">
        <thead>
          <tr>
            <th scope="col">Deployment</th>
            {showApp && <th scope="col">App</th>}
            <th scope="col">Commit</th>
            <th scope="col">Status</th>
            <th scope="col">Trigger</th>
            <th scope="col">Created</th>
            <th scope="col">Took</th>
          </tr>
        </thead>
        {byDay(list).map((day) => {
          const label = dayLabel(day[0].created_at, now);
          return (
            <tbody key={label} data-testid="deployments-day" data-day={label}>
              <tr class="day">
                <th scope="colgroup" colSpan={columns}>
                  {label}
                </th>
              </tr>
              {day.map((d) => (
                <Row key={d.id} d={d} showApp={showApp} now={now} />
              ))}
            </tbody>
          );
        })}
      </table>
    </div>
  );
}

function Row({ d, showApp, now }: { d: Deployment; showApp: boolean; now: number }) {
  return (
    <tr data-deployment={d.id}>
      <th scope="row">
        <a href={`/deployments/${encodeURIComponent(d.id)}`} title={d.id}>
          {shortId(d.id)}
        </a>
        {d.rollback_of && (
          <div class="rollback-of" data-testid="rollback-of" data-of={d.rollback_of}>
            rollback of{" "}
            <a href={`/deployments/${encodeURIComponent(d.rollback_of)}`} title={d.rollback_of}>
              {shortId(d.rollback_of)}
            </a>
          </div>
        )}
      </th>
      {showApp && (
        <td data-label="App">
          <a href={`/apps/${encodeURIComponent(d.app)}`}>{d.app}</a>
        </td>
      )}
      <td class="commit" data-label="Commit">
        <code title={d.commit}>{shortSha(d.commit)}</code> <span class="message">{d.commit_message.split("\n")[0]}</span>
      </td>
      <td data-label="Status">
        <Badge status={d.status} />
        {d.status_reason && <div class="reason">{d.status_reason}</div>}
      </td>
      <td data-label="Trigger">
        {words(d.trigger.replace(/^ON_/, ""))}
        {d.commander && <div class="muted">by {d.commander}</div>}
      </td>
      <td data-label="Created" title={d.created_at}>
        {ago(d.created_at, now)}
      </td>
      <td data-label="Took">{d.completed_at ? elapsed(d.created_at, d.completed_at, now) : ""}</td>
    </tr>
  );
}
