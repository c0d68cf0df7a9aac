// The alert region: API errors from actions, and the "server unreachable" banner.

import { useNow } from "../hooks";
import { dismissError, errors, unreachable } from "../notices";
import { useStore } from "../store";

export function Notices() {
  const list = useStore(errors);
  const retryAt = useStore(unreachable);
  const now = useNow(retryAt !== null);
  return (
    <div class="notices" role="alert">
      {retryAt !== null && (
        <p class="notice notice-down">
          Server unreachable, retrying
          {retryAt > now ? ` in ${Math.ceil((retryAt - now) / 1000)}s` : "…"}
        </p>
      )}
      {list.map((n) => (
        <p class="notice notice-error" key={n.id}>
          <span>{n.text}</span>
          <button type="button" class="link" onClick={() => dismissError(n.id)}>
            Dismiss
          </button>
        </p>
      ))}
    </div>
  );
}
