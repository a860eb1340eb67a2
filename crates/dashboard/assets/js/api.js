// The API client. The key lives in sessionStorage only (gone when the tab closes) and travels
// only in the Authorization header, never in a URL.

const KEY = "shortlink.apiKey";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  signIn: (key) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),
};

/** An error answer of the API, or a network failure (status 0), in words. */
class ApiError extends Error {
  constructor(status, error, retryAfter) {
    super(error?.message || `The server answered ${status}.`);
    this.status = status;
    this.code = error?.code ?? "NETWORK";
    this.details = error?.details ?? [];
    this.retryAfter = retryAfter;
  }
}

/** Called on 401: the key is gone or revoked. */
let onUnauthorized = () => {};
export function whenUnauthorized(fn) { onUnauthorized = fn; }

/** `/api/v1` + path, with the query's set values. */
function apiUrl(path, query = {}) {
  const url = new URL(`/api/v1${path}`, location.origin);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  return url;
}

/** Waits out a 429 this many times (for `Retry-After`, at most 10 s each) before giving up. */
const RATE_LIMIT_RETRIES = 5;

/** The workspace's rate limit, as the answers tell it. Once the limit is reached (a 429, or an
 * answer with no request left), requests wait for it to reset and go one at a time, until an
 * answer says there is room again: a page's requests (the analytics send nine at once) then take
 * turns within a limit of even 1 request a second, where all at once they would collide again at
 * every retry and give up. */
const limit = {
  /** No request is sent before this time (ms since the epoch). */
  resumeAt: 0,
  /** Requests go one at a time. */
  oneAtATime: false,
  /** The turn of the last request queued while `oneAtATime`. */
  queue: Promise.resolve(),
  /** Takes note of an answer's `RateLimit-*` headers, or its `Retry-After`. */
  note(response) {
    const header = (name) => Number(response.headers.get(name)) || 0;
    if (response.status === 429) {
      this.oneAtATime = true;
      this.resumeAt = Math.max(this.resumeAt, Date.now() + (header("Retry-After") || 1) * 1000);
    } else if (response.headers.has("RateLimit-Remaining")) {
      this.oneAtATime = header("RateLimit-Remaining") < 1;
      if (this.oneAtATime) this.resumeAt = Math.max(this.resumeAt, Date.now() + header("RateLimit-Reset") * 1000);
    }
  },
  /** Runs `request` when the limit lets it. */
  async turn(request) {
    const wait = () => new Promise((resolve) => setTimeout(resolve, Math.max(0, this.resumeAt - Date.now())));
    if (!this.oneAtATime) {
      await wait();
      return request();
    }
    const mine = this.queue.then(wait).then(request);
    this.queue = mine.catch(() => {});
    return mine;
  },
};

async function send(method, path, { query, body, accept = "application/json" } = {}) {
  const headers = { Authorization: `Bearer ${session.key() ?? ""}`, Accept: accept };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await limit.turn(async () => {
        const answer = await fetch(apiUrl(path, query), {
          method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store",
        });
        limit.note(answer);
        return answer;
      });
    } catch {
      throw new ApiError(0, { message: "The server could not be reached. Check your connection and try again." });
    }
    if (response.ok) return response;
    let envelope = null;
    try { envelope = await response.json(); } catch { /* not JSON: a proxy's page, say */ }
    const error = new ApiError(response.status, envelope?.error, Number(response.headers.get("Retry-After")) || undefined);
    if (response.status === 429 && attempt < RATE_LIMIT_RETRIES && (error.retryAfter ?? 1) <= 10) continue;
    if (response.status === 401) onUnauthorized(error);
    throw error;
  }
}

/** The `data` of a JSON answer; throws [`ApiError`]. */
export async function api(method, path, options) {
  const response = await send(method, path, options);
  if (response.status === 204) return null;
  return (await response.json()).data;
}

/** A binary answer (a QR image, an export) as a Blob. */
export async function apiBlob(path, query, accept = "*/*") {
  return (await send("GET", path, { query, accept })).blob();
}
