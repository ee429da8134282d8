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

from resources.backends.budget import Budget, EndpointError, positive

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
        concurrency=int(positive(merged.get("concurrency", DEFAULT_CONCURRENCY), "concurrency", where, integer=True) or DEFAULT_CONCURRENCY),
        rpm=positive(merged.get("rpm"), "rpm", where), tpm=positive(merged.get("tpm"), "tpm", where), mode=mode,
        max_retries=int(merged.get("max_retries", 4)), timeout_s=float(merged.get("timeout_s", 60.0)),
        poll_s=float(positive(merged.get("poll_s", 5.0), "poll_s", where) or 5.0),
        batch_wait_s=float(positive(merged.get("batch_wait_s", 600.0), "batch_wait_s", where) or 600.0),
    )


def checked_runtime(runtime: dict[str, Any], budget: Any = None, where: str = "runtime",
                    error: type[Exception] = EndpointError) -> dict[str, Any]:
    """``runtime`` with its endpoint options checked (:func:`endpoint_options`, every
    ``endpoints`` entry too) and its budget (``runtime.budget``, or ``budget`` from the spec's
    top level) normalised to its limits. Raises ``error`` (default :class:`EndpointError`; the
    spec parser passes its ``SpecError``) naming the problem."""
    try:
        if budget is not None:
            if runtime.get("budget") is not None:
                raise EndpointError(f"{where}: budget is given twice (top level and runtime.budget); keep one")
            runtime["budget"] = budget
        endpoint_options(runtime)
        for url in runtime.get("endpoints") or {}:
            endpoint_options(runtime, str(url))
        parsed = Budget.parse(runtime.get("budget"), f"{where}: budget")
    except EndpointError as exc:
        raise error(str(exc)) from None
    if parsed is not None:
        runtime["budget"] = parsed.limits()
    return runtime


def _estimate(texts: list[str], max_tokens: Any) -> tuple[int, int]:
    """(prompt tokens, output tokens) expected of a call: characters / :data:`CHARS_PER_TOKEN`
    of the texts sent, and ``max_tokens`` (:data:`DEFAULT_MAX_TOKENS` when unset)."""
    out = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    return int(math.ceil(sum(len(t) for t in texts) / CHARS_PER_TOKEN)), max(0, out)


def estimate_tokens(texts: list[str], max_tokens: Any = None) -> int:
    """The token estimate of a call before it is sent: its prompt and output tokens (:func:`_estimate`)."""
    return sum(_estimate(texts, max_tokens))


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
    # the runtime is fixed for an installed session: each endpoint's options and each model's
    # price are worked out once, not on every call (a price table may be a file, $FACETLAKE_PRICES)
    options: dict[str, EndpointOptions] = field(default_factory=dict)
    prices: dict[str, Any] = field(default_factory=dict)


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
    session = _session
    if runtime is None and not session.installed:
        with _registry_lock:
            if url in _endpoints:
                return _endpoints[url]
    if runtime is None and session.installed:
        options = session.options.get(url)
        if options is None:
            options = session.options[url] = endpoint_options(session.runtime, url)
    else:
        options = endpoint_options(active_runtime() if runtime is None else runtime, url)
    with _registry_lock:
        endpoint = _endpoints.get(url)
        if endpoint is None:
            endpoint = _endpoints[url] = Endpoint(url, options)
            return endpoint
    endpoint.configure(options)
    return endpoint


def price_of(model: str | None) -> Mapping[str, Any] | None:
    """The price entry of ``model`` under the current session's ``runtime.prices`` or
    ``$FACETLAKE_PRICES`` (resources/backends/planning.py); looked up once per session."""
    from resources.backends.planning import load_prices, price_for

    session = _session
    key = str(model)
    if session.installed and key in session.prices:
        return session.prices[key]
    price = price_for(load_prices(session.runtime), model)
    if session.installed:
        session.prices[key] = price
    return price


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
    tin, tout = _estimate(texts, max_tokens)
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


__all__ = ["CallSession", "checked_runtime", "DEFAULT_CONCURRENCY", "Endpoint", "EndpointError", "EndpointOptions",
           "Pacer", "Ticket", "active_budget", "active_runtime", "batch_price", "call_session", "endpoint_for", "endpoint_options",
           "estimate_tokens", "openai_client", "price_of", "retry_after_seconds", "run_spend", "usd_estimate"]
