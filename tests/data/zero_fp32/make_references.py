"""Write what DeepSpeed's own zero_to_fp32 rebuilds from each ZeRO sample, as the reference
tests/unit/test_export_zero.py compares `export.zero.zero_items` with.

Run in a venv with DeepSpeed (the samples' version) and safetensors, from the repository root:

    /tmp/dsvenv/bin/python tests/data/zero_fp32/make_references.py

It calls `deepspeed.utils.zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint` on each sample
and saves `<name>.safetensors` here: every name it returns, tied names each with their own
contiguous copy (so the test sees every name), with metadata: "deepspeed" (its version),
"order" (the names in the order it returns them) and "tied" (name -> the first name sharing
its tensor). These are our own samples: torch.load inside DeepSpeed is fine here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[2] / "sample_checkpoints"
REFERENCES = {  # reference name -> the run folder (its `latest` names the tag)
    "deepspeed-run": "deepspeed-run",
    "deepspeed-zero3": "projects/deepspeed-zero3",
    "deepspeed-zero1": "deepspeed-zero1",
    "deepspeed-zero2-tied": "deepspeed-zero2-tied",
    "deepspeed-zero3-tied": "deepspeed-zero3-tied",
}


def main() -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from safetensors.torch import save_file

    for name, folder in REFERENCES.items():
        sd = get_fp32_state_dict_from_zero_checkpoint(str(SAMPLES / folder))
        first: dict[int, str] = {}
        tied = {}
        for key, t in sd.items():
            owner = first.setdefault(id(t), key)
            if owner != key:
                tied[key] = owner
        out = {k: t.detach().clone().contiguous() for k, t in sd.items()}
        meta = {"deepspeed": deepspeed.__version__, "order": json.dumps(list(sd)),
                "tied": json.dumps(tied)}
        save_file(out, str(HERE / f"{name}.safetensors"), metadata=meta)
        print(name, {k: (str(t.dtype), tuple(t.shape)) for k, t in out.items()}, tied,
              file=sys.stderr)


if __name__ == "__main__":
    main()
