"""Zips two readers read differently are errors naming the entry; real torch zips
(torch.save, torch.jit.save, torch.export.save) read with no new problems.

The hand-written archives are the corpus's (tests/malicious/cases_zip.py); the expected
messages are exact, so a change of wording is a deliberate one.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import zipfile

import pytest
import torch

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.readers import zipentries
from ckpt_browser.readers.torchfile import read_pickle_file, read_pickle_file_object
from tests.malicious import cases_zip as cz

from .state_helpers import torch_zip

NAME = "optimizer.pt"
DIFFERENT = ": other readers may see different contents than shown here"
UNSAFE_ENTRY = ("unsafe: its zip entry {!r} is a pickle that calls os.system (runs a command) "
                "when loaded (not run here; whoever loads this entry runs it: torch.load where "
                "zip readers disagree, torch.jit.load, torch.package)")


def read(data: bytes):
    return read_pickle_file_object(io.BytesIO(data), NAME, len(data))


def error(message: str) -> Problem:
    return Problem(ERROR, NAME, message)


def differs(message: str) -> Problem:
    return error(message + DIFFERENT)


def new_problems(pf) -> list[Problem]:
    words = ("other readers", "CRC", "zip entr", "outside any")
    return [p for p in pf.problems if any(w in p.message for w in words)]


# -- real torch zips read clean ------------------------------------------------------------------

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def test_torch_save_reads_clean(tmp_path):
    path = tmp_path / "state.pt"
    torch.save({"w": torch.arange(1000.0), "i": torch.zeros(7, dtype=torch.int64),
                "h": torch.ones(3, dtype=torch.float16), "step": 3}, path)
    pf = read_pickle_file(str(path), path.name)
    assert (pf.problems, pf.unsafe, len(pf.tensors)) == ((), (), 3)


def test_torch_save_of_many_tensors_and_a_module_reads_clean(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({f"t{i}": torch.full((i + 1,), float(i)) for i in range(300)}, path)
    assert read_pickle_file(str(path), path.name).problems == ()
    path = tmp_path / "module.pt"
    torch.save(Tiny(), path)  # a pickled module: the usual import warning, nothing more
    assert new_problems(read_pickle_file(str(path), path.name)) == []


def test_torchscript_and_export_archives_read_clean(tmp_path):
    script, export = tmp_path / "script.pt", tmp_path / "model.pt2"
    torch.jit.save(torch.jit.script(Tiny()), script)
    torch.export.save(torch.export.export(Tiny(), (torch.randn(1, 3),)), export)
    pf = read_pickle_file(str(script), script.name)
    assert pf.kind == "torchscript" and pf.unsafe == ()
    assert [p.severity for p in pf.problems] == [WARNING]  # torch.jit.load runs its code
    pf = read_pickle_file(str(export), export.name)  # its sample inputs hold a nested zip
    assert pf.kind == "export" and [p.severity for p in pf.problems] == [INFO]


def test_torch_save_without_checksums_reads_with_a_note(tmp_path):
    path = tmp_path / "nocrc.pt"
    torch.serialization.set_crc32_options(False)
    try:
        torch.save({"w": torch.arange(4.0)}, path)
    finally:
        torch.serialization.set_crc32_options(True)
    pf = read_pickle_file(str(path), path.name)
    assert pf.problems == (Problem(INFO, path.name, zipentries.NO_CRC),)
    assert len(pf.tensors) == 1


def test_a_zip_written_by_pythons_zipfile_reads_clean(tmp_path):
    path = torch_zip(tmp_path / "a.pt", cz.clean(), cz.ADAMW_STORAGES)
    assert read_pickle_file(str(path), path.name).problems == ()
    assert read(cz.plain(cz.records(cz.clean()))).problems == ()


# -- names ---------------------------------------------------------------------------------------

def test_data_pkl_listed_twice():
    pf = read(cz.two_datapkl("c"))
    assert pf.problems == (differs(
        "1 zip entry listed twice in the central directory (Python's zipfile reads the last "
        "copy, torch's reader whichever its sorted lookup lands on), e.g. 'archive/data.pkl'"),
        error(UNSAFE_ENTRY.format("archive/data.pkl")))
    assert pf.unsafe == ("os.system",)


def test_nul_case_and_backslash_names():
    assert read(cz.nul_name("c")).problems == (differs(
        "1 zip entry with a NUL byte in the name (Python's zipfile cuts the name there, "
        "torch's reader keeps it whole), e.g. 'archive/data.pkl\\x00'"),
        error(UNSAFE_ENTRY.format("archive/data.pkl")))
    assert read(cz.case_name("c")).problems == (differs(
        "1 zip entry whose name differs from another entry's only in case (torch's reader "
        "looks names up ignoring case), e.g. 'archive/DATA.PKL'"),
        error(UNSAFE_ENTRY.format("archive/DATA.PKL")))
    assert read(cz.backslash_name("c")).problems == (differs(
        "1 zip entry with a backslash in the name (unzip and Windows readers take it for a "
        "folder separator, torch does not), e.g. 'archive\\\\data.pkl'"),
        error(UNSAFE_ENTRY.format("archive\\data.pkl")))


def test_traversal_keeps_its_words():
    recs = cz.records(cz.clean()) + [cz.Rec(b"/tmp/x", b"x"), cz.Rec(b"archive/../../y", b"y")]
    assert read(cz.plain(recs)).problems == (differs(
        "2 zip entries naming a path outside the archive (path traversal); nothing is "
        "extracted here, but unzip would write outside the folder, e.g. '/tmp/x'"),)


def test_every_pickle_is_checked():
    pf = read(cz.other_pickles("c"))
    assert {error(UNSAFE_ENTRY.format("archive/constants.pkl")),
            error(UNSAFE_ENTRY.format("other/data.pkl"))} <= set(pf.problems)
    # archive/constants.pkl makes it TorchScript: torch.load hands it to torch.jit.load, whose
    # constants table then lacks the records its tensors name
    assert pf.kind == "torchscript" and [p.severity for p in pf.problems].count(WARNING) == 1
    assert error("storage record constants/0 is missing (a tensor needs 4 bytes)") in pf.problems
    assert pf.unsafe == ("os.system",) and "payload" not in pf.obj


def test_pickles_past_the_cap_are_an_error(monkeypatch):
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, zip_pickles=2))
    recs = cz.records(cz.clean()) + [cz.Rec(b"archive/p%d.pkl" % i, cz.clean())
                                     for i in range(4)]
    assert read(cz.plain(recs)).problems == (error(
        "2 more pickles in the zip (e.g. 'archive/p2.pkl') are not checked: over the "
        f"{limits.LIMITS.pickle_bytes:,}-byte or 2-pickle limit; they could run code when "
        "loaded"),)


# -- counts, directories and end records ---------------------------------------------------------

def test_end_record_counting_one_entry_short():
    pf = read(cz.count_short("c"))
    assert pf.problems == (
        differs("the central directory's 9 entries fill 583 of the 645 bytes its end record "
                "gives it"),
        differs("Python's zipfile lists 10 zip entries and torch's reader 9, not the same "
                "ones (e.g. 'archive/data.pkl' only for zipfile)"),
        differs("bytes 1,208-1,893 lie outside any zip entry, between the last entry and the "
                "central directory; torch.save writes none, and a reader that streams local "
                "headers may find hidden entries there"),
        error(UNSAFE_ENTRY.format("archive/data.pkl")))


def test_two_central_directories():
    problems = read(cz.two_directories("c")).problems
    assert problems[0] == differs(
        "the end record puts the central directory at byte 1,893, but Python's zipfile (and "
        "unzip) read a second central directory at byte 2,476")
    assert problems[-1] == error(UNSAFE_ENTRY.format("archive/data.pkl"))


def test_zip64_records_that_disagree():
    problems = read(cz.zip64_two_records("c")).problems
    assert problems[0] == differs(
        "the ZIP64 locator points at a ZIP64 end record at byte 2,476, but Python's zipfile "
        "reads another one, right before the locator")
    assert problems[-1] == error(UNSAFE_ENTRY.format("archive/data.pkl"))
    problems = read(cz.zip64_count("c")).problems
    assert problems[0] == differs("the ZIP64 end record gives 9 as the entries, the classic "
                                  "end record 10 (torch reads the ZIP64 one)")
    assert problems[-1] == error(UNSAFE_ENTRY.format("archive/data.pkl"))


def test_two_end_records():
    assert read(cz.two_end_records("c")).problems == (
        differs("the file holds 2 zip end records (at bytes 2,476, 3,081); torch, zipfile and "
                "unzip take the last one, other readers may take another"),
        differs("bytes 0-728 lie outside any zip entry, before the entry 'archive/data.pkl' "
                "(and 1 more stretch); torch.save writes none, and a reader that streams "
                "local headers may find hidden entries there"))


def test_bytes_after_the_end_record():
    data = cz.plain(cz.records(cz.clean()))
    assert read(data + b"junk").problems == (differs(
        f"the zip end record's comment ends at byte {len(data):,}, the file at "
        f"{len(data) + 4:,}"),)


# -- checksums, local headers, hidden bytes ------------------------------------------------------

def test_crc_mismatch_is_reported_and_the_pickle_still_read():
    pf = read(cz.bad_crc("c"))
    assert pf.problems == (
        differs("zip entry 'archive/data.pkl' fails its CRC-32 check (its 682 bytes do not "
                "match the checksum and size its entry records; torch.load reads it anyway, "
                "zipfile refuses it, unzip reports it damaged)"),
        error("unsafe: its pickle calls os.system (runs a command) when loaded (not run here; "
              "torch.load(weights_only=False) or pickle.load would run it)"))
    recs = cz.records(cz.clean())
    recs[3].crc = 1  # byteorder
    assert read(cz.plain(recs)).problems == (differs(
        "zip entry 'archive/byteorder' fails its CRC-32 check (its 6 bytes do not match the "
        "checksum and size its entry records; torch.load reads it anyway, zipfile refuses "
        "it, unzip reports it damaged)"),)


def test_local_header_naming_another_file():
    assert read(cz.local_name("c")).problems == (differs(
        "1 zip entry whose local header (or data descriptor) differs from its central "
        "directory entry: a reader that streams the local headers sees other names or bytes, "
        "e.g. 'archive/data/9'"),)


def test_local_header_with_another_method():
    data = bytearray(cz.plain(cz.records(cz.clean())))
    data[8:10] = struct.pack("<H", 8)  # data.pkl's local header says deflated
    problems = read(bytes(data)).problems
    assert problems[0].message.startswith("1 zip entry whose local header") and \
        "'archive/data.pkl'" in problems[0].message


def test_hidden_local_record_and_prefix():
    assert read(cz.hidden_entry("c")).problems == (differs(
        "bytes 1,165-1,893 lie outside any zip entry, between the last entry and the central "
        "directory; torch.save writes none, and a reader that streams local headers may find "
        "hidden entries there"),)
    recs = cz.records(cz.clean())
    ghost = cz.local(cz.Rec(b"archive/data.pkl", cz.hostile("c")))
    out = bytearray(ghost)
    cd = cz.directory(recs, cz.lay(recs, out))
    start = len(out)
    problems = read(bytes(out + cd + cz.end(len(recs), len(cd), start))).problems
    assert problems == (differs(
        f"bytes 0-{len(ghost):,} lie outside any zip entry, before the entry "
        "'archive/data.pkl'; torch.save writes none, and a reader that streams local headers "
        "may find hidden entries there"),)


@pytest.mark.parametrize("build", ["two_datapkl", "count_short", "two_directories"])
def test_zipfile_still_shows_what_it_reads(build):
    """The clean pickle zipfile finds is what is displayed; the hostile one is reported."""
    data = getattr(cz, build)("c")
    pf = read(data)
    assert "payload" not in pf.obj and set(pf.obj) == {"state", "param_groups"}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert b"system" not in zf.read("archive/data.pkl")
