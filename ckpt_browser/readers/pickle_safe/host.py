"""What the opcode mixins (numbers.py, hashing.py, containers.py) use of the unpickler they are
mixed into: pickle._Unpickler's undocumented internals, which typeshed leaves out, and
SafeUnpickler's own members. Only a type checker sees the declarations; at run time the mixins
derive from object, so the method order of SafeUnpickler is what it always was."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckpt_browser.standins import Opaque

    class UnpicklerHost(pickle._Unpickler):
        # pickle._Unpickler's, set by its __init__ and load()
        memo: dict[int, Any]
        stack: list[Any]
        metastack: list[list[Any]]
        proto: int
        encoding: str
        fix_imports: bool
        read: Callable[[int], bytes]
        readline: Callable[[], bytes]
        append: Callable[[Any], None]
        _file_read: Callable[[int], bytes]
        _file_readline: Callable[[], bytes]

        def pop_mark(self) -> list[Any]: ...
        def _decode_string(self, value: bytes) -> Any: ...

        # SafeUnpickler's (unpickler.py) and Containers' (containers.py)
        notes: list[str]
        _pins: list[Any]

        def note(self, message: str) -> None: ...
        def check_build(self, inst: Opaque, state: Any) -> None: ...
        def check_key(self, key: Any) -> None: ...
        def check_items(self, target: Opaque, how: str) -> None: ...
else:
    UnpicklerHost = object
