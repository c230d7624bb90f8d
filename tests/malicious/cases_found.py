"""Inputs found by mutating the samples and the controls that crashed every command (exit 1,
"internal error"): a zip entry that claims a compression its bytes do not have, a rank number
of 30 digits in an RNG file's name, and accelerate's second optimizer file. None is a payload
(nothing to prove live); each must be read and reported in one line."""

from __future__ import annotations

from tests.malicious.make_corpus import (
    ADAMW_STORAGES,
    DAMAGED,
    ODD,
    SCHEDULER,
    Member,
    adamw,
    case,
    dumps,
    good_safetensors,
    hf_checkpoint,
    put,
    torch_zip,
)


@case(name="found-stored-claims-deflate", path="found-stored-claims-deflate/checkpoint-1",
      exits=DAMAGED, live=None,
      tries="optimizer.pt whose data.pkl is stored as it is, while its local header and its "
            "central directory entry say deflated (method 8): inflating it fails on the first "
            "block (was 'internal error: zlib.error', exit 1, in every command)",
      bad="found-stored-claims-deflate/checkpoint-1/optimizer.pt",
      words=r"cannot be decompressed")
def _():
    pkl = Member("archive/data.pkl", dumps(adamw(), 2), method=8)
    hf_checkpoint("found-stored-claims-deflate/checkpoint-1", torch_zip(pkl, ADAMW_STORAGES))


RANK = 10**30


@case(name="found-rank-of-30-digits", path="found-rank-of-30-digits/checkpoint-1", exits=ODD,
      live=None,
      tries=f"rng_state_0.pth beside rng_state_{RANK}.pth: the ranks in between were listed one "
            "by one (a million made a 1.9 GB list, 'internal error: MemoryError'; this never "
            "ends)",
      bad=f"found-rank-of-30-digits/checkpoint-1/rng_state_{RANK}.pth",
      words=r"rng incomplete")
def _():
    rng = torch_zip(dumps({"python": 1, "numpy": 2, "cpu": 3}, 2))
    hf_checkpoint("found-rank-of-30-digits/checkpoint-1", rng_state_0__pth=rng,
                  **{f"rng_state_{RANK}__pth": rng})


@case(name="found-accelerate-two-optimizers", path="found-accelerate-two-optimizers/step_1",
      exits=ODD, live=None,
      tries="accelerate save_state of a script with two optimizers: optimizer.bin and "
            "optimizer_1.bin (was 'internal error: TypeError: optimizer_ok() got multiple "
            "values for argument files', exit 1, in every command)",
      bad="found-accelerate-two-optimizers/step_1/optimizer_1.bin", words=r".")
def _():
    where = "found-accelerate-two-optimizers/step_1"
    put(f"{where}/model.safetensors", good_safetensors())
    for name in ("optimizer.bin", "optimizer_1.bin"):
        put(f"{where}/{name}", torch_zip(dumps(adamw(), 2), ADAMW_STORAGES))
    put(f"{where}/scheduler.bin", torch_zip(dumps(SCHEDULER, 2)))
    put(f"{where}/random_states_0.pkl", dumps({"step": 1, "random_state": (3, (1, 2), None)}, 4))
