"""What each part of a training checkpoint looks like once unpickled (FORMATS.md
"State by content"), as predicates over the inert records the restricted unpickler builds.

Every predicate looks at one node (a dict, an Opaque object's fields, a list or tuple) and its
key; none descends further than one level, so classifying a file stays linear in its size.
"""

from __future__ import annotations

import re

from ckpt_browser.standins import NumpyArray, Opaque, TensorRef

# RNG states by shape (FORMATS.md "RNG state"). CPU torch generator: 5,056 bytes; CUDA/XPU/NPU:
# 16 (seed, offset); MPS: 44 or 36; CUDA before torch 2.1: 816.
RNG_BYTES = {5056: "torch cpu", 16: "torch cuda", 44: "torch mps", 36: "torch mps",
             816: "torch cuda (before 2.1)"}
SCALER_KEYS = frozenset({"scale", "growth_factor", "backoff_factor", "growth_interval"})
SCALER_NAMES = re.compile(r"^(?:.*_)?(?:grad_|amp_|loss_)?scaler(?:_state(?:_dict)?)?$|^amp$|"
                          r"^native_amp_scaling_state$|^MixedPrecision$", re.I)
EMA_NAMES = re.compile(r"(?:^|_)ema(?:_|$)|^ema|averaged_model|^swa_model$", re.I)
WEIGHT_KEYS = ("model", "state_dict", "model_state_dict", "module", "net", "network", "weights",
               "model_state", "params", "parameters")
CONFIG_NAMES = re.compile(r"^(?:args|config|cfg|hparams|hyper_parameters|model_args|opt|"
                          r"train_args|training_args|ds_config|model_config|arguments|"
                          r"hparams_name|hparams_type|meta_cfg)$", re.I)
SCHEDULER_NAMES = re.compile(r"^(?:lr_)?sched(?:uler)?(?:_state(?:_dict)?)?$", re.I)
DATA_NAMES = re.compile(r"^(?:.*_)?(?:dataloader|data_loader|dl|loader|sampler|data_sampler|"
                        r"dataset|data)_?(?:state(?:_dict)?)?$|^dl_state_dict$|^train_iterator$",
                        re.I)
# progress counters, by name (a hint: checked against the other counters)
STEP_NAMES = re.compile(r"^(?:global_?)?(?:step|steps|iter|iters|iter_num|iteration|iterations|"
                        r"num_updates|updates_done|global_steps|steps_run|optimizer_steps|"
                        r"total_steps_done|train_steps|it)$", re.I)
EPOCH_NAMES = re.compile(r"^(?:epoch|epochs|epochs_run|cur_epoch|current_epoch|start_epoch|"
                         r"epoch_idx|last_epoch_done)$", re.I)
BATCH_NAMES = re.compile(r"^(?:batch_idx|batch_in_epoch|iterations_in_epoch|"
                         r"iteration_in_epoch|step_in_epoch|steps_in_epoch|batches_done|"
                         r"sample_in_epoch|samples_in_epoch)$", re.I)
SAMPLE_NAMES = re.compile(r"^(?:global_samples|consumed_(?:train_)?samples|samples_seen|"
                          r"tokens_seen|ntokens_seen|num_input_tokens_seen|consumed_tokens)$",
                          re.I)
STATEFUL_LOADER = frozenset({"_num_yielded", "_snapshot", "_sampler_iter_state",
                             "_iterator_finished", "_index_sampler_state", "_sampler_iter_yielded",
                             "_steps_since_snapshot"})


# The counters a scheduler state keeps its position in, in the order they are looked for:
# (whether it counts steps as last_epoch does, what a comparison of last_epoch must say of it)
SCHEDULER_COUNTERS = {
    "last_epoch": (True, ""),
    "last_batch_iteration": (True, "the DeepSpeed scheduler's last_batch_iteration ({value}) is "
                             "given as last_epoch; it starts at -1, so it is one behind the step "
                             "count."),
    "num_steps": (False, "Megatron's scheduler counts samples (num_steps {value}), not steps, so "
                  "it has no last_epoch."),
}


class Unread:
    """A non-tensor DCP item as its metadata shows it: a value of unknown type (an int, a list,
    pickled bytes ...) under a known key. Its bytes are read only where a part needs them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<DCP item, not read>"


UNREAD = Unread()
PLAIN = (int, float, str, bool, type(None), Unread)  # values a settings-like record holds


def fields(obj) -> dict:
    if type(obj) is dict:
        return obj
    if type(obj) is Opaque:
        return obj.fields
    return {}


def is_int(v) -> bool:
    """An int, or a DCP item that may be one (its key decides)."""
    return type(v) is int or v is UNREAD


def tensor_count(f: dict) -> int:
    return sum(1 for v in f.values() if type(v) is TensorRef)


# --- optimizer (FORMATS.md "Optimizer state") --------------------------------------------------

# what an optimizer keeps per parameter (torch's optimizers; megatron-core's fp32 master copy)
MOMENTS = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "step",
                     "grad_avg", "sqr_avg",  # fastai's
                     "sum", "square_avg", "acc_delta", "exp_inf", "ax", "eta", "mu", "prev",
                     "fp32_param"})


def optimizer_kind(f: dict) -> str | None:
    # param_groups is a list, or a dict once DCP has flattened it (optim.param_groups.0.lr)
    if type(f.get("state")) is dict and type(f.get("param_groups")) in (list, dict):
        fqn = any(type(k) is str for k in f["state"])
        return "torch optimizer state_dict" + (" (keyed by parameter name)" if fqn else "")
    if type(f.get("state")) in (list, tuple) and "hypers" in f and f["state"] and all(
            type(x) is dict for x in f["state"]):
        return "fastai optimizer state (Learner.save: a dict per parameter, hypers per group)"
    if _by_moment(f):
        return "optimizer state sharded by moment (megatron-core: state.exp_avg.<param>)"
    if "base_optimizer_state" in f or "fp32_flat_groups" in f or \
            "single_partition_of_fp32_groups" in f:
        return "DeepSpeed ZeRO optimizer state"
    inner = fields(f.get("optimizer"))
    if "fp32_from_fp16_params" in f and type(inner.get("state")) is dict:
        return "Megatron mixed-precision optimizer"
    return None


def zero3_shapes(obj) -> dict[str, tuple[int, ...]]:
    """DeepSpeed ZeRO-3 model states: the real shape of every parameter, by name, from
    param_shapes (a dict per param group) and frozen_param_shapes."""
    top = fields(obj)
    if "module" not in top or "param_shapes" not in top:
        return {}
    groups = top.get("param_shapes")
    groups = groups if isinstance(groups, list) else [groups]
    out: dict[str, tuple[int, ...]] = {}
    for g in [*groups, top.get("frozen_param_shapes")]:
        for name, shape in fields(g).items():
            if type(shape) in (tuple, list) and all(type(d) is int and d >= 0 for d in shape):
                out[str(name)] = tuple(shape)
    return out


def _by_moment(f: dict) -> bool:
    """megatron-core's sharded optimizer state: state.<moment>.<param>, nested or (a DCP
    skeleton's subtree of tensors only) flat; its param_groups are in common.pt."""
    st = f.get("state")
    if type(st) is dict:
        return bool(st) and all(type(k) is str and k in MOMENTS and type(v) is dict
                                for k, v in st.items())
    return bool(f) and all(type(k) is str and k.startswith("state.") and
                           k[6:].partition(".")[0] in MOMENTS for k in f)


# --- scheduler (FORMATS.md "LR scheduler state") -----------------------------------------------

def scheduler_kind(f: dict) -> str | None:
    if tensor_count(f):
        return None
    last = f.get("last_epoch")
    if is_int(last) and ("base_lrs" in f or "_last_lr" in f or "_schedulers" in f):
        if "_schedulers" in f:
            return "torch SequentialLR / ChainedScheduler"
        if {"best", "num_bad_epochs", "mode"} <= f.keys():
            return "torch ReduceLROnPlateau"
        return "torch LR scheduler"
    if "_schedulers" in f and "_last_lr" in f:
        return "torch ChainedScheduler"
    if {"best", "num_bad_epochs", "mode", "patience"} <= f.keys():
        return "torch ReduceLROnPlateau"
    if {"max_lr", "lr_warmup_steps", "num_steps", "lr_decay_style"} <= f.keys():
        return "Megatron OptimizerParamScheduler"
    if is_int(f.get("last_batch_iteration")) and len(f) <= 16:
        return "DeepSpeed LR scheduler"
    if "base_values" in f and ("last_step" in f or "_global_step" in f):
        return "mmengine parameter scheduler"
    return None


def scheduler_list(v) -> bool:
    """mmengine's param_schedulers, Lightning's lr_schedulers: a list of scheduler states."""
    return type(v) in (list, tuple) and bool(v) and all(
        scheduler_kind(fields(x)) for x in v if x is not None) and any(x is not None for x in v)


# --- scaler (FORMATS.md "Grad scaler state") ---------------------------------------------------

def scaler_kind(f: dict, key: str, obj) -> str | None:
    if SCALER_KEYS <= f.keys():
        return "torch GradScaler"
    if {"scale", "growth_tracker"} <= f.keys():
        return "Megatron grad scaler"
    if f and all(k.startswith("loss_scaler") for k in map(str, f)) and \
            all("loss_scale" in fields(v) for v in f.values()):
        return "apex amp loss scalers"
    if type(obj) is Opaque and obj.qualname.endswith("LossScaler"):
        return f"{obj.qualname.rsplit('.', 1)[-1]} (DeepSpeed fp16)"
    if type(obj) is dict and not obj and SCALER_NAMES.match(key):
        return "a disabled GradScaler ({})"
    return None


# --- RNG (FORMATS.md "RNG state") --------------------------------------------------------------

def rng_leaf(v) -> str | None:
    """The generator a value restores, when it is an RNG state by shape."""
    if type(v) is TensorRef:
        if v.dtype == "U8" and len(v.shape) == 1:
            return RNG_BYTES.get(v.shape[0])
        return None
    if type(v) in (tuple, list):
        if len(v) == 5 and v[0] == "MT19937" and type(v[1]) is NumpyArray:
            return "numpy (legacy)"
        if len(v) == 3 and v[0] == 3 and type(v[1]) in (tuple, list) and len(v[1]) == 625:
            return "python random"
        return None
    f = fields(v)
    if type(f.get("bit_generator")) is str and "state" in f:
        return f"numpy {f['bit_generator']}"
    return None


def rng_kinds(v, depth: int = 0) -> list[str] | None:
    """The generators a container holds when it is all RNG state (seeds and step counters
    may sit beside them, as in accelerate's random_states); None otherwise."""
    leaf = rng_leaf(v)
    if leaf is not None:
        return [leaf]
    if depth > 3:
        return None
    if type(v) in (list, tuple):
        items = list(v)
    elif type(v) is dict or type(v) is Opaque:
        items = list(fields(v).values())
    else:
        return None
    found: list[str] = []
    plain = 0
    for item in items:
        inner = rng_kinds(item, depth + 1)
        if inner:
            found.extend(inner)
        elif type(item) in PLAIN:
            plain += 1
        else:
            return None
    # more RNG states than plain values: {"rng": state, "epoch": 3} is a dict holding one
    return found if found and len(found) > plain else None


# --- data position (FORMATS.md "Data position") ------------------------------------------------

def data_kind(f: dict, key: str) -> str | None:
    keys = f.keys()
    if keys & STATEFUL_LOADER:
        return "torchdata StatefulDataLoader state"
    if {"examples_iterable", "epoch"} <= keys:
        return "Hugging Face datasets IterableDataset state"
    if {"sample_in_epoch", "epoch"} <= keys and ("num_canonical_nodes" in keys
                                                 or "shuffle_seed" in keys):
        return "MosaicML StreamingDataset state"
    if {"epoch", "iterations_in_epoch"} <= keys:
        return "fairseq epoch iterator state"
    if "yielded" in keys and ("generator" in keys or len(keys) <= 3):
        return "sampler state"
    if f and DATA_NAMES.match(key) and not tensor_count(f):
        return f"data position ({key})"
    return None


# --- counters (FORMATS.md "Progress counters") -------------------------------------------------

def counter_kind(key: str, v) -> str | None:
    """"step", "epoch", "batch" or "samples" for an int-valued key named like a counter."""
    if not is_int(v) or type(v) is bool:
        return None
    if STEP_NAMES.match(key):
        return "step"
    if EPOCH_NAMES.match(key):
        return "epoch"
    if BATCH_NAMES.match(key):
        return "batch"
    if SAMPLE_NAMES.match(key):
        return "samples"
    return None


# --- weights (FORMATS.md "Model weights") ------------------------------------------------------

def module_record(obj) -> bool:
    """A pickled nn.Module (torch.save(model)) or a TorchScript module."""
    if type(obj) is not Opaque:
        return False
    f = obj.fields
    return "_parameters" in f or "_modules" in f or obj.qualname.startswith("__torch__.")


def state_dict_like(f: dict) -> bool:
    """Mostly tensors under string keys: a model's state_dict (buffers and extra values such
    as an AveragedModel's n_averaged may sit beside them)."""
    n = sum(1 for v in f.values() if type(v) is TensorRef and not rng_leaf(v))
    return n > 0 and 2 * n >= len(f) and all(type(k) is str for k in f)
