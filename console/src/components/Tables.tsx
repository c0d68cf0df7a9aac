// Tables shared by the apps list and an app's page: drifted fields and live resources.

import type { DriftField, LiveResource } from "../api";
import { Badge } from "./Badge";

export function DriftTable({ drift, caption }: { drift: DriftField[]; caption?: string }) {
  return (
    <div class="table-wrap">
      <table class="drift">
        {caption && <caption>{caption}</caption>}
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Git</th>
            <th scope="col">Live</th>
          </tr>
        </thead>
        <tbody>
          {drift.map((f) => (
            <tr key={f.field}>
              <th scope="row">
                <code>{f.field}</code>
              </th>
              <td>
                <DriftValue field={f} side="git" />
              </td>
              <td>
                <DriftValue field={f} side="live" />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** One side of a drifted field: its JSON, its text, or `<unset>` when it lacks the field. */
function DriftValue({ field, side }: { field: DriftField; side: "git" | "live" }) {
  const value = field[side];
  if (value === undefined) {
    return <code class={`val ${side} unset`}>&lt;unset&gt;</code>;
  }
  const text = field.text?.includes(side) && typeof value === "string" ? value : JSON.stringify(value);
  return <code class={`val ${side}`}>{text}</code>;
}

export function LiveTable({ live }: { live: LiveResource[] }) {
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Kind</th>
            <th scope="col">ID</th>
            <th scope="col">Health</th>
            <th scope="col">Summary</th>
          </tr>
        </thead>
        <tbody>
          {live.map((r) => (
            <tr key={`${r.kind}/${r.id}`}>
              <td>{r.kind}</td>
              <th scope="row">
                <code>{r.id}</code>
              </th>
              <td>
                <Badge status={r.health} />
              </td>
              <td>{r.summary}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
