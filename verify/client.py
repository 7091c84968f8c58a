"""
Streaming client for llama-server's OpenAI API: one typed record per request, a monotonic
timestamp on every SSE event; a failed request is data, not an exception. SSE is read here
(`sse_data`): a GPU box running verify has httpx and nvidia-ml-py only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

CHAT_PATH = "/v1/chat/completions"  # where stream_chat posts
# the events that carry a token (StreamEvent.kind); report.json's records keep the kinds
TOKEN_KINDS = ("content", "reasoning")


class SSEError(ValueError):
    """The response is not an event stream."""


class ServerAnswerError(ValueError):
    """A request answered with success, but not as llama-server answers it (no JSON, or
    without the field verify reads)."""


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The `data` of each server-sent event (the WHATWG rules verify needs): `data:` lines
    joined by newlines, an event ending at a blank line; comment lines (`:` pings) and other
    fields (event, id, retry) skipped; a final event without its blank line still counts."""
    buf: list[str] = []
    for line in lines:
        if not line:
            if buf:
                yield "\n".join(buf)
            buf = []
        elif line.startswith("data"):
            field_name, _, value = line.partition(":")
            if field_name == "data":
                buf.append(value[1:] if value.startswith(" ") else value)
    if buf:
        yield "\n".join(buf)


@dataclass
class StreamEvent:
    """One SSE `data:` event: seconds since the request was sent, and its kind."""

    t_s: float
    kind: str  # content | reasoning | role | usage | final | other
    n_chars: int = 0


@dataclass
class RequestRecord:
    """Everything measured for one streamed chat completion."""

    ok: bool
    status_code: int | None
    error: str | None
    t_send_s: float  # perf_counter at send, for timelines
    events: list[StreamEvent] = field(default_factory=list)
    text: str = ""
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    finish_reason: str | None = None

    @property
    def token_event_times_s(self) -> list[float]:
        return [e.t_s for e in self.events if e.kind in TOKEN_KINDS]

    @property
    def ttft_s(self) -> float | None:
        times = self.token_event_times_s
        return times[0] if times else None

    @property
    def completion_tokens(self) -> int | None:
        if self.usage and self.usage.get("completion_tokens") is not None:
            return int(self.usage["completion_tokens"])
        if self.timings and self.timings.get("predicted_n") is not None:
            return int(self.timings["predicted_n"])
        return None

    @property
    def prompt_tokens(self) -> int | None:
        if self.usage and self.usage.get("prompt_tokens") is not None:
            return int(self.usage["prompt_tokens"])
        return None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ttft_s"] = self.ttft_s
        return d


@dataclass(frozen=True)
class FailedRequest:
    """A request that raised an httpx error, in words: what was asked and what it got (the
    error's own text left out: it may hold the URL's secrets)."""

    request: str  # `POST /tokenize`
    status: int | None  # its HTTP status; None: no answer
    got: str  # `HTTP 500 Internal Server Error`, `no answer (ConnectError)`

    @classmethod
    def of(cls, ex: Exception) -> FailedRequest | None:
        """None for an error that is not httpx's of a request."""
        if isinstance(ex, httpx.HTTPStatusError):
            r = ex.response
            status, got = r.status_code, f"HTTP {r.status_code} {r.reason_phrase}"
        elif isinstance(ex, httpx.TransportError):
            status, got = None, f"no answer ({type(ex).__name__})"
        else:
            return None
        try:
            request = f"{ex.request.method} {ex.request.url.path}"
        except RuntimeError:  # raised before httpx set its request
            request = "a request"
        return cls(request, status, got)


def health_text(code: int) -> str:
    """llama-server's /health status in words: `HTTP 503 (loading)`."""
    return f"HTTP {code}" + (" (loading)" if code == 503 else "")


def ttfts_s(records: Iterable[RequestRecord]) -> list[float]:
    """The time to first token of every request that succeeded with one."""
    return [r.ttft_s for r in records if r.ok and r.ttft_s is not None]


class ServerClient:
    """Thin wrapper over httpx for one llama-server."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 600.0,
                 transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                 timeout=httpx.Timeout(timeout_s, connect=10.0),
                                 transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self, timeout_s: float | None = None) -> int:
        """/health's status (503: loading); `timeout_s`: a shorter wait than the client's."""
        return self.http.get("/health", timeout=httpx.USE_CLIENT_DEFAULT if timeout_s is None
                             else timeout_s).status_code

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        """A request's JSON answer; an HTTP error status raised (httpx.HTTPStatusError)."""
        r = self.http.request(method, path, **kw)
        r.raise_for_status()
        return r.json()

    def models(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/v1/models").get("data", []))

    def props(self) -> dict[str, Any]:
        return dict(self._json("GET", "/props"))

    def _field(self, path: str, key: str, body: dict[str, Any]) -> Any:
        """`key` of the JSON the server answers POST `path` with: an HTTP error status raised
        (httpx.HTTPStatusError), an answer without it a ServerAnswerError naming both."""
        try:
            return self._json("POST", path, json=body)[key]
        except (ValueError, KeyError, TypeError, IndexError):
            raise ServerAnswerError(f"POST {path} answered without `{key}` (a server other "
                                    "than llama-server?)") from None

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens the server will prefill for these messages (its own template + tokenizer)."""
        prompt = str(self._field("/apply-template", "prompt", {"messages": messages}))
        return len(self._field("/tokenize", "tokens", {
            "content": prompt, "add_special": True, "parse_special": True}))

    def stream_chat(self, messages: list[dict[str, str]], max_tokens: int, *,
                    temperature: float = 0.0, seed: int = 42, ignore_eos: bool = False,
                    cache_prompt: bool = False, extra: dict[str, Any] | None = None
                    ) -> RequestRecord:
        body: dict[str, Any] = {
            "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
            "seed": seed, "stream": True, "stream_options": {"include_usage": True},
            "cache_prompt": cache_prompt,
        }
        if ignore_eos:
            body["ignore_eos"] = True
        body.update(extra or {})
        t0 = time.perf_counter()
        rec = RequestRecord(ok=False, status_code=None, error=None, t_send_s=t0)
        try:
            with self.http.stream("POST", CHAT_PATH, json=body,
                                  headers={"Accept": "text/event-stream"}) as resp:
                rec.status_code = resp.status_code
                if resp.status_code != 200:
                    resp.read()
                    rec.error = f"HTTP {resp.status_code}: {resp.text[:300]}"
                    return rec
                kind = resp.headers.get("content-type", "").partition(";")[0].strip()
                if kind != "text/event-stream":
                    raise SSEError(f"expected text/event-stream, got {kind or 'no type'!r}")
                for data in sse_data(resp.iter_lines()):  # pings never reach here
                    t = time.perf_counter() - t0
                    if data.strip() == "[DONE]":
                        break
                    self._absorb(rec, t, json.loads(data))
            if rec.error is None:
                rec.ok = bool(rec.token_event_times_s) or (rec.completion_tokens or 0) > 0
                if not rec.ok:
                    rec.error = "stream ended without a token"
        except (httpx.HTTPError, SSEError, json.JSONDecodeError, ValueError) as e:
            rec.error = f"{type(e).__name__}: {e}"
        return rec

    @staticmethod
    def _absorb(rec: RequestRecord, t: float, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            rec.error = str(chunk["error"])
            return
        if chunk.get("timings"):
            rec.timings = chunk["timings"]
        if chunk.get("usage"):
            rec.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            rec.events.append(StreamEvent(t, "usage" if chunk.get("usage") else "other"))
            return
        choice = choices[0]
        delta = choice.get("delta") or {}
        if choice.get("finish_reason"):
            rec.finish_reason = choice["finish_reason"]
        if delta.get("content"):
            rec.text += delta["content"]
            rec.events.append(StreamEvent(t, "content", len(delta["content"])))
        elif delta.get("reasoning_content"):
            rec.events.append(StreamEvent(t, "reasoning", len(delta["reasoning_content"])))
        elif choice.get("finish_reason"):
            rec.events.append(StreamEvent(t, "final"))
        elif "role" in delta:
            rec.events.append(StreamEvent(t, "role"))
        else:
            rec.events.append(StreamEvent(t, "other"))
