"""Which project wrote a single-file checkpoint, from its top-level keys (FORMATS.md
"Single-file projects"), and what that project's own resume does about each component.

A fingerprint never changes what a tensor is; it names the producer and says which missing
parts its resume re-derives (nanoGPT recomputes the LR from iter_num, fairseq reseeds every
update ...) and which it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckpt_browser.parts.signatures import fields, rng_kinds
from ckpt_browser.standins import Opaque


@dataclass(frozen=True)
class Project:
    name: str  # the framework id in JSON: "nanogpt", "torchvision", ... or "custom"
    label: str  # for people: "nanoGPT (train.py)"
    # component -> why this project's resume does not need it saved
    not_needed: dict[str, str] = field(default_factory=dict)
    # component -> what a missing one means, in this project's words (overrides the generic)
    missing: dict[str, str] = field(default_factory=dict)
    saves_no_scaler: bool = False  # its resume builds a new GradScaler, fp16 or not (YOLOv5)
    own_loop: bool = False  # no project's resume: the user's own code restores the state
    # a prefix its own model wrapper gives every weight name, which its loader keeps:
    # (prefix, why)
    own_prefix: tuple[str, str] = ("", "")


NO_RNG_REPLAY = ("the resumed run re-seeds instead, so dropout and shuffling differ from an "
                 "uninterrupted run")
EPOCH_ORDER = ("saved at the end of an epoch: the next epoch's order comes from the sampler "
               "(DistributedSampler.set_epoch reproduces it; a RandomSampler draws it from the "
               "torch RNG, see rng)")

PROJECTS = {
    "nanogpt": Project("nanogpt", "nanoGPT (train.py)", {
        "scheduler": "nanoGPT recomputes the learning rate from iter_num (get_lr), so no "
                     "scheduler state is needed.",
        "data": "nanoGPT samples random windows with the global torch RNG (get_batch): the data "
                "position is the RNG state (see rng)."},
        {"rng": "nanoGPT saves no RNG state and re-runs torch.manual_seed(1337 + seed_offset) on "
                "resume, so the resumed run replays the same random batches as step 0 "
                "(nanoGPT#467).",
         "scaler": "nanoGPT trains with dtype float16 here but saves no GradScaler: the loss "
                   "scale restarts at 65536 and steps may be skipped finding it again."}),
    "torchvision": Project("torchvision", "torchvision references (train.py)",
                           {"data": EPOCH_ORDER.capitalize() + "."},
                           {"rng": "torchvision's references save no RNG state: " + NO_RNG_REPLAY
                            + "."}),
    "timm": Project("timm", "timm (train.py, CheckpointSaver)", {
        "scheduler": "timm re-steps its scheduler from the epoch on resume "
                     "(lr_scheduler.step(start_epoch)), so no scheduler state is needed.",
        "data": EPOCH_ORDER.capitalize() + "."},
        {"rng": "timm saves no RNG state: " + NO_RNG_REPLAY + "."}),
    "ignite": Project("ignite", "pytorch-ignite (Checkpoint)", {},
                      {"rng": "ignite saves RNG state only with a DeterministicEngine "
                              "(rng_states): " + NO_RNG_REPLAY + "."}),
    "mmengine": Project("mmengine", "mmengine (Runner.save_checkpoint)", {
        "data": "mmengine resumes an epoch-based loop at the start of the next epoch and an "
                "iteration-based one by skipping meta.iter batches, so no loader state is "
                "saved (exact only at an epoch boundary of an epoch-based loop)."},
                        {"rng": "mmengine saves only meta.seed and re-seeds on resume: "
                                + NO_RNG_REPLAY + "."}),
    "mmcv": Project("mmcv", "mmcv 1.x (save_checkpoint)", {},
                    {"rng": "mmcv saves no RNG state: " + NO_RNG_REPLAY + "."}),
    "detectron2": Project("detectron2", "detectron2 / fvcore (Checkpointer)", {},
                          {"rng": "detectron2 re-runs seed_all_rng(seed + rank) at setup and saves "
                                  "no RNG state: " + NO_RNG_REPLAY + ".",
                           "data": "detectron2's TrainingSampler saves no position: its seeded "
                                   "infinite stream restarts from the beginning on resume, so "
                                   "the first batches are seen again."}),
    "ultralytics": Project("ultralytics", "Ultralytics YOLO (BaseTrainer.save_model)", {
        "scheduler": "Ultralytics recomputes the schedule from the epoch (scheduler.last_epoch "
                     "= start_epoch - 1).",
        "data": "Ultralytics resumes at an epoch boundary (start_epoch = epoch + 1)."},
        {"rng": "Ultralytics re-seeds (init_seeds(seed + 1 + RANK)) and saves no RNG state: "
                + NO_RNG_REPLAY + "."}),
    "yolov5": Project("yolov5", "YOLOv5 (train.py)", {
        "scheduler": "YOLOv5 recomputes the schedule from the epoch (scheduler.last_epoch = "
                     "start_epoch - 1).",
        "data": "YOLOv5 resumes at an epoch boundary (start_epoch = epoch + 1)."},
        {"rng": "YOLOv5 saves no RNG state: " + NO_RNG_REPLAY + ".",
         "scaler": "YOLOv5 saves no GradScaler: a new one starts at 65536 on resume, so under "
                   "AMP (its default on CUDA) the loss scale is found again."},
        saves_no_scaler=True),
    "fairseq": Project("fairseq", "fairseq (checkpoint_utils.save_checkpoint)", {
        "rng": "fairseq needs no saved RNG: it reseeds with seed + num_updates on every "
               "update, so the resumed run draws the same numbers."}),
    "composer": Project("composer", "MosaicML Composer", own_prefix=(
        "module.", "ComposerClassifier / HuggingFaceModel keep the network as .module, and "
        "Composer loads the names as they are")),
    "torchtune": Project("torchtune", "torchtune (recipe_state.pt)", {},
                         {"scheduler": "torchtune does not save the LR scheduler: it is rebuilt "
                                       "with last_epoch = global_step - 1, so internals such as "
                                       "_step_count differ (torchtune#2730).",
                          "rng": "torchtune saves only the seed: " + NO_RNG_REPLAY + "."}),
    "tutorial": Project("custom", "the PyTorch tutorial's general checkpoint", own_loop=True),
    "custom": Project("custom", "a custom training loop", own_loop=True),
}


def fingerprint(obj) -> Project | None:
    """The project whose save code wrote this object graph, or None for a plain state dict,
    a lone component, or anything no known project writes."""
    f = fields(obj)
    keys = set(map(str, f))
    if not keys:
        return None
    model_args = fields(f.get("model_args"))
    if "iter_num" in keys and {"n_layer", "n_head", "n_embd"} <= set(map(str, model_args)):
        return PROJECTS["nanogpt"]
    if {"arch", "version", "state_dict"} <= keys:
        return PROJECTS["timm"]
    if {"model", "optimizer", "lr_scheduler", "epoch", "args"} <= keys and _namespace(f["args"]):
        return PROJECTS["torchvision"]
    meta = fields(f.get("meta"))
    if "mmengine_version" in meta or "message_hub" in keys:
        return PROJECTS["mmengine"]
    if "mmcv_version" in meta:
        return PROJECTS["mmcv"]
    trainer = fields(f.get("trainer"))
    if "model" in keys and "iteration" in trainer and ("hooks" in trainer or "_trainer" in trainer):
        return PROJECTS["detectron2"]
    if {"model", "iteration"} <= keys and keys & {"optimizer", "scheduler"} and \
            "epoch" not in keys and not any(rng_kinds(v) for v in f.values()):
        return PROJECTS["detectron2"]  # fvcore's Checkpointer, as plain_train_net uses it
        # (detectron2 saves no RNG state: a file with one is someone's custom loop)
    if any({"epoch_length", "iteration"} <= set(map(str, fields(v))) for v in f.values()) or \
            {"epoch_length", "iteration"} <= keys:
        return PROJECTS["ignite"]
    if {"ema", "updates", "train_args"} <= keys:
        return PROJECTS["ultralytics"]
    if {"ema", "updates", "opt", "best_fitness"} <= keys:
        return PROJECTS["yolov5"]
    if {"optimizer_history", "extra_state"} <= keys or {"last_optimizer_state", "model"} <= keys:
        return PROJECTS["fairseq"]
    state = fields(f.get("state"))
    if {"timestamp", "rank_zero_seed"} <= set(map(str, state)):
        return PROJECTS["composer"]
    if {"epochs_run", "steps_run"} <= keys or {"seed", "epochs_run", "total_epochs"} <= keys:
        return PROJECTS["torchtune"]
    if {"epoch", "model_state_dict", "optimizer_state_dict"} <= keys:
        return PROJECTS["tutorial"]
    return None


def _namespace(v) -> bool:
    return type(v) is Opaque and v.qualname == "argparse.Namespace"
