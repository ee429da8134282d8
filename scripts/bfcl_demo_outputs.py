"""Write the two BFCL demo "models" as precomputed outputs (JSONL of sample_id, output).

    python scripts/bfcl_demo_outputs.py OUT_DIR [CATEGORY|all] [--limit N]

Then run ``facetlake run pipelines/configs/bfcl.yaml`` (its models read
``pipelines/configs/bfcl_demo/*.jsonl``), or simply ``facetlake demo-bfcl``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from resources.datasets.bfcl import write_bfcl_demo_outputs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("category", nargs="?", default="all")
    parser.add_argument("--limit", type=int, default=None, help="first N questions (in category order)")
    args = parser.parse_args()
    for label, file in write_bfcl_demo_outputs(args.out_dir, args.category, args.limit).items():
        print(f"{label}: {file}")


if __name__ == "__main__":
    main()
