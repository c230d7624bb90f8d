"""Which operators and custom classes TorchScript code may reach without touching files or
processes (README "Safety").

In an archive's code, `torch.X` is the operator aten::X and `ops.ns.X` is ns::X; a custom C++
class is `__torch__.torch.classes.ns.Name` (its methods and `__setstate__` are C++). Read off
torch 2.13's registry (torch._C._jit_get_all_schemas and _jit_get_custom_class_schemas): the
only operators of torch's own namespaces that reach files are aten::save and aten::from_file,
and prim's RPC calls reach other processes; prim::Print and aten::warn write to the terminal,
which is harmless. The namespaces below are tensor math, shapes, quantized kernels and
profiling. Any other namespace is a library's code that nothing here vouches for: unsafe.
"""

from __future__ import annotations

PURE_NAMESPACES = frozenset({
    "aten", "prim", "prims", "quantized", "_quantized", "quantized_decomposed", "quantization",
    "sparse", "mkldnn", "mkldnn_prepacked", "mkl", "onednn", "xnnpack", "profiler", "rngprims",
    "inductor_prims", "static_runtime", "onnx", "torchvision",
})
# operators of those namespaces that do reach files or processes
NOT_PURE = {
    ("aten", "save"): "writes a file",
    ("aten", "from_file"): "opens or creates a file",
    ("prim", "rpc_async"): "calls another process (RPC)",
    ("prim", "rpc_sync"): "calls another process (RPC)",
    ("prim", "rpc_remote"): "calls another process (RPC)",
    ("prim", "PythonOp"): "runs Python code",
    ("prim", "IgnoredPythonOp"): "runs Python code",
}
OTHER_NAMESPACES = {
    "c10d": "talks to other processes (distributed)",
    "_c10d_functional": "talks to other processes (distributed)",
    "_c10d_functional_autograd": "talks to other processes (distributed)",
    "symm_mem": "talks to other processes (distributed)",
    "_dtensor": "talks to other processes (distributed)",
    "debugprims": "reads files",
}
# custom C++ classes whose methods (and __setstate__, which runs at load) only pack tensors
INERT_CLASSES = frozenset({"quantized", "sparse", "rnn", "mkldnn", "xnnpack", "profiler",
                           "profiling"})
PROCESS_CLASSES = frozenset({"c10d", "dist_c10d", "dist_rpc"})
ANY_OP = "reaches any operator through a name it holds (torch.save included)"


def operator_words(namespace: str, name: str) -> str | None:
    """None for a pure operator, else what it does."""
    if namespace in PURE_NAMESPACES:
        return NOT_PURE.get((namespace, name))
    return OTHER_NAMESPACES.get(namespace, f"runs the {namespace} library's code, which "
                                "nothing here knows to be pure math")


def class_words(namespace: str) -> str | None:
    """None for an inert custom class of `namespace`, else what its C++ code may do."""
    if namespace in INERT_CLASSES:
        return None
    if namespace in PROCESS_CLASSES:
        return "talks to other processes (distributed)"
    return f"runs the {namespace} library's C++ class code, which nothing here knows to be inert"


def chain_words(parts: list[str]) -> str | None:
    """What a dotted name rooted at torch, ops or __torch__.torch.classes reaches."""
    root = parts[0]
    if root == "torch":
        return ANY_OP if len(parts) == 1 else operator_words("aten", parts[1])
    if root == "ops":
        return ANY_OP if len(parts) < 3 else operator_words(parts[1], parts[2])
    if parts[1:3] == ["torch", "classes"]:  # __torch__.torch.classes.ns.Name
        return ANY_OP if len(parts) < 4 else class_words(parts[3])
    return None
