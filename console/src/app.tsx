// The shell: sign-in gate, header, alert region and the page for the current route.

import { useEffect, useRef } from "preact/hooks";
import { api, ApiError, Unreachable, type Whoami } from "./api";
import { auth, authState } from "./auth";
import { Header } from "./components/Header";
import { Notices } from "./components/Notices";
import { backoff, reportDown, reportUp, showError } from "./notices";
import { AppPage } from "./pages/AppPage";
import { AppsPage } from "./pages/AppsPage";
import { ChainPage } from "./pages/ChainPage";
import { ChainsPage } from "./pages/ChainsPage";
import { DeploymentPage } from "./pages/DeploymentPage";
import { DeploymentsPage } from "./pages/DeploymentsPage";
import { PreviewPage } from "./pages/PreviewPage";
import { PreviewsPage } from "./pages/PreviewsPage";
import { SignIn } from "./pages/SignIn";
import { useLocation } from "./router";
import { useStore } from "./store";

export function Shell() {
  const state = useStore(authState);
  useWhoami(state.signedIn && state.me === null);
  const { path } = useLocation();
  const main = useRef<HTMLElement>(null);
  const firstPath = useRef(path);

  // After an in-app navigation, move focus to the new page so screen readers announce it.
  useEffect(() => {
    if (path !== firstPath.current) {
      firstPath.current = "";
      main.current?.focus();
    }
  }, [path]);

  // The page loads while whoami is still on its way (one round trip less); until the answer
  // comes it shows no control, as for a viewer.
  const may = state.me?.may ?? NO_CONTROLS;
  const content = state.signedIn ? <Page may={may} /> : <SignIn reason={state.reason} />;

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header me={state.me} />
      <Notices />
      <main id="main" ref={main} tabIndex={-1}>
        {content}
      </main>
    </>
  );
}

const NO_CONTROLS: Whoami["may"] = { read: true, deploy: false, approve: false };

function Page({ may }: { may: Whoami["may"] }) {
  const { path } = useLocation();
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === "apps")) return <AppsPage />;
  // Keyed by name and id: another app or deployment starts with fresh state (log cursors).
  if (parts.length === 2 && parts[0] === "apps") return <AppPage key={parts[1]} name={parts[1]} may={may} />;
  if (parts.length === 1 && parts[0] === "deployments") return <DeploymentsPage />;
  if (parts.length === 2 && parts[0] === "deployments") {
    return <DeploymentPage key={parts[1]} id={parts[1]} may={may} />;
  }
  if (parts.length === 1 && parts[0] === "chains") return <ChainsPage />;
  if (parts.length === 2 && parts[0] === "chains") return <ChainPage key={parts[1]} id={parts[1]} may={may} />;
  // A check run's details_url is <console root>/previews/<id>.
  if (parts.length === 1 && parts[0] === "previews") return <PreviewsPage />;
  if (parts.length === 2 && parts[0] === "previews") return <PreviewPage key={parts[1]} id={parts[1]} />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        There is no page at <code>{path}</code>. See the <a href="/apps">applications</a>.
      </p>
    </section>
  );
}

/** Asks the server who the stored token belongs to, retrying while it is unreachable. */
function useWhoami(needed: boolean) {
  useEffect(() => {
    if (!needed) return;
    let stopped = false;
    let failures = 0;
    let timer: number | undefined;
    const ask = async () => {
      try {
        const me = await api.whoami();
        if (stopped) return;
        reportUp();
        auth.identified(me);
      } catch (e) {
        if (stopped) return;
        if (e instanceof Unreachable) {
          failures += 1;
          reportDown(backoff(failures));
          timer = window.setTimeout(ask, backoff(failures));
        } else if (e instanceof ApiError && e.status !== 401) {
          // 401 already sent the user back to the sign-in form with the server's reason.
          showError(`Could not sign in: ${e.message}`);
          auth.signOut();
        }
      }
    };
    ask();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [needed]);
}
