// The caller's API token and who the server says it belongs to. The token lives only in
// sessionStorage (gone when the tab closes) and in memory; it is never put in a URL or logged.

import type { Whoami } from "./api";
import { store } from "./store";

const KEY = "gannet.token";

export interface AuthState {
  /** True while a token is stored: the shell then loads or shows `me`. */
  signedIn: boolean;
  /** The server's answer to whoami for the token; null until it came. */
  me: Whoami | null;
  /** Why the sign-in form is shown again (the server refused the token), if it is. */
  reason: string | null;
}

function readToken(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null; // storage disabled: the user signs in for each page load
  }
}

let memoryToken: string | null = readToken();

export const authState = store<AuthState>({ signedIn: memoryToken !== null, me: null, reason: null });

export const auth = {
  token: (): string | null => memoryToken,

  /** Keeps a token the user typed; the shell then asks whoami with it. */
  signIn(token: string): void {
    memoryToken = token;
    try {
      sessionStorage.setItem(KEY, token);
    } catch {
      // kept in memory only
    }
    authState.set({ signedIn: true, me: null, reason: null });
  },

  identified(me: Whoami): void {
    authState.set({ ...authState.get(), me });
  },

  signOut(reason: string | null = null): void {
    memoryToken = null;
    try {
      sessionStorage.removeItem(KEY);
    } catch {
      // nothing stored
    }
    authState.set({ signedIn: false, me: null, reason });
  },

  /** The server answered 401: the token is wrong or revoked; ask for another. */
  rejected(message: string): void {
    if (memoryToken !== null) auth.signOut(message);
  },
};
