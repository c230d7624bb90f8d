"""Runs under `torch.distributed.run --nproc_per_node 2` for test_trainer_resume.py: every run
in the same two processes, so torch and transformers are imported once.

argv: PLAN OUT. PLAN is a JSON list of {"name", "resume", "output_dir"}; "resume" is a
checkpoint folder or null (train from scratch). Each run builds the hf-multirank sample's own
Trainer (sample_checkpoints/make_training_samples.py: same seed, model, data and arguments) and
calls train(resume_from_checkpoint=resume). Rank 0 writes OUT: for each run the (step, loss,
grad_norm) this train() call logged, a digest of the final weights, or the error it raised.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "sample_checkpoints" / "make_training_samples.py"


def generator():
    spec = importlib.util.spec_from_file_location("make_training_samples", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def weights_digest(model) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def one_run(gen, run: dict) -> dict:
    from transformers import TrainerCallback

    logged: list[list[float]] = []

    class Losses(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                logged.append([state.global_step, logs["loss"], logs.get("grad_norm")])

    trainer = gen.hf_multirank_trainer(run["output_dir"], callbacks=[Losses()])
    try:
        trainer.train(resume_from_checkpoint=run["resume"])
    except Exception as e:  # noqa: BLE001 - a crash is a result (the test reads it)
        return {"error": f"{type(e).__name__}: {e}"}
    return {"losses": logged, "weights": weights_digest(trainer.model)}


def main() -> None:
    import torch.distributed as dist

    plan = json.loads(Path(sys.argv[1]).read_text())
    gen = generator()
    results = {run["name"]: one_run(gen, run) for run in plan}
    if dist.is_initialized():
        dist.barrier()
        if dist.get_rank() != 0:
            return
    Path(sys.argv[2]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
