"""``openai`` backend: any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp server,
Ollama, LM Studio) through the official ``openai`` client.

- base URL and model by config; the API key from the environment only (``api_key_env``,
  default ``OPENAI_API_KEY``; servers that need none: export it as ``EMPTY``);
- one request per query with every candidate listed, JSON-schema structured output
  (``response_format={"type": "json_schema", ...}``), temperature 0, parsed strictly;
- a timeout per request; bounded retries (``max_retries``, exponential backoff, ``Retry-After``
  honoured up to ``max_backoff_s``) on 429, 5xx and transport errors (connection, timeout);
  **none** on 400 or any other 4xx, and none on invalid output (a clear error instead);
- a ledger of calls, retries, tokens and cost (prices per million tokens by config);
- a disk cache keyed by (model and base URL, SHA-256 of the exact request payload): a rerun
  costs nothing.
  Only answers that parsed are cached.

Tests replay wire-format responses (hand-assembled; no live endpoint here) through
``httpx.MockTransport``; ``RecordingTransport`` wraps a
real transport and writes each exchange to a JSON file in the same format.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import httpx

from memgate.contract.config import resolve_path
from memgate.studies.verifiers.base import (
    CandidateVerdict,
    Verifier,
    VerifierInput,
    VerifierOutputError,
    answer_record,
    parse_verdicts,
)
from memgate.studies.verifiers.prompts import list_messages, prompt_hash, verdict_schema

RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))
DEFAULT_CACHE_DIR = ".cache/verifier/openai"  # resolved against the repository root


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx and transport errors are retried; 400, other 4xx and invalid output are not."""
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUS
    return False


class DiskCache:
    """One JSON file per (model, prompt hash): ``<root>/<model>/<hash[:2]>/<hash>.json``."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, model: str, key: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:100]
        return self.root / safe / key[:2] / f"{key}.json"

    def get(self, model: str, key: str) -> Optional[dict]:
        path = self._path(model, key)
        if not path.exists():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def put(self, model: str, key: str, entry: dict) -> None:
        path = self._path(model, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry, sort_keys=True, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)


class OpenAIVerifier(Verifier):
    backend = "openai"

    def __init__(
        self,
        model: str,
        base_url: Optional[str] = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        price_input_per_1m: float = 0.0,
        price_output_per_1m: float = 0.0,
        cache_dir: Optional[str | os.PathLike] = DEFAULT_CACHE_DIR,
        max_bytes: int = 2048,
        temperature: float = 0.0,
        http_client: Optional[httpx.Client] = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(max_bytes=max_bytes)
        import openai

        if not model:
            raise ValueError("the openai backend needs a model name (config key 'model')")
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(
                f"environment variable {api_key_env} is not set: the API key is read from the "
                "environment only (export it as EMPTY for a local server that needs none)")
        if type(max_retries) is not int or max_retries < 0:
            raise ValueError(f"max_retries must be a non-negative int, got {max_retries!r}")
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.price_in = price_input_per_1m
        self.price_out = price_output_per_1m
        self.temperature = temperature
        self.sleep = sleep
        self._slept = 0.0  # back-off seconds of the current request (kept out of its latency)
        self.cache = None if cache_dir is None else DiskCache(resolve_path(str(cache_dir)))
        # The client never retries by itself: the retry policy is ours, explicit and tested.
        self.client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0,
                                    http_client=http_client)

    @property
    def model_id(self) -> str:
        return self.model if self.base_url is None else f"{self.model} @ {self.base_url}"

    def request_payload(self, request: VerifierInput) -> dict:
        n = len(request.candidates)
        return {
            "model": self.model,
            "messages": list_messages(request),
            "temperature": self.temperature,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "verdicts", "strict": True, "schema": verdict_schema(n)}},
        }

    def _verify(self, request: VerifierInput) -> list[CandidateVerdict]:
        payload = self.request_payload(request)
        n = len(request.candidates)
        key = prompt_hash(self.model_id, payload)  # the endpoint too: one name, two servers
        if self.cache is not None:
            hit = self.cache.get(self.model, key)
            if hit is not None:
                self.ledger.count_hit(hit, candidates=n)
                return parse_verdicts(hit["content"], n)
        seconds, response = self.timed_call(payload)
        self.ledger.scored_candidates += n
        content = response.choices[0].message.content
        if content is None:
            self.ledger.errors["empty_content"] = self.ledger.errors.get("empty_content", 0) + 1
            refusal = getattr(response.choices[0].message, "refusal", None)
            raise VerifierOutputError(f"the model returned no content (refusal: {refusal!r})")
        try:
            verdicts = parse_verdicts(content, n)
        except ValueError:
            self.ledger.errors["invalid_output"] = self.ledger.errors.get("invalid_output", 0) + 1
            raise
        if self.cache is not None:
            usage = response.usage
            self.cache.put(self.model, key, {
                "model": self.model, "content": content,
                "usage": None if usage is None else {"prompt_tokens": usage.prompt_tokens,
                                                     "completion_tokens": usage.completion_tokens},
                "answered": self.answer_record(seconds, usage),
            })
        return verdicts

    def answer_record(self, seconds: float, usage) -> dict:
        prompt = getattr(usage, "prompt_tokens", 0) or 0
        completion = getattr(usage, "completion_tokens", 0) or 0
        return answer_record(seconds, prompt, completion,
                             (prompt * self.price_in + completion * self.price_out) / 1e6)

    def timed_call(self, payload: dict):
        """(seconds the endpoint took, back-off sleeps excluded; the response)."""
        self._slept = 0.0
        start = time.perf_counter()
        response = self._call(payload)
        return time.perf_counter() - start - self._slept, response

    def _call(self, payload: dict):
        attempt = 0
        while True:
            try:
                response = self.client.chat.completions.create(**payload)
            except Exception as exc:  # noqa: BLE001 - classified right below
                kind = type(exc).__name__
                self.ledger.errors[kind] = self.ledger.errors.get(kind, 0) + 1
                if not is_retryable(exc) or attempt >= self.max_retries:
                    raise
                delay = self._delay(exc, attempt)
                self.sleep(delay)
                self._slept += delay
                attempt += 1
                self.ledger.retries += 1
                continue
            self.ledger.calls += 1
            usage = response.usage
            if usage is not None:
                self.ledger.prompt_tokens += usage.prompt_tokens or 0
                self.ledger.completion_tokens += usage.completion_tokens or 0
                self.ledger.cost_usd += ((usage.prompt_tokens or 0) * self.price_in
                                         + (usage.completion_tokens or 0) * self.price_out) / 1e6
            return response

    def _delay(self, exc: BaseException, attempt: int) -> float:
        delay = self.backoff_s * (2 ** attempt)
        response = getattr(exc, "response", None)
        if response is not None:
            retry_after = response.headers.get("retry-after")
            try:
                delay = float(retry_after) if retry_after is not None else delay
            except ValueError:
                pass
        return min(delay, self.max_backoff_s)


class RecordingTransport(httpx.BaseTransport):
    """Wrap a real transport and append each exchange to a JSON list at ``path`` (the format the
    tests replay: ``{"status", "headers", "body"}``); for recording fixtures against a server."""

    def __init__(self, inner: httpx.BaseTransport, path: Path):
        self.inner = inner
        self.path = Path(path)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        records = json.loads(self.path.read_text()) if self.path.exists() else []
        try:
            body = response.json()
        except ValueError:
            body = response.text
        records.append({"status": response.status_code,
                        "headers": {k: v for k, v in response.headers.items()
                                    if k.lower() in ("retry-after", "content-type")},
                        "body": body})
        self.path.write_text(json.dumps(records, indent=1) + "\n")
        return response


def replay_transport(records: list[dict], seen: Optional[list] = None) -> httpx.MockTransport:
    """An ``httpx.MockTransport`` answering requests with ``records`` in order (an error when
    they run out); the decoded request bodies are appended to ``seen``."""
    queue = list(records)

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        if not queue:
            raise AssertionError("replay_transport: more requests than recorded responses")
        record = queue.pop(0)
        if record.get("transport_error"):
            kind = httpx.ReadTimeout if record.get("kind") == "timeout" else httpx.ConnectError
            raise kind(record["transport_error"], request=request)
        body = record["body"]
        if isinstance(body, str):
            return httpx.Response(record["status"], text=body, headers=record.get("headers", {}))
        return httpx.Response(record["status"], json=body, headers=record.get("headers", {}))

    return httpx.MockTransport(handler)
