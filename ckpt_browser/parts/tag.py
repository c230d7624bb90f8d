"""Give every tensor of a checkpoint its component, and every weight its parameter name.

Pickled files are classified by content (`classify`), and so is a DCP folder, from the
skeleton its metadata gives (`dcp_skeleton`: its keys nested again, tensors as stand-ins);
the prefixes DCP writers use (DCP_PREFIXES) name only the keys classify finds nothing for.
Safetensors files hold weights. A weight's parameter name is its path below the weights'
root with a uniform wrapper prefix (`module.` from DataParallel / DDP, `_orig_mod.` from
torch.compile) taken off (a pickled module's `_modules`, `_parameters`, `_buffers` records are
left out when it is read): the name the model's own `state_dict()` would use, which diff, the
module view and the optimizer checks match on.
"""

from __future__ import annotations

from dataclasses import replace

from ckpt_browser.model import FileInfo, Layout, Part
from ckpt_browser.parts.classify import classify, innermost, kinds_of
from ckpt_browser.parts.signatures import UNREAD, rng_leaf, zero3_shapes
from ckpt_browser.readers.files import PICKLE_FORMATS
from ckpt_browser.readers.torchfile import module_attributes
from ckpt_browser.standins import DcpCheckpoint, Opaque, PickleFile, TensorRef

# DCP keys -> component, first match wins, when the folder's files belong to several components
DCP_PREFIXES = (
    ("model.", "weights"), ("model0.", "weights"), ("optimizer.", "optimizer"),
    ("optimizer_0.", "optimizer"), ("optim.", "optimizer"), ("lr_scheduler.", "scheduler"),
    ("scheduler.", "scheduler"), ("dataloader.", "data"), ("train_state.", "progress"),
    ("rng_state", "rng"), ("opt_param_scheduler.", "scheduler"),
)
WRAPPERS = ("module.", "_orig_mod.", "_fsdp_wrapped_module.")


def tag_files(layout: Layout, files: list[FileInfo]) -> list[FileInfo]:
    return [tag_file(layout, f) for f in files]


def tag_file(layout: Layout, f: FileInfo) -> FileInfo:
    if f.format in PICKLE_FORMATS and isinstance(f.source, PickleFile) and f.source.obj is not None:
        found = classify(f.source.obj)
        kinds = kinds_of(found)
        attrs = _module_attributes(found)
        tensors = tuple(t._replace(component="other" if t.name in attrs else
                                   innermost(kinds, t.name) or "other") for t in f.tensors)
        shapes = zero3_shapes(f.source.obj)
        if shapes:
            tensors = _unplaceholder(tensors, shapes)
        held = {t.component for t in tensors}
        if "weights" not in held and "ema" in held:
            # an EMA with no live model beside it is what loads as the model (Ultralytics'
            # last.pt has model None; its resume and its loaders take the EMA)
            tensors = tuple(t._replace(component="weights") if t.component == "ema" else t
                            for t in tensors)
        return replace(f, tensors=tensors, parts=tuple(Part(p.kind, p.path, p.what)
                                                       for p in found))
    if f.format == "safetensors" and f.name in layout.apart:  # an EMA copy in its own folder
        return replace(f, tensors=tuple(t._replace(component="ema") for t in f.tensors))
    if f.format == "safetensors" and layout.index is not None and f.name not in layout.shard_names:
        # beside an index that does not name it: loaders skip it, so it is not the weights
        return replace(f, tensors=tuple(t._replace(component="other") for t in f.tensors))
    if f.format == "dcp-metadata":
        owner = _dcp_owner(layout, f.name)
        found = dcp_parts(f.source) if isinstance(f.source, DcpCheckpoint) else []
        kinds = kinds_of(found)
        return replace(f, tensors=tuple(t._replace(component=owner or dcp_kind(kinds, t.name))
                                        for t in f.tensors),
                       parts=tuple(Part(p.kind, p.path, p.what) for p in found))
    return f


def dcp_parts(d: DcpCheckpoint) -> list:
    """The parts of a DCP checkpoint, found by classify on its skeleton."""
    return classify(dcp_skeleton(d)) if d.entries else []


def dcp_kind(kinds: dict[str, str], key: str) -> str:
    """A DCP key's component: the part classify found it in, else its prefix's."""
    return innermost(kinds, key) or dcp_component(key)


def dcp_skeleton(d: DcpCheckpoint) -> dict:
    """The state dict DCP flattened, nested again from the metadata alone: each key split on
    '.', a tensor as a TensorRef of its global shape and dtype, any other item as UNREAD. A
    subtree of plain tensors only (a model's state_dict, an optimizer's FQN-keyed moments)
    stays one flat dict of dotted names, as the state_dict it was; an RNG-shaped tensor keeps
    the subtree open, so it is found on its own. Linear in the keys' segments."""
    refs = {}
    mixed: set[str] = set()  # dotted prefixes with something other than a plain tensor below
    for key, e in d.entries.items():
        ref = TensorRef(e.dtype or "?", tuple(e.shape or ()), (), key) \
            if e.kind == "tensor" else UNREAD
        refs[key] = ref
        if type(ref) is not TensorRef or rng_leaf(ref):
            mixed.add("")
            end = key.find(".")
            while end != -1:
                mixed.add(key[:end])
                end = key.find(".", end + 1)
    root: dict = {}
    for key, ref in refs.items():
        node, start = root, 0
        end = key.find(".") if "" in mixed else -1
        while end != -1 and type(node) is dict:
            node = node.setdefault(key[start:end], {})
            start = end + 1
            if key[:end] not in mixed:
                break
            end = key.find(".", start)
        if type(node) is dict and key[start:] not in node:  # a clash of a leaf and a subtree
            node[key[start:]] = ref                         # keeps the first; the table names
    return root                                             # the other


def _module_attributes(found) -> set[str]:
    """Paths of the tensors pickled modules keep as plain attributes, not in their
    state_dict(); each module (shared by many paths in a pickle) walked once."""
    by_node: dict[int, set[str]] = {}
    out: set[str] = set()
    for p in found:
        if p.kind not in ("weights", "ema") or type(p.node) is not Opaque:
            continue
        rel = by_node.get(id(p.node))
        if rel is None:
            rel = by_node[id(p.node)] = module_attributes(p.node)
        out.update(f"{p.path}.{r}" if p.path else r for r in rel)
    return out


def _unplaceholder(tensors, shapes: dict) -> tuple:
    """ZeRO-3 saves 0-element placeholders in `module` (signatures.zero3_shapes): show each
    parameter at its real shape, marked a placeholder (its bytes are in the optimizer shards,
    so it is not located here). Every rank's file holds the same placeholders, classified
    alike; the checkpoint's totals and weights count each name once (model.Checkpoint)."""
    from ckpt_browser.readers.pickle_safe import ITEMSIZE

    out = []
    for t in tensors:
        real = shapes.get(t.name.removeprefix("module."))
        if t.numel == 0 and t.name.startswith("module.") and real is not None:
            numel = 1
            for d in real:
                numel *= d
            t = t._replace(shape=real, numel=numel, begin=0, end=numel * ITEMSIZE.get(t.dtype, 1),
                           located=False, placeholder=True)
        out.append(t)
    return tuple(out)


def _dcp_owner(layout: Layout, meta: str) -> str | None:
    """The one component the names give a DCP folder (HF FSDP's pytorch_model_fsdp_0/ holds
    weights, optimizer_0/ the optimizer), else None: split by key."""
    det = layout.detection
    if det is None:
        return None
    owners = {role for role, files in det.roles.items() if meta in files and role != "other"}
    return owners.pop() if len(owners) == 1 else None


def dcp_component(key: str) -> str:
    for prefix, kind in DCP_PREFIXES:
        if key.startswith(prefix):
            return kind
    return "weights"  # torchtitan and plain DCP keep model FQNs at the top level


def param_name(path: str, root: str, prefix: str = "") -> str:
    """A weight's name as the model's state_dict() has it: below `root` and without the
    uniform wrapper `prefix` (a pickled module's records are left out when it is read:
    readers.torchfile.walk)."""
    name = path[len(root) + 1:] if root and path.startswith(root + ".") else path
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def wrapper_prefix(names) -> str:
    """`module.`, `_orig_mod.` (or both, nested) when every name carries it."""
    names = [n for n in names if n != "n_averaged"]  # AveragedModel's counter sits beside
    prefix = ""
    while names:
        head = next((w for w in WRAPPERS if all(n.startswith(prefix + w) for n in names)), None)
        if head is None:
            break
        prefix += head
    return prefix


def weight_roots(f: FileInfo) -> list[Part]:
    """The weights (and EMA) parts of a file; a safetensors file is one, at its root."""
    if f.format in ("safetensors", "dcp-metadata"):
        return [Part("weights", "", "")]
    return [p for p in f.parts if p.kind in ("weights", "ema")]


def _part_names(f: FileInfo, part: Part) -> tuple[list, list[str], str]:
    """The tensors of one weights part, their names below its root, and the wrapper prefix
    they all carry."""
    if f.format == "dcp-metadata":
        inside = [t for t in f.tensors if t.component == "weights"]
    else:
        # an EMA's tensors are the weights when no model is saved beside it (tag_file)
        held = ("ema", "weights") if part.kind == "ema" else (part.kind,)
        inside = [t for t in f.tensors if t.component in held and _under(t.name, part.path)]
    names = [param_name(t.name, part.path) for t in inside]
    return inside, names, wrapper_prefix(names)


def part_prefix(f: FileInfo, part: Part) -> str:
    return _part_names(f, part)[2]


def part_weights(f: FileInfo, part: Part) -> list[tuple[str, object]]:
    """(parameter name, tensor) for the tensors of one weights part of a file."""
    inside, names, prefix = _part_names(f, part)
    return [(n[len(prefix):] if prefix else n, t) for n, t in zip(names, inside)]


def named_weights(f: FileInfo) -> list[tuple[str, object]]:
    """(parameter name, tensor) for every weight of one file: an EMA's when it is all the
    file holds (tag_file)."""
    roots = weight_roots(f)
    kinds = ("weights",) if any(p.kind == "weights" for p in roots) else ("weights", "ema")
    return [x for part in roots if part.kind in kinds for x in part_weights(f, part)]


def _under(name: str, root: str) -> bool:
    return not root or name == root or name.startswith(root + ".")



def match_keys(f: FileInfo) -> dict[str, str]:
    """tensor name -> the name a diff pairs it by: a weight's parameter name; any other
    tensor's path below the part that holds it, so that optimizer_state_dict.state.0.exp_avg
    (the tutorial) and opt.state.0.exp_avg (a custom loop) pair. A kind with two parts in one
    file (two optimizers) keeps its full names."""
    if f.format not in PICKLE_FORMATS or not f.parts:
        return {}
    keys = {t.name: n for n, t in named_weights(f)}
    kinds = [p.kind for p in f.parts]
    parts = [p for p in f.parts if p.path and p.kind not in ("weights", "ema", "config")
             and kinds.count(p.kind) == 1]
    for t in f.tensors:
        if t.name in keys:
            continue
        inside = [p for p in parts if t.name.startswith(p.path + ".")]
        if inside:
            root = max(inside, key=lambda p: len(p.path)).path
            keys[t.name] = t.name[len(root) + 1:]
    return keys
