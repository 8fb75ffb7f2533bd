"""Fine-tune the local text-only verifier with TRL (the method, data and outputs are documented in
:mod:`memgate.studies.verifiers.finetune`)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from memgate.studies.verifiers.finetune import finetune, load_finetune_config


def main(argv=None, prog=None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None, help="default configs/verifier/finetune.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value (YAML values)")
    args = parser.parse_args(argv)
    info = finetune(load_finetune_config(args.config, cli_overrides=args.overrides))
    print(json.dumps(info, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
