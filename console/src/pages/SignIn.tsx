// The sign-in form: the API token, kept for this tab only (sessionStorage).

import { useState } from "preact/hooks";
import { auth } from "../auth";

export function SignIn({ reason }: { reason: string | null }) {
  const [token, setToken] = useState("");
  const submit = (e: Event) => {
    e.preventDefault();
    const t = token.trim();
    if (t) auth.signIn(t);
  };
  return (
    <section class="signin card" aria-labelledby="signin-title">
      <h1 id="signin-title">Sign in</h1>
      <p>Use the API token gannet gave you (the same as GANNET_TOKEN for the CLI).</p>
      {reason && (
        <p class="notice notice-error" role="alert">
          {reason}
        </p>
      )}
      <form data-testid="signin" onSubmit={submit}>
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="current-password"
          required
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <button type="submit">Sign in</button>
      </form>
      <p class="hint">The token stays in this browser tab until you sign out or close it.</p>
    </section>
  );
}
