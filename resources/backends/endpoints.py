"""The client layer every model and judge call goes through: one :class:`Endpoint` per base URL.

API generation (resources/backends/api.py), API judges (resources/scoring/judges.py) and the
model anonymiser reach a server only through :mod:`resources.privacy.outbound`, which asks
the call's endpoint for permission first (:meth:`Endpoint.call`). Per endpoint (base URL) and
process:

- **concurrency**: at most ``runtime.concurrency`` calls in flight, across the generation
  threads and every judged metric's threads (default :data:`DEFAULT_CONCURRENCY`, chosen from
  ``benchmarks/bench_calls.py``);
- **rate limits declared up front**: ``runtime.rpm`` (requests per minute) and
  ``runtime.tpm`` (tokens per minute) pace the calls with the generic cell rate algorithm
  (virtual scheduling, ITU-T I.371): requests leave at most one per ``60/rpm`` seconds, and
  tokens at ``tpm/60`` per second with one second's worth of burst. A call's tokens are
  estimated before it is sent (characters / 4 of the text sent plus ``max_tokens``) and the
  schedule is corrected by the reply's ``usage`` (unused tokens are given back). Even pacing
  is what servers that quantise their limits (a per-minute limit enforced per second, as
  OpenAI documents) accept; a per-minute window would burst and be refused;
- **429 feedback**: a response hook on the client's HTTP transport sees every 429, also those
  the ``openai`` client retries itself: new calls wait until its ``Retry-After`` has passed, and
  a declared rate is lowered by a fifth (at most to a tenth of it), creeping back by 1% per
  successful call. The retry of the refused call is the ``openai`` client's own (it honours
  ``Retry-After``); a call that still fails is its sample's ``error`` with the reason;
- **budgets** (:class:`Budget`): ``budget: {usd, tokens, calls}`` per evaluation run; every
  call reserves its estimate first and :class:`BudgetExhausted` is raised *before* anything is
  sent when it would pass a limit.

The pacing is written here rather than taken from a rate-limit library: the blocking
limiters on PyPI (pyrate-limiter, ratelimit) take a fixed weight per acquisition, so a token
estimate could not be corrected by the reply's usage, and none slows down on a server's 429.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from metric_ops.errors import BudgetExhausted, FacetlakeError

# in-flight calls per endpoint unless runtime.concurrency says otherwise: the knee of the
# measured curve (benchmarks/bench_calls.py, docs/backends.md "Throughput")
DEFAULT_CONCURRENCY = 32
SLOWDOWN = 0.8  # a 429 multiplies a declared rate by this
FLOOR = 0.1  # ... never below this share of the declared rate
RECOVERY = 0.01  # each successful call gives back this share
CHARS_PER_TOKEN = 4.0  # the estimate before the call (OpenAI's rule of thumb); the reply's usage corrects it
DEFAULT_MAX_TOKENS = 256  # a call that names no max_tokens is estimated with this many output tokens
ENDPOINT_KEYS = ("concurrency", "rpm", "tpm", "mode", "max_retries", "timeout_s", "poll_s", "batch_wait_s")
MODES = ("live", "batch")


class EndpointError(FacetlakeError, ValueError):
    """Endpoint options that cannot be used (the message names the key and a right value)."""


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class EndpointOptions:
    """How calls to one endpoint are made.

    ``concurrency``: calls in flight (>= 1); ``rpm``/``tpm``: declared limits (None: not
    paced); ``mode``: ``live`` or ``batch`` (the OpenAI Batch API, resources/backends/batch.py);
    ``max_retries``/``timeout_s``: the ``openai`` client's; ``poll_s``: the first wait between
    batch status polls (doubling up to 10 minutes); ``batch_wait_s``: how long one run waits
    for a submitted batch before it ends and leaves the batch to the next run (default 600)."""

    concurrency: int = DEFAULT_CONCURRENCY
    rpm: float | None = None
    tpm: float | None = None
    mode: str = "live"
    max_retries: int = 4
    timeout_s: float = 60.0
    poll_s: float = 5.0
    batch_wait_s: float = 600.0


def _positive(value: Any, key: str, where: str, integer: bool = False) -> float | int | None:
    if value is None:
        return None
    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise EndpointError(f"{where}: {key} must be a positive number, got {value!r}") from None
    if not number > 0 or (isinstance(number, float) and not math.isfinite(number)):
        raise EndpointError(f"{where}: {key} must be a positive number, got {value!r}")
    return number


def endpoint_options(runtime: Mapping[str, Any] | None, base_url: str | None = None) -> EndpointOptions:
    """The options of the endpoint at ``base_url`` under an evaluation's ``runtime`` mapping:
    its top-level keys (:data:`ENDPOINT_KEYS`) apply to every endpoint the evaluation calls
    (the model's and the judges'), and ``runtime.endpoints[BASE_URL]`` (or ``[HOST]``)
    overrides them for one. Raises :class:`EndpointError` naming a bad value."""
    runtime = dict(runtime or {})
    merged = {k: runtime[k] for k in ENDPOINT_KEYS if runtime.get(k) is not None}
    per = runtime.get("endpoints") or {}
    if not isinstance(per, Mapping):
        raise EndpointError("runtime.endpoints must map a base URL to options, e.g. {'http://127.0.0.1:8000/v1': {rpm: 500}}")
    if base_url:
        from urllib.parse import urlparse

        url = base_url.rstrip("/")
        for key in (urlparse(url).hostname, url, url + "/"):
            if key and isinstance(per.get(key), Mapping):
                unknown = set(per[key]) - set(ENDPOINT_KEYS)
                if unknown:
                    raise EndpointError(f"runtime.endpoints[{key!r}]: unknown keys {sorted(unknown)}; allowed: {list(ENDPOINT_KEYS)}")
                merged.update({k: v for k, v in per[key].items() if v is not None})
    where = f"runtime{' for ' + base_url if base_url else ''}"
    mode = str(merged.get("mode", "live"))
    if mode not in MODES:
        raise EndpointError(f"{where}: mode must be one of {MODES}, got {mode!r}")
    return EndpointOptions(
        concurrency=int(_positive(merged.get("concurrency", DEFAULT_CONCURRENCY), "concurrency", where, integer=True) or DEFAULT_CONCURRENCY),
        rpm=_positive(merged.get("rpm"), "rpm", where), tpm=_positive(merged.get("tpm"), "tpm", where), mode=mode,
        max_retries=int(merged.get("max_retries", 4)), timeout_s=float(merged.get("timeout_s", 60.0)),
        poll_s=float(_positive(merged.get("poll_s", 5.0), "poll_s", where) or 5.0),
        batch_wait_s=float(_positive(merged.get("batch_wait_s", 600.0), "batch_wait_s", where) or 600.0),
    )


def estimate_tokens(texts: list[str], max_tokens: Any = None) -> int:
    """The token estimate of a call before it is sent: characters / :data:`CHARS_PER_TOKEN` of
    the texts sent plus ``max_tokens`` (:data:`DEFAULT_MAX_TOKENS` when unset)."""
    out = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    return int(math.ceil(sum(len(t) for t in texts) / CHARS_PER_TOKEN)) + max(0, out)


# --------------------------------------------------------------------------- budget
@dataclass
class Budget:
    """Hard limits on one evaluation run's calls: ``usd``, ``tokens`` (in + out), ``calls``
    (None: no limit). Thread-safe. :meth:`reserve` before a call (raises
    :class:`BudgetExhausted` when the call's estimate would pass a limit: the call is then not
    sent), :meth:`settle` after it with the reply's true usage. ``spent_before`` carries what
    earlier steps of the same run spent (a run's pairs are separate steps)."""

    usd: float | None = None
    tokens: int | None = None
    calls: int | None = None
    spent_calls: int = 0
    spent_tokens: int = 0
    spent_usd: float = 0.0
    prior_calls: int = 0
    prior_tokens: int = 0
    prior_usd: float = 0.0
    refused: int = 0
    _held_calls: int = 0
    _held_tokens: int = 0
    _held_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, value: Any, where: str = "budget") -> "Budget | None":
        """A budget from a spec mapping ``{usd: 5.0, tokens: 2000000, calls: 10000}`` or a flag
        string ``usd=5,tokens=2e6,calls=10000``; None for an empty one. Raises
        :class:`EndpointError` naming a bad key or value."""
        if value in (None, "", {}):
            return None
        if isinstance(value, str):
            pairs = {}
            for part in value.split(","):
                key, sep, number = part.partition("=")
                if not sep:
                    raise EndpointError(f"{where}: {part!r} is not KEY=VALUE; write e.g. --budget usd=5,tokens=2000000,calls=10000")
                pairs[key.strip()] = number.strip()
            value = pairs
        if not isinstance(value, Mapping):
            raise EndpointError(f"{where}: expected a mapping such as {{usd: 5.0, tokens: 2000000, calls: 10000}}")
        unknown = set(value) - {"usd", "tokens", "calls"}
        if unknown:
            raise EndpointError(f"{where}: unknown keys {sorted(unknown)}; a budget has usd, tokens and calls")
        usd = _positive(value.get("usd"), "usd", where)
        tokens = _positive(value.get("tokens"), "tokens", where)
        calls = _positive(value.get("calls"), "calls", where)
        for key, number in (("tokens", tokens), ("calls", calls)):
            if number is not None and float(number) != int(float(number)):
                raise EndpointError(f"{where}: {key} must be a whole number, got {value.get(key)!r}")
        return cls(usd=usd, tokens=None if tokens is None else int(tokens), calls=None if calls is None else int(calls))

    def limits(self) -> dict[str, Any]:
        """The limits set (``{"calls": 10}`` ...)."""
        return {k: v for k, v in (("usd", self.usd), ("tokens", self.tokens), ("calls", self.calls)) if v is not None}

    def spent(self) -> dict[str, Any]:
        """What this step has spent: ``{"calls", "tokens", "usd"}`` (usd rounded to 1e-6)."""
        with self._lock:
            return {"calls": self.spent_calls, "tokens": self.spent_tokens, "usd": round(self.spent_usd, 6)}

    def add_prior(self, calls: int = 0, tokens: int = 0, usd: float = 0.0) -> None:
        """Count what earlier steps of the same run spent (they count against the limits)."""
        with self._lock:
            self.prior_calls += int(calls)
            self.prior_tokens += int(tokens)
            self.prior_usd += float(usd)

    def reserve(self, tokens: int, usd: float | None) -> tuple[int, float]:
        """Hold one call with its estimate; raises :class:`BudgetExhausted` (nothing held) when
        it does not fit. ``usd`` None: the call's price is unknown (a usd limit then refuses)."""
        with self._lock:
            over = None
            calls, spent_tokens, spent_usd = self.prior_calls + self.spent_calls, self.prior_tokens + self.spent_tokens, self.prior_usd + self.spent_usd
            if self.calls is not None and calls + self._held_calls + 1 > self.calls:
                over = f"calls: {calls + self._held_calls} of {self.calls} sent"
            elif self.tokens is not None and spent_tokens + self._held_tokens + tokens > self.tokens:
                over = (f"tokens: {spent_tokens:,} of {self.tokens:,} spent and {self._held_tokens:,} held by calls in flight, "
                        f"the next call needs about {tokens:,}")
            elif self.usd is not None:
                if usd is None:
                    over = "usd: the call's model has no price (runtime.prices), so a usd budget cannot admit it"
                elif spent_usd + self._held_usd + usd > self.usd:
                    over = f"usd: {spent_usd:.4f} of {self.usd:.4f} spent, the next call costs about {usd:.4f}"
            if over is not None:
                self.refused += 1
                raise BudgetExhausted(f"budget reached ({over})", {"calls": calls, "tokens": spent_tokens, "usd": round(spent_usd, 6)},
                                      self.limits())
            self._held_calls += 1
            self._held_tokens += tokens
            self._held_usd += usd or 0.0
            return tokens, usd or 0.0

    def settle(self, held: tuple[int, float], sent: bool, tokens: int | None, usd: float | None) -> None:
        """Replace a reservation by what the call spent: a sent call counts (also a failed one),
        with the reply's tokens and cost when known, else its estimate's."""
        with self._lock:
            self._held_calls -= 1
            self._held_tokens -= held[0]
            self._held_usd -= held[1]
            if sent:
                self.spent_calls += 1
                self.spent_tokens += held[0] if tokens is None else int(tokens)
                self.spent_usd += held[1] if usd is None else float(usd)


# --------------------------------------------------------------------------- pacing
class Pacer:
    """Even pacing of calls under ``rpm`` and ``tpm`` (either may be None) by virtual
    scheduling (GCRA): :meth:`admit` returns when a call of ``tokens`` may leave, and reserves
    its place; :meth:`correct` moves the token schedule by the reply's true usage. Thread-safe."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.factor = 1.0  # lowered by a 429, recovering per success
        self._request_at = 0.0  # the earliest time the next request may leave
        self._token_at = 0.0  # the time the token schedule has reached
        self._pause_until = 0.0
        self._lock = threading.Lock()
        self.waited_s = 0.0

    def admit(self, tokens: int) -> float:
        """Block until a call of ``tokens`` may be sent; returns the seconds waited."""
        with self._lock:
            now = time.monotonic()
            at = max(now, self._pause_until)
            if self.rpm:
                at = max(at, self._request_at)
                self._request_at = at + 60.0 / (self.rpm * self.factor)
            if self.tpm:
                rate = self.tpm * self.factor / 60.0  # tokens per second
                at = max(at, self._token_at - 1.0)  # one second's worth of tokens may go at once
                self._token_at = max(self._token_at, at) + tokens / rate
        wait = at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
            with self._lock:
                self.waited_s += wait
        return max(0.0, wait)

    def correct(self, estimated: int, actual: int | None) -> None:
        """Move the token schedule by ``actual - estimated`` tokens (a refund when the call used
        fewer), and recover a little of a lowered rate."""
        with self._lock:
            if self.tpm and actual is not None:
                self._token_at += (actual - estimated) / (self.tpm * self.factor / 60.0)
            self.factor = min(1.0, self.factor + RECOVERY)

    def refused(self, retry_after_s: float | None) -> None:
        """A 429: nothing new leaves before ``retry_after_s`` (1 s when the server gave none) has
        passed, and a declared rate is lowered by :data:`SLOWDOWN`."""
        with self._lock:
            self._pause_until = max(self._pause_until, time.monotonic() + (retry_after_s if retry_after_s is not None else 1.0))
            if self.rpm or self.tpm:
                self.factor = max(FLOOR, self.factor * SLOWDOWN)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from a response's ``retry-after-ms`` or ``retry-after`` header (seconds, or an
    HTTP date), as the ``openai`` client reads them; None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        import email.utils

        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


# --------------------------------------------------------------------------- endpoints
class Endpoint:
    """The calls of one process to one base URL (see the module docstring). ``stats`` counts
    calls sent, 429s seen and seconds spent waiting for the pace."""

    def __init__(self, base_url: str, options: EndpointOptions) -> None:
        self.base_url = base_url
        self.options = options
        self.slots = threading.BoundedSemaphore(options.concurrency)
        self.pacer = Pacer(options.rpm, options.tpm)
        self.sent = 0
        self.refusals = 0
        self._lock = threading.Lock()

    def configure(self, options: EndpointOptions) -> None:
        """Take new options (a new run's runtime); calls in flight finish under the old ones."""
        if options == self.options:
            return
        with self._lock:
            if options.concurrency != self.options.concurrency:
                self.slots = threading.BoundedSemaphore(options.concurrency)
            if (options.rpm, options.tpm) != (self.options.rpm, self.options.tpm):
                self.pacer = Pacer(options.rpm, options.tpm)
            self.options = options

    def observe(self, response: Any) -> None:
        """The HTTP transport's response hook: a 429 pauses and slows this endpoint."""
        if getattr(response, "status_code", None) == 429:
            with self._lock:
                self.refusals += 1
            self.pacer.refused(retry_after_seconds(response.headers))

    @contextlib.contextmanager
    def call(self, tokens: int, usd: float | None) -> Iterator["Ticket"]:
        """One call: the budget's reservation (raises :class:`BudgetExhausted` before anything
        is sent), an in-flight slot, the pace. Inside the block send the call and
        :meth:`Ticket.done` with its usage."""
        budget = active_budget()
        held = budget.reserve(tokens, usd) if budget is not None else None
        ticket = Ticket(self, tokens, held, budget)
        slots = self.slots
        try:
            with slots:
                self.pacer.admit(tokens)
                yield ticket
        finally:
            ticket.close()


@dataclass
class Ticket:
    """One admitted call: :meth:`sending` when it leaves, :meth:`done` with the reply's usage."""

    endpoint: Endpoint
    estimate: int
    held: tuple[int, float] | None
    budget: Budget | None
    was_sent: bool = False
    tokens: int | None = None
    usd: float | None = None
    _closed: bool = False

    def sending(self) -> None:
        self.was_sent = True
        with self.endpoint._lock:
            self.endpoint.sent += 1

    def done(self, usage: Any, price: Mapping[str, Any] | None) -> None:
        """Record the reply's ``usage`` (prompt/completion tokens) and its cost under ``price``
        (``input_per_1m``/``output_per_1m``)."""
        tin = getattr(usage, "prompt_tokens", None)
        tout = getattr(usage, "completion_tokens", None)
        if tin is not None or tout is not None:
            self.tokens = int(tin or 0) + int(tout or 0)
            if price:
                self.usd = (int(tin or 0) * float(price.get("input_per_1m", 0.0)) + int(tout or 0) * float(price.get("output_per_1m", 0.0))) / 1e6
        self.endpoint.pacer.correct(self.estimate, self.tokens)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.budget is not None and self.held is not None:
            self.budget.settle(self.held, self.was_sent, self.tokens, self.usd)


_endpoints: dict[str, Endpoint] = {}
_registry_lock = threading.Lock()


@dataclass
class CallSession:
    """What the calls of one asset step run under: the evaluation's ``runtime`` (endpoint
    options, prices) and the run's :class:`Budget`."""

    runtime: dict[str, Any] = field(default_factory=dict)
    budget: Budget | None = None
    installed: bool = False


_session = CallSession()


@contextlib.contextmanager
def call_session(runtime: Mapping[str, Any] | None = None, budget: Budget | None = None) -> Iterator[CallSession]:
    """Within the block every endpoint takes its options from ``runtime`` (the evaluation's)
    and every call is charged to ``budget`` (an unlimited one when None: the session still
    counts its spend, :func:`run_spend`). Process-wide (the calling threads see it)."""
    global _session
    previous = _session
    _session = CallSession(dict(runtime or {}), budget if budget is not None else Budget(), installed=True)
    try:
        yield _session
    finally:
        _session = previous


def active_budget() -> Budget | None:
    """The budget calls are charged to now (None: unlimited)."""
    return _session.budget


def run_spend() -> dict[str, Any]:
    """What the calls of the current session spent: ``{"calls", "tokens", "usd"}`` (zeros
    outside a session)."""
    budget = _session.budget
    return budget.spent() if budget is not None else {"calls": 0, "tokens": 0, "usd": 0.0}


def active_runtime() -> dict[str, Any]:
    """The runtime mapping of the current call session."""
    return _session.runtime


def endpoint_for(base_url: str, runtime: Mapping[str, Any] | None = None) -> Endpoint:
    """The process's :class:`Endpoint` for ``base_url``, configured from ``runtime``; without
    one, from the current :func:`call_session`'s when a session is installed (else an existing
    endpoint keeps its options and a new one takes the defaults)."""
    url = str(base_url).rstrip("/")
    if runtime is None and not _session.installed:
        with _registry_lock:
            if url in _endpoints:
                return _endpoints[url]
    options = endpoint_options(active_runtime() if runtime is None else runtime, url)
    with _registry_lock:
        endpoint = _endpoints.get(url)
        if endpoint is None:
            endpoint = _endpoints[url] = Endpoint(url, options)
            return endpoint
    endpoint.configure(options)
    return endpoint


def price_of(model: str | None, runtime: Mapping[str, Any] | None = None, batch: bool = False) -> Mapping[str, Any] | None:
    """The price entry of ``model`` under ``runtime.prices`` (resources/backends/planning.py);
    with ``batch`` its ``batch_input_per_1m``/``batch_output_per_1m`` when given, else
    ``batch_discount`` (e.g. 0.5) times the live price."""
    from resources.backends.planning import load_prices, price_for

    price = price_for(load_prices(active_runtime() if runtime is None else runtime), model)
    return batch_price(price) if batch else price


def batch_price(price: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The Batch API price of a price entry: its ``batch_input_per_1m``/``batch_output_per_1m``
    when given, else ``batch_discount`` (e.g. 0.5) times the live price, else the live price."""
    if not price:
        return price
    discount = float(price.get("batch_discount", 1.0))
    return {**price, "input_per_1m": float(price.get("batch_input_per_1m", float(price.get("input_per_1m", 0.0)) * discount)),
            "output_per_1m": float(price.get("batch_output_per_1m", float(price.get("output_per_1m", 0.0)) * discount))}


def usd_estimate(price: Mapping[str, Any] | None, texts: list[str], max_tokens: Any) -> float | None:
    """The cost estimate of a call before it is sent (None without a price)."""
    if not price:
        return None
    tin = math.ceil(sum(len(t) for t in texts) / CHARS_PER_TOKEN)
    tout = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    return (tin * float(price.get("input_per_1m", 0.0)) + tout * float(price.get("output_per_1m", 0.0))) / 1e6


def openai_client(base_url: str, api_key: str, *, runtime: Mapping[str, Any] | None = None, max_retries: int | None = None,
                  timeout_s: float | None = None) -> Any:
    """An ``openai.OpenAI`` client for ``base_url`` whose HTTP transport reports every response
    to the endpoint (:meth:`Endpoint.observe`: 429 feedback) and keeps enough connections
    alive for the endpoint's concurrency. Retries and timeout from the endpoint's options
    unless given."""
    import httpx
    import openai

    endpoint = endpoint_for(base_url, runtime)
    options = endpoint.options
    pool = max(100, options.concurrency)
    http_client = openai.DefaultHttpxClient(
        event_hooks={"response": [endpoint.observe]},
        limits=httpx.Limits(max_connections=pool * 2, max_keepalive_connections=pool),
    )
    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=http_client,
                         max_retries=options.max_retries if max_retries is None else max_retries,
                         timeout=options.timeout_s if timeout_s is None else timeout_s)


__all__ = ["Budget", "BudgetExhausted", "CallSession", "DEFAULT_CONCURRENCY", "Endpoint", "EndpointError", "EndpointOptions",
           "Pacer", "Ticket", "active_budget", "active_runtime", "batch_price", "call_session", "endpoint_for", "endpoint_options",
           "estimate_tokens", "openai_client", "price_of", "retry_after_seconds", "run_spend", "usd_estimate"]
