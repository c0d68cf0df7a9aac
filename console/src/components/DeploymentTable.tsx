// A list of deployments, newest first: used by the deployments page and an app's history.

import type { Deployment } from "../api";
import { ago, elapsed, shortId, shortSha, words } from "../format";
import { Badge } from "./Badge";

export function DeploymentTable({ list, showApp }: { list: Deployment[]; showApp: boolean }) {
  const now = Date.now();
  return (
    <div class="table-wrap">
      <table class="deployments" data-testid="deployments">
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
        <tbody>
          {list.map((d) => (
            <tr key={d.id}>
              <th scope="row">
                <a href={`/deployments/${encodeURIComponent(d.id)}`} title={d.id}>
                  {shortId(d.id)}
                </a>
              </th>
              {showApp && (
                <td>
                  <a href={`/apps/${encodeURIComponent(d.app)}`}>{d.app}</a>
                </td>
              )}
              <td class="commit">
                <code title={d.commit}>{shortSha(d.commit)}</code>{" "}
                <span class="message">{d.commit_message.split("\n")[0]}</span>
              </td>
              <td>
                <Badge status={d.status} />
                {d.status_reason && <div class="reason">{d.status_reason}</div>}
              </td>
              <td>
                {words(d.trigger.replace(/^ON_/, ""))}
                {d.commander && <div class="muted">by {d.commander}</div>}
              </td>
              <td title={d.created_at}>{ago(d.created_at, now)}</td>
              <td>{d.completed_at ? elapsed(d.created_at, d.completed_at, now) : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
