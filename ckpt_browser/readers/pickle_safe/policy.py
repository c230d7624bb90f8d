"""Which globals a checkpoint may name, and what naming the others means (README "Safety").

Nothing is ever imported or called; this only decides how a global is reported. Three tiers:

- **data** (`is_data`): torch's own weights_only allowlist plus the record classes real
  checkpoints hold (numpy arrays and RNG, argparse.Namespace, pathlib paths, transformers'
  TrainingArguments, DeepSpeed's loss scaler, omegaconf ...). Rebuilt as inert records, silently.
- **imports**: any other class, rebuilt the way pickle saves a plain object (a bare `__new__`,
  then its attributes), or any other global only referenced. Loading the file the torch way
  imports its module and runs that code: a warning naming it.
- **unsafe**: any other global that the pickle *calls* (REDUCE, INST, OBJ, NEWOBJ with
  arguments), an allowed function given something that can run code (calls.py), a class of
  the standard library, torch or numpy off the inert list rebuilt with state (its
  `__setstate__` runs), the result of a call that the pickle calls again, and every name on the
  deny list below even as a bare reference. An error: whoever loads the file the usual way
  runs it.

The deny list is kept for its words ("runs a shell command") and for bare references.
"""

from __future__ import annotations

import os
import sys

UNSAFE_MODULES = frozenset({
    "os", "posix", "nt", "subprocess", "_posixsubprocess", "sys", "shutil", "socket", "importlib",
    "runpy", "code", "codeop", "pty", "ctypes", "_ctypes", "pickle", "_pickle", "marshal",
    "webbrowser", "multiprocessing", "inspect",
    "pdb", "bdb", "timeit", "trace", "profile", "cProfile", "pydoc", "platform", "signal",
    "threading", "_thread", "asyncio", "tempfile", "glob", "zipimport", "site", "sysconfig",
    "gc", "mmap", "fcntl", "resource", "select", "http", "urllib", "ftplib", "smtplib",
    "telnetlib", "ssl", "_winapi", "winreg", "msvcrt", "setuptools", "distutils", "pip",
    "torch.hub", "torch.jit", "torch._C", "torch.ops", "torch.classes", "torch.package",
    "torch.utils.cpp_extension", "torch._dynamo", "numpy.f2py", "numpy.distutils",
    "numpy.testing", "numpy.ctypeslib", "numpy.lib.npyio",
    # reach code or files by name, or open files when called
    "pkgutil", "codecs", "logging", "gzip", "bz2", "lzma", "tarfile", "zipfile", "sqlite3",
    "shelve", "dbm", "fileinput",
    # found in public scanner bypasses: they run a command, evaluate code or write files
    "imaplib", "uuid._get_command_stdout", "_osx_support", "doctest", "mailcap", "ensurepip",
    "torch.utils.collect_env", "torch.distributed.elastic.multiprocessing", "torch.fx",
    "torch._inductor", "sympy", "mpmath", "jinja2", "typing._eval_type", "imp", "_pyio",
    "tokenize", "idlelib", "lib2to3", "venv", "cgitb", "antigravity", "this", "turtle",
    "tkinter", "_aix_support", "_bootlocale", "numpy.lib._npyio_impl", "_io", "io",
})
UNSAFE_NAMES = frozenset({
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__", "builtins.open",
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.globals",
    "builtins.locals", "builtins.vars", "builtins.input", "builtins.breakpoint", "builtins.apply",
    "builtins.execfile", "builtins.file", "builtins.reload", "builtins.exit", "builtins.quit",
    "builtins.help", "operator.attrgetter", "operator.methodcaller", "operator.call",
    "_operator.attrgetter", "_operator.methodcaller", "_operator.call", "types.FunctionType",
    "types.LambdaType", "types.CodeType", "types.MethodType", "torch.load", "torch.compile",
    "torch.save", "torch.serialization.load", "torch.serialization.save",
    "torch.storage._load_from_bytes",  # runs torch.load(weights_only=False)
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap",
    "numpy.save", "numpy.savez", "numpy.savetxt", "numpy.DataSource", "numpy.fromregex",
    "numpy.tofile",
})

_WHAT = (  # (prefix, what it does): the extra words for a known name; first match wins
    (("importlib.machinery.SourceFileLoader.set_data", "importlib._bootstrap_external.",
      "torch.serialization._open", "torch.export.pt2_archive",
      "torch.from_file", "distutils.file_util", "numpy.savetxt", "numpy.lib.npyio.DataSource"),
     "opens or writes files"),
    (("pydoc.pipepager", "pydoc.tempfilepager", "pydoc.pager", "multiprocessing.util.spawnv",
      "torch._inductor.cpp_builder.run_compile_cmd"), "runs a command"),
    (("dataclasses._create_fn", "idlelib", "numpy.f2py", "torch.utils.benchmark"),
     "runs Python code"),
    (("builtins.dict.get",), "looks up any builtin (exec, eval ...) by name"),
    (("os.system", "posix.system", "nt.system", "os.popen", "subprocess", "_posixsubprocess",
      "pty", "imaplib.IMAP4_stream", "uuid._get_command_stdout", "_osx_support", "mailcap",
      "torch.utils.collect_env", "torch.distributed.elastic.multiprocessing", "ensurepip",
      "os.exec", "os.spawn", "posix.exec", "posix.spawn", "platform"), "runs a command"),
    (("builtins.eval", "builtins.exec", "builtins.compile", "code", "codeop", "runpy",
      "torch.fx", "sympy", "mpmath", "typing._eval_type", "doctest", "timeit", "pdb", "bdb",
      "types.CodeType", "types.FunctionType", "torch._inductor"), "runs Python code"),
    (("builtins.__import__", "importlib", "imp.", "pkgutil", "jinja2", "zipimport",
      "pydoc", "site"), "imports code by name"),
    (("builtins.open", "io.", "_io.", "_pyio", "codecs", "logging", "tokenize", "sqlite3",
      "shelve", "dbm", "numpy.save", "numpy.memmap", "numpy.tofile", "torch.save",
      "torch.serialization.save", "tempfile", "shutil", "gzip", "bz2", "lzma", "tarfile",
      "zipfile", "fileinput"), "opens or writes files"),
    (("torch.load", "torch.serialization.load", "torch.storage._load_from_bytes", "pickle",
      "_pickle", "marshal", "numpy.load"), "loads another pickle"),
    (("socket", "http", "urllib", "ftplib", "smtplib", "telnetlib", "ssl", "webbrowser",
      "numpy.DataSource"), "reaches the network"),
)

# Enums of the frameworks' records (data, and callable: Cls(value) looks the member up,
# nothing more; calls.py checks the value)
ENUMS = frozenset({
    "transformers.training_args.OptimizerNames", "transformers.training_args.ParallelMode",
    "transformers.trainer_utils.IntervalStrategy", "transformers.trainer_utils.SaveStrategy",
    "transformers.trainer_utils.HubStrategy", "transformers.trainer_utils.SchedulerType",
    "transformers.trainer_utils.EvaluationStrategy", "transformers.trainer_utils.FSDPOption",
    "transformers.trainer_utils.ShardedDDPOption", "transformers.debug_utils.DebugOption",
    "accelerate.utils.dataclasses.DistributedType", "accelerate.utils.dataclasses.PrecisionType",
    "accelerate.utils.dataclasses.DynamoBackend", "deepspeed.runtime.zero.config.ZeroStageEnum",
    "megatron.core.enums.ModelType", "uuid.SafeUUID",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
    "torch.distributed.checkpoint.planner.WriteItemType",
})

DATA = frozenset({
    # torch's weights_only allowlist (2.13) beyond the recorders in allowlist.py
    "torch.Tensor", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer",
    "torch.storage.TypedStorage", "torch.storage.UntypedStorage",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_nested_tensor", "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_wrapper_subclass",
    "torch.torch_version.TorchVersion",
    # DCP .metadata (FORMATS.md "DCP")
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    # the save plans megatron-core keeps in Metadata.all_local_plans (to reuse on its next save)
    "torch.distributed.checkpoint.planner.SavePlan",
    "torch.distributed.checkpoint.planner.WriteItem",
    "torch.distributed.checkpoint.planner.TensorWriteData",
    # numpy arrays, scalars and RNG state
    "numpy.ndarray", "numpy.dtype", "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer", "numpy.random._pickle.__randomstate_ctor",
    "numpy.random._pickle.__bit_generator_ctor", "numpy.random._pickle.__generator_ctor",
    "numpy.random.mtrand.RandomState", "numpy.random._generator.Generator",
    "numpy.random._mt19937.MT19937", "numpy.random._pcg64.PCG64", "numpy.random._pcg64.PCG64DXSM",
    "numpy.random._philox.Philox", "numpy.random._sfc64.SFC64",
    "numpy.random.bit_generator.SeedSequence",
    # the standard library's plain values
    "builtins.object", "builtins.dict", "builtins.list", "builtins.tuple", "builtins.str",
    "builtins.int", "builtins.float", "builtins.bool", "builtins.range", "builtins.NoneType",
    "argparse.Namespace", "types.SimpleNamespace", "pathlib.Path", "pathlib.PosixPath",
    "pathlib.WindowsPath", "pathlib.PurePath", "pathlib.PurePosixPath", "pathlib.PureWindowsPath",
    "datetime.datetime", "datetime.date", "datetime.time", "datetime.timedelta",
    "datetime.timezone", "decimal.Decimal", "fractions.Fraction", "uuid.UUID",
    "random.Random", "typing.Any",
    # frameworks' recorded classes (FORMATS.md "Reading without running code")
    "transformers.training_args.TrainingArguments",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    "transformers.trainer_pt_utils.AcceleratorConfig",
    "trl.trainer.sft_config.SFTConfig", "trl.trainer.dpo_config.DPOConfig",
    "trl.trainer.grpo_config.GRPOConfig", "trl.trainer.ppo_config.PPOConfig",
    "trl.trainer.reward_config.RewardConfig", "trl.trainer.orpo_config.ORPOConfig",
    "trl.trainer.kto_config.KTOConfig", "trl.trainer.cpo_config.CPOConfig",
    "accelerate.state.PartialState", "accelerate.utils.dataclasses.DataLoaderConfiguration",
    "accelerate.data_loader.SeedableRandomSampler",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.utils.tensor_fragment.fragment_address",
    "omegaconf.dictconfig.DictConfig", "omegaconf.listconfig.ListConfig",
    "omegaconf.base.ContainerMetadata", "omegaconf.base.Metadata", "omegaconf.nodes.AnyNode",
    "omegaconf.nodes.StringNode", "omegaconf.nodes.IntegerNode", "omegaconf.nodes.FloatNode",
    "omegaconf.nodes.BooleanNode", "omegaconf.nodes.EnumNode", "omegaconf.nodes.PathNode",
    "lightning.fabric.utilities.data.AttributeDict",
    "lightning_fabric.utilities.data.AttributeDict",
    "lightning.pytorch.utilities.parsing.AttributeDict",
    "pytorch_lightning.utilities.parsing.AttributeDict",
    "mmengine.logging.history_buffer.HistoryBuffer", "mmengine.config.config.ConfigDict",
    "ultralytics.utils.IterableSimpleNamespace",
    *ENUMS,  # the enums above
})
def is_unsafe(qualname: str) -> bool:
    """On the deny list: unsafe even when only referenced."""
    if qualname in UNSAFE_NAMES:
        return True
    module = qualname
    while "." in module:
        module = module.rsplit(".", 1)[0]
        if module in UNSAFE_MODULES:
            return True
    return qualname in UNSAFE_MODULES



# the rest of torch's weights_only allowlist: legacy tensor types, sub-byte dtypes, qschemes
DATA |= {f"torch.{where}{kind}Tensor" for where in ("", "cuda.", "sparse.", "cuda.sparse.")
         for kind in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int",
                      "Long", "Short")}
DATA |= {f"torch.{u}int{n}" for u in ("", "u") for n in range(1, 8)}
DATA |= {f"torch.per_{q}" for q in ("channel_affine", "channel_affine_float_qparams",
                                    "channel_symmetric", "tensor_affine", "tensor_symmetric")}
DATA_PREFIXES = ("__torch__.",)  # TorchScript's own type names: torch.jit.load never imports
STDLIB = frozenset(sys.stdlib_module_names) | {"__builtin__", "copy_reg"}
# your own record classes and enums, as torch.serialization.add_safe_globals would take them:
# CKPT_BROWSER_ALLOW_GLOBALS="mypkg.config.TrainConfig,mypkg.enums.Mode"
ALLOWED_HERE = frozenset(
    name.strip() for name in os.environ.get("CKPT_BROWSER_ALLOW_GLOBALS", "").split(",")
    if name.strip() and not is_unsafe(name.strip()))


def is_data(qualname: str) -> bool:
    return qualname in DATA or qualname.startswith(DATA_PREFIXES) or qualname in ALLOWED_HERE


# Classes that may be rebuilt with a state from the file: their __setstate__ is the default
# (the attributes are set) or torch's own that only sets attributes. Read off torch 2.13 by
# listing every class's __setstate__ provider: in torch.nn that is Module's, and the overrides
# of _ConvNd, RNNBase, MultiheadAttention, Upsample, Softmax, Softmin, LogSoftmax, AvgPool3d,
# the Transformer layers, DistributedDataParallel and the weight/spectral norm hooks, each of
# which fills in defaults; in torch.optim, Optimizer's and its subclasses' setdefault calls;
# GradScaler's and ShardedTensor's set attributes. Elsewhere in torch, __setstate__ unpickles
# (the datapipe wrappers), builds process groups (DeviceMesh) or runs compiled code, so the
# rest of torch is not on the list. What these classes hold that they call later (hooks,
# lambdas) is checked where they are rebuilt (unpickler.check_build).
INERT_BUILD_PREFIXES = ("torch.nn.", "torch.optim.", "torch.ao.nn.")
INERT_BUILD = frozenset({
    "torch.amp.grad_scaler.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.distributed._shard.sharded_tensor.api.ShardedTensor",
    "torch.distributed._shard.sharded_tensor.metadata.TensorProperties",
    "torch.distributed._shard.metadata.ShardMetadata",
    "torch.distributed._shard.sharded_tensor.shard.Shard",
    "torch.distributed._shard.sharded_tensor.metadata.ShardedTensorMetadata",
    "torch.utils.hooks.RemovableHandle",
})


def inert_build(qualname: str) -> bool:
    """Rebuilding an object of this class with a state runs no code we cannot vouch for."""
    return is_data(qualname) or qualname in INERT_BUILD or qualname.startswith(
        INERT_BUILD_PREFIXES)


def is_known_code(qualname: str) -> bool:
    """A class whose code we have read: the standard library's, torch's or numpy's."""
    return is_stdlib(qualname) or qualname.split(".", 1)[0] in ("torch", "numpy")


def user_allowed(qualname: str) -> bool:
    return qualname in ALLOWED_HERE


def is_stdlib(qualname: str) -> bool:
    return qualname.split(".", 1)[0] in STDLIB


def what_it_does(qualname: str) -> str | None:
    """The deny list's words for a name: 'runs a command', 'opens or writes files' ..."""
    for prefixes, words in _WHAT:
        if qualname.startswith(prefixes):
            return words
    return None


def describe(names) -> str:
    """Unsafe names with what each does where known: 'os.system (runs a command), ...'."""
    out = []
    for q in list(names)[:8]:
        words = what_it_does(q)
        out.append(f"{q} ({words})" if words else q)
    more = len(list(names)) - 8
    return ", ".join(out) + (f" and {more:,} more" if more > 0 else "")
