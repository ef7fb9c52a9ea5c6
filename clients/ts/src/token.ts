/** A token with the time it stops being good. */
export interface Token {
  token: string;
  /**
   * When the token expires, as a Date or milliseconds since the Unix epoch. Without it, the
   * client reads the `exp` claim when the token is a JWT.
   */
  expiresAt?: Date | number;
}

/**
 * Gives a token: called at every (re)connect and again before the current token expires, so that
 * the connection is kept by an AUTH with the fresh token (the gateway keeps the connection and its
 * subscriptions; the new token must be for the same subject).
 */
export type TokenProvider = () => string | Token | Promise<string | Token>;

/** @internal A token and its expiry in ms since the epoch (undefined: none known). */
export interface ResolvedToken {
  token: string;
  expiresAt: number | undefined;
}

/** @internal resolveToken asks source for a token and works out its expiry. */
export async function resolveToken(source: string | TokenProvider | undefined): Promise<ResolvedToken> {
  if (source === undefined) {
    return { token: "", expiresAt: undefined };
  }
  const got = typeof source === "function" ? await source() : source;
  if (typeof got === "string") {
    return { token: got, expiresAt: jwtExpiry(got) };
  }
  if (got === null || typeof got !== "object" || typeof got.token !== "string") {
    throw new TypeError("promlib: the token provider returned neither a string nor { token, expiresAt }");
  }
  const exp = got.expiresAt instanceof Date ? got.expiresAt.getTime() : got.expiresAt;
  return { token: got.token, expiresAt: exp ?? jwtExpiry(got.token) };
}

/**
 * Returns the `exp` claim of a JWT in milliseconds since the Unix epoch, or undefined when token
 * is not a JWT or has no numeric `exp`. The signature is not checked: the server does that.
 */
export function jwtExpiry(token: string): number | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[1] === undefined || parts[1] === "") {
    return undefined;
  }
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes));
    if (claims !== null && typeof claims === "object" && "exp" in claims) {
      const exp = (claims as { exp: unknown }).exp;
      if (typeof exp === "number" && Number.isFinite(exp)) {
        return exp * 1000;
      }
    }
  } catch {
    return undefined;
  }
  return undefined;
}
