"""Error paths of the streaming client, on httpx.MockTransport (edges only)."""

import httpx

from beekeeper.verify.client import ServerClient


def client_for(handler):
    return ServerClient("http://server", transport=httpx.MockTransport(handler))


def sse(*events: str) -> bytes:
    return "".join(f"{e}\n\n" for e in events).encode()


def test_503_while_loading_is_a_failed_record_not_an_exception():
    c = client_for(lambda req: httpx.Response(503, json={"error": {"message": "Loading model"}}))
    rec = c.stream_chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert not rec.ok and rec.status_code == 503 and "503" in rec.error


def test_truncated_stream_without_tokens_fails():
    body = sse('data: {"choices":[{"delta":{"role":"assistant"}}]}')
    c = client_for(lambda req: httpx.Response(200, content=body,
                                              headers={"content-type": "text/event-stream"}))
    rec = c.stream_chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert not rec.ok and rec.error == "stream ended without a token"


def test_malformed_chunk_is_recorded():
    body = sse('data: {"choices":[{"delta":{"content":"a"}}]}', "data: {not json")
    c = client_for(lambda req: httpx.Response(200, content=body,
                                              headers={"content-type": "text/event-stream"}))
    rec = c.stream_chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert not rec.ok and "JSONDecodeError" in rec.error and rec.text == "a"


def test_pings_are_ignored_and_usage_timings_read_from_the_last_chunks():
    body = sse(": ping",
               'data: {"choices":[{"delta":{"content":"Hel"}}]}',
               ": ping",
               'data: {"choices":[{"delta":{"content":"lo"}}]}',
               'data: {"choices":[{"delta":{},"finish_reason":"length"}],'
               '"timings":{"predicted_n":2,"cache_n":0}}',
               'data: {"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":5}}',
               "data: [DONE]")
    seen = {}

    def handler(req):
        seen["body"] = req.read()
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    rec = client_for(handler).stream_chat([{"role": "user", "content": "hi"}], max_tokens=2)
    assert rec.ok and rec.text == "Hello" and rec.completion_tokens == 2
    assert rec.timings == {"predicted_n": 2, "cache_n": 0} and rec.finish_reason == "length"
    assert [e.kind for e in rec.events] == ["content", "content", "final", "usage"]
    assert b'"include_usage": true' in seen["body"] or b'"include_usage":true' in seen["body"]
    assert b'"cache_prompt": false' in seen["body"] or b'"cache_prompt":false' in seen["body"]


def test_a_failed_smoke_stream_shows_no_made_up_ttft():
    """A stream that failed timed no first token: `ttft not measured`, not `ttft 0.000 s`."""
    from beekeeper.verify.smoke import run_smoke

    def handler(req):
        if req.url.path == "/health":
            return httpx.Response(200)
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(500, json={"error": {"message": "boom"}})

    stream = run_smoke(client_for(handler), health_deadline_s=5).checks[-1]
    assert stream.name == "stream" and stream.status == "FAIL"
    assert stream.detail.startswith("0 token(s), ttft not measured, error ")
    assert "0.000" not in stream.detail
