export async function resolveToken(source) {
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
export function jwtExpiry(token) {
    const parts = token.split(".");
    if (parts.length !== 3 || parts[1] === undefined || parts[1] === "") {
        return undefined;
    }
    try {
        const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
        const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
        const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
        const claims = JSON.parse(new TextDecoder().decode(bytes));
        if (claims !== null && typeof claims === "object" && "exp" in claims) {
            const exp = claims.exp;
            if (typeof exp === "number" && Number.isFinite(exp)) {
                return exp * 1000;
            }
        }
    }
    catch {
        return undefined;
    }
    return undefined;
}
