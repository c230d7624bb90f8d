"""No framework's names: a folder or file of safetensors weights, or torch weights saved by
save_pretrained(safe_serialization=False). Last in the registry: they claim what is left."""

from __future__ import annotations

from ckpt_browser.producers.base import Detection, Producer, Seen, rx, with_other

WEIGHTS = (".safetensors", ".safetensors.index.json")
TORCH_WEIGHTS = rx(r"pytorch_model\.bin", r"pytorch_model-\d+-of-\d+\.bin",
                   r"pytorch_model\.bin\.index\.json")


def _safetensors(seen: Seen) -> bool:
    if seen.is_file:
        return seen.names[0].endswith((".safetensors", ".index.json"))
    return any(n.endswith(WEIGHTS) for n in seen.names)


def _safetensors_roles(seen: Seen) -> Detection:
    if seen.is_file:
        return Detection(seen.path, seen.root, "safetensors", roles={"weights": tuple(seen.names)})
    roles = {"weights": tuple(n for n in seen.names if n.endswith(WEIGHTS))}
    return Detection(seen.path, seen.path, "safetensors", seen.step, seen.source,
                     roles=with_other(roles, seen.names))


def _torch_roles(seen: Seen) -> Detection:
    roles = {"weights": tuple(n for n in seen.names if TORCH_WEIGHTS.match(n))}
    return Detection(seen.path, seen.path, "torch", seen.step, seen.source,
                     roles=with_other(roles, seen.names))


SAFETENSORS = Producer("safetensors", _safetensors, _safetensors_roles, weights_only=True)
TORCH = Producer("torch", lambda seen: not seen.is_file and any(map(TORCH_WEIGHTS.match,
                                                                    seen.names)), _torch_roles)
