"""Legacy (pre-zip) torch files and files not opened by their names: every pickle in them goes
through the same policy."""

from __future__ import annotations

import struct

from tests.malicious.make_corpus import (
    ADAMW_STORAGES,
    SYS_INFO,
    UNSAFE,
    Call,
    G,
    PersId,
    adamw,
    case,
    dumps,
    jdump,
    put,
    system,
    tensor,
    torch_zip,
)

W = struct.pack("<4f", 1, 2, 3, 4)  # the bytes of an F32 [4] tensor


def state_dict(case_name: str | None = None, *names: str) -> bytes:
    """A torch zip of {name: F32 [4] tensor ...}, with a payload entry when case_name is set."""
    sd = {n: tensor(str(i), (4,)) for i, n in enumerate(names or ("w",))}
    if case_name:
        sd["payload"] = system(case_name)
    return torch_zip(dumps(sd, 2), {str(i): W for i in range(len(sd) - bool(case_name))})


# -- files opened on their own, or as one of a folder's files ------------------------------------

@case(name="file-model-pt", path="file-model-pt/model.pt", exits=UNSAFE, live="torch",
      tries="a lone model.pt (torch zip) opened as a file: a state dict beside os.system(...)",
      bad="file-model-pt/model.pt", words=r"unsafe.*os\.system")
def _():
    put("file-model-pt/model.pt", state_dict("file-model-pt"))


@case(name="file-state-pkl", path="file-state-pkl/state.pkl", exits=UNSAFE, live="pickle",
      tries="a bare pickle state.pkl (protocol 4, framed) opened as a file: a training state "
            "whose 'callback' is builtins.exec(...)",
      bad="file-state-pkl/state.pkl", words=r"unsafe.*builtins\.exec")
def _():
    state = {"epoch": 3, "best": 0.5, "callback": Call(G("builtins", "exec"), (
        "open('PWNED-file-state-pkl', 'w').close()",))}
    put("file-state-pkl/state.pkl", dumps(state, 4, frame=True))


@case(name="file-epochs-pth", path="file-epochs-pth", exits=UNSAFE, live="torch",
      live_file="file-epochs-pth/epoch_2.pth",
      tries="a folder of .pth files, one per epoch: epoch_1.pth is clean, epoch_2.pth (the "
            "newest) holds subprocess.Popen(['touch', ...]) beside its model and optimizer",
      bad="file-epochs-pth/epoch_2.pth", words=r"unsafe.*subprocess\.Popen")
def _():
    for epoch in (1, 2):
        ckpt = {"epoch": epoch, "model": {"w": tensor("3", (4,))}, "optimizer": adamw()}
        if epoch == 2:
            ckpt["hook"] = Call(G("subprocess", "Popen"), (["touch", "PWNED-file-epochs-pth"],))
        put(f"file-epochs-pth/epoch_{epoch}.pth",
            torch_zip(dumps(ckpt, 2), {**ADAMW_STORAGES, "3": W}))


@case(name="file-epochs-older", path="file-epochs-older", exits=UNSAFE, live="torch",
      live_file="file-epochs-older/epoch_1.pth",
      tries="the same folder, but the older epoch_1.pth is the hostile one: the folder is "
            "opened at its newest file, and the other file must be checked too",
      bad="file-epochs-older/epoch_1.pth", words=r"unsafe.*subprocess\.Popen")
def _():
    for epoch in (1, 2):
        ckpt = {"epoch": epoch, "model": {"w": tensor("3", (4,))}, "optimizer": adamw()}
        if epoch == 1:
            ckpt["hook"] = Call(G("subprocess", "Popen"),
                                (["touch", "PWNED-file-epochs-older"],))
        put(f"file-epochs-older/epoch_{epoch}.pth",
            torch_zip(dumps(ckpt, 2), {**ADAMW_STORAGES, "3": W}))


@case(name="file-bin-shards", path="file-bin-shards", exits=UNSAFE, live="torch",
      live_file="file-bin-shards/pytorch_model-00002-of-00002.bin",
      tries="pytorch_model-0000k-of-00002.bin shards (torch zips) with "
            "pytorch_model.bin.index.json: the second shard holds os.system(...) beside b",
      bad="file-bin-shards/pytorch_model-00002-of-00002.bin", words=r"unsafe.*os\.system")
def _():
    shard = "file-bin-shards/pytorch_model-0000{}-of-00002.bin"
    index = {"metadata": {"total_size": 32},
             "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                            "b": "pytorch_model-00002-of-00002.bin"}}
    put("file-bin-shards/pytorch_model.bin.index.json", jdump(index))
    put(shard.format(1), state_dict(None, "a"))
    put(shard.format(2), state_dict("file-bin-shards", "b"))


@case(name="file-misnamed-safetensors", path="file-misnamed-safetensors/weights.safetensors",
      exits=UNSAFE, live="torch-file",
      tries="weights.safetensors that is really a torch zip holding os.system(...): the name "
            "promises no pickle, but torch.load of the open file runs it (recent torch hands "
            "a .safetensors path to safetensors; an open file or a download is a torch file)",
      bad="file-misnamed-safetensors/weights.safetensors", words=r"unsafe.*os\.system")
def _():
    put("file-misnamed-safetensors/weights.safetensors",
        state_dict("file-misnamed-safetensors"))


# -- legacy files whose magic number is not written the way torch writes it -----------------------

MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_STORAGE = PersId(("storage", G("torch", "FloatStorage"), "0", "cpu", 4, None))


def legacy(magic: bytes, sys_info, obj) -> bytes:
    return (magic + dumps(1001) + dumps(sys_info) + dumps(obj) + dumps(["0"])
            + struct.pack("<q", 4) + W)


@case(name="legacy-long4-magic", path="legacy-long4-magic/pytorch_model.bin", exits=UNSAFE,
      live="torch",
      tries="a legacy torch file whose magic number is written with LONG4 instead of LONG1 "
            "(torch.load compares the value, not the bytes); its object holds os.system(...)",
      bad="legacy-long4-magic/pytorch_model.bin", words=r"unsafe.*os\.system")
def _():
    magic = b"\x80\x02\x8b" + struct.pack("<i", 10) + MAGIC.to_bytes(10, "little") + b"."
    obj = {"w": tensor("0", (4,), pid=LEGACY_STORAGE), "payload": system("legacy-long4-magic")}
    put("legacy-long4-magic/pytorch_model.bin", legacy(magic, SYS_INFO, obj))


@case(name="legacy-protocol0-magic", path="legacy-protocol0-magic/pytorch_model.bin",
      exits=UNSAFE, live="torch",
      tries="a legacy torch file whose magic number is a protocol 0 pickle ('L1195...L'), "
            "no PROTO header; its system info pickle is os.system(...)",
      bad="legacy-protocol0-magic/pytorch_model.bin", words=r"unsafe.*os\.system")
def _():
    magic = b"L%dL\n." % MAGIC
    obj = {"w": tensor("0", (4,), pid=LEGACY_STORAGE)}
    put("legacy-protocol0-magic/pytorch_model.bin",
        legacy(magic, system("legacy-protocol0-magic"), obj))
