export function uuidv7(now = Date.now()) {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    let ms = now;
    for (let i = 5; i >= 0; i--) {
        b[i] = ms % 256;
        ms = Math.floor(ms / 256);
    }
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
export function backoffDelay(n, minMs, maxMs, random = Math.random) {
    const full = Math.min(maxMs, minMs * 2 ** Math.min(n - 1, 30));
    return full / 2 + (full / 2) * random();
}
export function toBase64(b) {
    let bin = "";
    for (let i = 0; i < b.length; i += 0x8000) {
        bin += String.fromCharCode(...b.subarray(i, i + 0x8000));
    }
    return btoa(bin);
}
export function fromBase64(s) {
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}
