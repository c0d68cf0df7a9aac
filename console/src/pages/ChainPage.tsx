// One deployment chain, block by block: what each block's matcher selected, each app's
// deployment and how it ended (or why it was skipped), polled every second while it runs, and
// Cancel when the caller may deploy.

import { api, type Chain, type ChainBlock, type Whoami } from "../api";
import { Badge } from "../components/Badge";
import { dateTime, sentence, shortId } from "../format";
import { useAction, usePoll } from "../hooks";
import { progress } from "./ChainsPage";

const POLL_MS = 1000;

export function ChainPage({ id, may }: { id: string; may: Whoami["may"] }) {
  const poll = usePoll(() => api.chain(id), (c) => (c.status === "RUNNING" ? POLL_MS : null), [id]);
  const cancel = useAction(api.cancelChain, () => poll.reload());
  const c = poll.data;
  if (!c) {
    return (
      <section>
        <h1>Chain {shortId(id)}</h1>
        {poll.error ? <p class="notice notice-error">{poll.error}</p> : <p class="loading">Loading…</p>}
      </section>
    );
  }
  return (
    <section aria-labelledby="chain-title" data-testid="chain-page">
      <p class="crumbs">
        <a href="/chains">Chains</a> /
      </p>
      <h1 id="chain-title">
        Chain started by <a href={`/apps/${encodeURIComponent(c.app)}`}>{c.app}</a>
      </h1>
      <div class="status-line" aria-live="polite">
        <span data-testid="chain-status" data-status={c.status}>
          <Badge status={c.status} />
        </span>{" "}
        <span class="reason" data-testid="chain-reason">
          {sentence(c.status_reason)}
        </span>
      </div>
      <dl class="facts">
        <dt>Blocks done</dt>
        <dd>{progress(c)}</dd>
        <dt>Created</dt>
        <dd>{dateTime(c.created_at)}</dd>
        {c.completed_at && (
          <>
            <dt>Ended</dt>
            <dd>{dateTime(c.completed_at)}</dd>
          </>
        )}
        {c.cancelled_by && (
          <>
            <dt>Cancelled by</dt>
            <dd>{c.cancelled_by}</dd>
          </>
        )}
        <dt>ID</dt>
        <dd>
          <code>{c.id}</code>
        </dd>
      </dl>
      {may.deploy && c.status === "RUNNING" && (
        <p>
          <button
            type="button"
            class="danger"
            data-testid="cancel-chain"
            disabled={cancel.busy}
            onClick={() => {
              if (window.confirm("Cancel this chain? Its deployments under way are cancelled and roll back.")) {
                cancel.run(c.id);
              }
            }}
          >
            {cancel.busy ? "Cancelling…" : "Cancel chain"}
          </button>
        </p>
      )}
      <h2>Blocks</h2>
      <div class="chain-blocks">
        {c.blocks.map((b, i) => (
          <Block key={i} block={b} index={i} chain={c} />
        ))}
      </div>
    </section>
  );
}

function Block({ block: b, index, chain }: { block: ChainBlock; index: number; chain: Chain }) {
  const title = index === 0 ? `the deployment of ${chain.app} that started the chain` : b.matcher;
  return (
    <section data-testid="chain-block" data-status={b.status} aria-label={`Block ${index}`}>
      <h3>
        Block {index}: {title} <Badge status={b.status} />
      </h3>
      {b.nodes.length === 0 ? (
        <p class="empty">{b.status === "PENDING" ? "Its apps are matched when the chain starts." : "No application."}</p>
      ) : (
        <div class="table-wrap">
          <table class="collapse">
            <thead>
              <tr>
                <th scope="col">App</th>
                <th scope="col">Status</th>
                <th scope="col">Deployment</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {b.nodes.map((n) => (
                <tr key={n.app} data-testid="chain-node" data-app={n.app_name} data-status={n.status}>
                  <th scope="row">
                    <a href={`/apps/${encodeURIComponent(n.app_name)}`}>{n.app_name}</a>
                  </th>
                  <td data-label="Status">
                    <Badge status={n.status} />
                  </td>
                  <td data-label="Deployment">
                    {n.deployment ? (
                      <a href={`/deployments/${encodeURIComponent(n.deployment)}`}>
                        <code>{shortId(n.deployment)}</code>
                      </a>
                    ) : (
                      "—"
                    )}
                  </td>
                  <td data-label="Reason" class="reason">
                    {n.reason ?? ""}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
