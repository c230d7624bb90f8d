"""Which globals count as unsafe: those that could run code or touch the system.

Nothing is ever called; this only decides which names are reported in `unsafe`.
"""

from __future__ import annotations

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
})
UNSAFE_NAMES = frozenset({
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__", "builtins.open",
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.globals",
    "builtins.locals", "builtins.vars", "builtins.input", "builtins.breakpoint", "builtins.apply",
    "builtins.execfile", "builtins.file", "builtins.reload", "builtins.exit", "builtins.quit",
    "builtins.help", "io.open", "io.open_code", "io.FileIO", "_io.open", "_io.open_code",
    "_io.FileIO", "operator.attrgetter", "operator.methodcaller", "operator.call",
    "_operator.attrgetter", "_operator.methodcaller", "_operator.call", "types.FunctionType",
    "types.LambdaType", "types.CodeType", "types.MethodType", "torch.load", "torch.compile",
    "torch.serialization.load",
    "torch.storage._load_from_bytes",  # runs torch.load(weights_only=False)
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap",
})


def is_unsafe(qualname: str) -> bool:
    if qualname in UNSAFE_NAMES:
        return True
    module = qualname
    while "." in module:
        module = module.rsplit(".", 1)[0]
        if module in UNSAFE_MODULES:
            return True
    return False
