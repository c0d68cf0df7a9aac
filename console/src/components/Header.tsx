// The top bar: navigation, who is signed in, and sign out.

import type { Whoami } from "../api";
import { auth } from "../auth";
import { useLocation } from "../router";

export function Header({ me }: { me: Whoami | null }) {
  const { path } = useLocation();
  const section = ["deployments", "chains", "previews"].find((s) => path.startsWith(`/${s}`)) ?? "apps";
  return (
    <header class="top">
      <a class="brand" href="/apps">
        gannet
      </a>
      {me && (
        <nav aria-label="Main">
          <a href="/apps" aria-current={section === "apps" ? "page" : undefined}>
            Applications
          </a>
          <a href="/deployments" aria-current={section === "deployments" ? "page" : undefined}>
            Deployments
          </a>
          <a href="/chains" aria-current={section === "chains" ? "page" : undefined}>
            Chains
          </a>
          <a href="/previews" aria-current={section === "previews" ? "page" : undefined}>
            Previews
          </a>
        </nav>
      )}
      {me && (
        <div class="who">
          <span data-testid="caller">
            {me.caller.name} ({me.caller.role})
          </span>
          <button type="button" class="secondary" onClick={() => auth.signOut()}>
            Sign out
          </button>
        </div>
      )}
    </header>
  );
}
