"""Every fenced code block of README.md and docs/ (at any depth) is marked, and every runnable one
runs, twice in the same directory, offline, printing what the page shows (docs/design.md section 7,
"Code blocks in the docs").

The marker is an HTML comment on the last non-blank line before the fence:

- ``<!-- snippet: python -->`` / ``<!-- snippet: shell -->``: run with the checkout's interpreter /
  with bash (``set -e``), in a fresh temporary directory, then again in the same directory;
- ``<!-- snippet: console -->``: a ``$ ``-prompted session; each command runs in bash and its output
  is the lines shown under it (a command may exit non-zero: the page shows the error);
- ``<!-- snippet: output -->``: what the runnable block before it on the page prints, compared
  after both runs;
- ``<!-- snippet: excerpt: REASON -->``: not run, with the reason (an API key, a third-party
  framework not installed, a server this harness does not start yet, a fragment);
- ``<!-- snippet: python slow: REASON -->`` (or ``shell`` / ``console``): runnable but
  training-scale, run only with ``MEMGATE_SLOW_SNIPPETS=1``;
- ``<!-- snippet: server NAME -->`` (``... server NAME port N``): a shell block that runs a server
  in the foreground, as a reader runs it in a second terminal. The harness starts it once per test
  session (one warm server per surface), waits until it listens on port N (or, without a port,
  until it prints its first line), hands the ``export NAME=VALUE`` lines it prints to the blocks
  that use it, and stops it (SIGTERM, as Ctrl-C would) when the session ends;
- ``<!-- snippet: python with NAME -->`` (or ``shell`` / ``console``): a block that uses server
  NAME; both its runs talk to the same warm server, so the block starts afresh on the server's side
  too. The blocks of one server share an ``xdist_group``, so one test worker runs them all.

Comparison ignores what differs between runs and machines (``normalise``): generated ids
(``mem-…``, ``q-…``, UUIDs), ISO times, durations (``2.38`` s / ms figures), the temporary
directory's path, trailing spaces. The test prints how many blocks are runnable, excerpts and
compared, and fails when the compared outputs fall below ``COMPARED_FLOOR``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<body>.*?)\s*-->\s*$")
KINDS = ("python", "shell", "console", "output", "excerpt", "server")
RUNNABLE = ("python", "shell", "console")
COMPARED_FLOOR = 12  # outputs compared today; raise it as blocks become runnable, never lower it
TIMEOUT_S = 240
SERVER_START_S = 120  # a server's start, its encoder and gate included


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    kind: str  # python | shell | console | output | excerpt | unmarked
    code: str
    reason: str = ""
    slow: bool = False
    output: str | None = None  # the shown output (an output block after it, or a console's lines)
    server: str = ""  # kind server: its name; a runnable block: the server it uses ("with NAME")
    port: Optional[int] = None  # kind server: the port it listens on once up
    problems: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks with their markers; an output block is attached to the runnable
    block before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        m = MARKER.match(prev)
        block = Block(page, i + 1, "unmarked", "\n".join(lines[i + 1:j]) + "\n")
        if m:
            read_marker(block, m["body"])
        if block.kind == "excerpt" and not block.reason:
            block.problems.append(f"{block.id}: an excerpt needs its reason (`<!-- snippet: excerpt: WHY -->`)")
        if block.kind == "output":  # the output of the runnable block (or excerpt) before it
            owner = [b for b in out if b.kind in (*RUNNABLE, "excerpt")]
            if not owner or owner[-1].output is not None:
                block.problems.append(f"{block.id}: an output block with no code block before it")
            else:
                owner[-1].output = block.code
        if block.kind == "console":
            block.output = console_output(block.code)
        out.append(block)
        i = j + 1
    return out


def read_marker(block: Block, body: str) -> None:
    """``KIND [slow] [with NAME] [: REASON]`` or ``server NAME [port N]`` into the block."""
    head, _, reason = body.partition(":")
    words = head.split()
    block.kind, rest = (words[0], words[1:]) if words and words[0] in KINDS else ("unmarked", [])
    if block.kind == "unmarked":
        block.problems.append(f"{block.id}: unknown snippet marker {body!r}")
    block.reason = reason.strip()
    if block.kind == "server":
        well_formed = len(rest) == 1 or (len(rest) == 3 and rest[1] == "port" and rest[2].isdigit())
        if not well_formed:
            block.problems.append(f"{block.id}: a server marker is `server NAME` or `server NAME port N`")
        block.server = rest[0] if rest else ""
        block.port = int(rest[2]) if well_formed and len(rest) == 3 else None
        return
    if rest[:1] == ["slow"]:
        block.slow, rest = True, rest[1:]
    if rest[:1] == ["with"] and len(rest) == 2 and block.kind in RUNNABLE:
        block.server, rest = rest[1], []
    if rest:
        block.problems.append(f"{block.id}: unknown words {rest} in the marker {body!r}")


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown under it) of a ``$ `` session; ``\\`` continues a command."""
    steps: list[tuple[str, list[str]]] = []
    continuing = False
    for line in code.splitlines():
        if continuing:
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        elif line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        continuing = line.endswith("\\") and (continuing or line.startswith("$ "))
    return steps


def console_output(code: str) -> str:
    return "".join(line + "\n" for _, shown in console_steps(code) for line in shown)


ALL = [b for page in PAGES for b in blocks(page)]
NORMALISE = [
    (re.compile(r"\b(mem|q)-[0-9a-f]{8,}\b"), r"\1-<id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r'("seconds":\s*)[\d.]+'), r"\1<duration>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b"), "<duration>"),
]


def normalise(text: str, tmp: Path | None = None) -> str:
    """What a comparison ignores: ids, times, durations, the temporary directory, trailing spaces."""
    if tmp is not None:
        text = text.replace(str(tmp.resolve()), "<tmp>").replace(str(tmp), "<tmp>")
    for pattern, repl in NORMALISE:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def environment(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMGATE_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MEMGATE_HOME=str(tmp / ".memgate"),
               XDG_DATA_HOME=str(tmp / ".local"), PYTHONDONTWRITEBYTECODE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def run_once(block: Block, tmp: Path, server_env: Optional[dict] = None) -> str:
    """Run the block once in ``tmp``; its stdout (console: stdout and stderr of each command)."""
    env = {**environment(tmp), **(server_env or {})}
    if block.kind == "python":
        script = tmp / f"snippet_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        done = subprocess.run([sys.executable, script.name], cwd=tmp, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stderr[-3000:]}"
        return done.stdout
    if block.kind == "shell":
        done = subprocess.run(["bash", "-e", "-c", block.code], cwd=tmp, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stderr[-3000:]}"
        return done.stdout
    out = []
    for command, _ in console_steps(block.code):
        done = subprocess.run(["bash", "-c", command], cwd=tmp, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        out.append(done.stdout)  # stderr in the order a terminal shows it
    return "".join(out)


@dataclass
class Server:
    """A page's server block, running in the background for the blocks that use it."""

    block: Block
    directory: Path
    process: subprocess.Popen
    env: dict

    @property
    def log(self) -> str:
        return (self.directory / "server.log").read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:  # SIGTERM to its process group, as Ctrl-C in its terminal
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start_server(block: Block, directory: Path) -> Server:
    """Run the server block in ``directory`` until it is up: listening on its port, or (without
    one) having printed a line; its ``export NAME=VALUE`` lines become the users' environment."""
    directory.mkdir(parents=True, exist_ok=True)
    if block.port is not None and listening(block.port):
        raise AssertionError(f"{block.id}: port {block.port} is taken before the server starts")
    with open(directory / "server.log", "w", encoding="utf-8") as log:
        process = subprocess.Popen(["bash", "-e", "-c", block.code], cwd=directory, env=environment(directory),
                                   stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    server = Server(block, directory, process, {})
    deadline = time.monotonic() + SERVER_START_S
    while not (listening(block.port) if block.port is not None else server.log.strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"{block.id}: the server did not come up "
                                 f"(exit {process.returncode}):\n{server.log[-3000:]}")
        time.sleep(0.1)
    for line in server.log.splitlines():
        if line.startswith("export ") and "=" in line:
            name, _, value = line[len("export "):].partition("=")
            server.env[name.strip()] = "".join(shlex.split(value))
    return server


SERVER_BLOCKS = {b.server: b for b in ALL if b.kind == "server"}


@pytest.fixture(scope="session")
def servers(tmp_path_factory) -> Iterator[dict]:
    """The warm servers of this session (test worker), started on first use, stopped at its end."""
    running: dict[str, Server] = {}

    def env_of(name: str) -> dict:
        if name not in running:
            running[name] = start_server(SERVER_BLOCKS[name], tmp_path_factory.mktemp(f"server-{name}"))
        assert running[name].process.poll() is None, f"server {name} exited:\n{running[name].log[-3000:]}"
        return running[name].env

    yield env_of
    for server in running.values():
        server.stop()


def test_every_block_is_marked():
    problems = [p for b in ALL for p in b.problems]
    problems += [f"{b.id}: no `<!-- snippet: ... -->` marker before the fence" for b in ALL
                 if b.kind == "unmarked" and not b.problems]
    names = [b.server for b in ALL if b.kind == "server"]
    problems += [f"server {n!r} is started by {names.count(n)} blocks (one per surface)" for n in set(names)
                 if names.count(n) > 1]
    problems += [f"{b.id}: uses server {b.server!r}, which no `<!-- snippet: server ... -->` block starts"
                 for b in ALL if b.kind in RUNNABLE and b.server and b.server not in names]
    assert problems == [], "\n".join(problems)


def test_the_counts_hold_their_floor(capsys):
    runnable = [b for b in ALL if b.kind in RUNNABLE]
    compared = [b for b in runnable if b.output is not None and not b.slow]
    counts = (f"snippets: {len(ALL)} blocks; {len(runnable)} runnable ({sum(b.slow for b in runnable)} slow, "
              f"{sum(bool(b.server) for b in runnable)} on {sum(b.kind == 'server' for b in ALL)} warm servers), "
              f"{sum(b.kind == 'excerpt' for b in ALL)} excerpts, {sum(b.kind == 'output' for b in ALL)} output "
              f"blocks, {len(compared)} outputs compared (floor {COMPARED_FLOOR})")
    with capsys.disabled():
        print("\n" + counts)
    assert len(compared) >= COMPARED_FLOOR, counts


def test_the_markers_and_sessions_parse(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- snippet: python -->\n```python\nprint(1)\n```\n\nprints\n\n<!-- snippet: output -->\n"
                    "```\n1\n```\n```\nbare\n```\n<!-- snippet: excerpt -->\n```\nx\n```\n"
                    "<!-- snippet: console -->\n```\n$ echo a \\\n  b\na b\n$ true\n```\n"
                    "<!-- snippet: shell slow: trains a gate -->\n```bash\nmake demo\n```\n"
                    "<!-- snippet: server pg -->\n```bash\nmemgate serve postgres pgdata\n```\n"
                    "<!-- snippet: server web port 8765 -->\n```bash\nserve\n```\n"
                    "<!-- snippet: python with web -->\n```python\npass\n```\n"
                    "<!-- snippet: server -->\n```\nx\n```\n<!-- snippet: python with -->\n```\nx\n```\n"
                    "<!-- snippet: pyhton -->\n```\nx\n```\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = blocks(page)
        assert [b.kind for b in found] == ["python", "output", "unmarked", "excerpt", "console", "shell",
                                           "server", "server", "python", "server", "python", "unmarked"]
        assert found[0].output == "1\n" and found[3].problems and found[5].slow
        assert found[5].reason == "trains a gate"
        assert (found[6].server, found[6].port, found[7].server, found[7].port) == ("pg", None, "web", 8765)
        assert found[8].server == "web" and not found[8].problems
        assert [bool(b.problems) for b in found[9:]] == [True, True, True]  # no name; `with` alone; a typo
        assert console_steps(found[4].code) == [("echo a \\\n  b", ["a b"]), ("true", [])]
    finally:
        ROOT = saved
    shown = "added mem-23d4b894a6784d4a\nquery q-182ec2ebb88e48fcb54295efdc9350f4 at 2026-12-02T10:00:01Z  \n" \
            '"seconds":2.38, took 12.5 ms\n'
    assert normalise(shown) == 'added mem-<id>\nquery q-<id> at <time>\n"seconds":<duration>, took <duration>'


SLOW = os.environ.get("MEMGATE_SLOW_SNIPPETS") == "1"  # slow blocks are collected only then (never skipped)


def as_param(block: Block):
    marks = [pytest.mark.xdist_group(f"server-{block.server}")] if block.server else []
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [as_param(b) for b in ALL if b.kind in RUNNABLE and (SLOW or not b.slow)])
def test_the_block_runs_twice_and_prints_what_the_page_shows(block, tmp_path, servers):
    server_env = servers(block.server) if block.server else None
    for attempt in ("first run", "second run in the same directory"):
        printed = run_once(block, tmp_path, server_env)
        if block.output is not None:
            assert normalise(printed, tmp_path) == normalise(block.output, tmp_path), f"{block.id}, {attempt}"
