// A stage's details as its plugin presents them (a table, resources with their changes),
// rendered by shape alone: the console never names a plugin or its stages.

import type { Detail, ResourceChange } from "../api";

/** The short sign of a resource's actions: + create, ~ update, - delete, -/+ replace. */
function sign(r: ResourceChange): string {
  const creates = r.actions.includes("create");
  const deletes = r.actions.includes("delete");
  if (creates && deletes) return "-/+";
  if (creates) return "+";
  if (deletes) return "-";
  return "~";
}

export function Details({ list }: { list: Detail[] }) {
  return (
    <>
      {list.map((d, i) => (
        <DetailBlock key={`${d.type}-${i}`} detail={d} />
      ))}
    </>
  );
}

function DetailBlock({ detail: d }: { detail: Detail }) {
  switch (d.type) {
    case "table":
      return (
        <div class="table-wrap">
          <table class="detail-table" data-testid="detail-table">
            <caption>{d.title}</caption>
            <thead>
              <tr>
                {d.columns.map((c) => (
                  <th scope="col" key={c}>
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {d.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((cell, c) => (c === 0 ? <th scope="row" key={c}>{cell}</th> : <td key={c}>{cell}</td>))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
    case "resources":
      return (
        <section class="detail-resources" aria-label={d.title} data-testid="detail-resources">
          <h4>
            {d.title}: <span class="detail-summary">{d.summary}</span>
          </h4>
          <ul>
            {d.items.map((r) => (
              <li key={r.address} data-testid="resource" data-address={r.address} data-actions={r.actions.join(",")}>
                <code class="resource-sign" aria-hidden="true">
                  {sign(r)}
                </code>{" "}
                <code class="resource-address">{r.address}</code> <span class="resource-actions">({r.actions.join(", ")})</span>
                {r.attributes.length > 0 && (
                  <ul class="resource-attributes">
                    {r.attributes.map((a) => (
                      <li key={a.name}>
                        <code>{a.name}</code>
                        {(a.before || a.after) && (
                          <>
                            : <code>{a.before}</code> → <code>{a.after}</code>
                          </>
                        )}
                      </li>
                    ))}
                  </ul>
                )}
              </li>
            ))}
          </ul>
          {d.omitted > 0 && <p class="detail-omitted">… and {d.omitted} more (not kept)</p>}
        </section>
      );
  }
}
