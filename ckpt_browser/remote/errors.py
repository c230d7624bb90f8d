"""Remote failures as one-line CheckpointErrors naming the URL, never a traceback or a secret."""

from __future__ import annotations

from contextlib import contextmanager

from ckpt_browser.errors import CheckpointError, PathNotFound
from ckpt_browser.remote.urls import redact

EXTRA = "pip install 'ckpt-browser[remote]'"


class RemoteError(CheckpointError):
    pass


def _why(e: BaseException) -> str:
    """The exception's message on one line, without credentials a URL in it may carry."""
    text = redact(" ".join(str(e).split()))
    return text[:200] or type(e).__name__


NO_REPO = ("no such file or folder: the Hub has no such repo, or it is private and HF_TOKEN "
           "does not give access to it")
NO_REVISION = "no such file or folder: the repo has no such revision (branch, tag or commit)"
GATED = ("access denied: a gated repo; accept its conditions on its page on the Hub, then set "
         "HF_TOKEN to a token of that account")
BAD_TOKEN = "access denied: the Hub refused the token (HF_TOKEN is invalid or has expired)"


def _hub_error(where: str, e: BaseException) -> CheckpointError | None:
    """huggingface_hub's errors, told apart by class name (its classes are not imported here);
    HfFileSystem wraps a missing repo or revision in FileNotFoundError, the cause says which."""
    cause = e.__cause__ if isinstance(e, FileNotFoundError) and e.__cause__ else e
    names = {c.__name__ for c in type(cause).__mro__}
    if "GatedRepoError" in names:
        return RemoteError(where, GATED)
    if "RevisionNotFoundError" in names:
        return PathNotFound(where, NO_REVISION)
    if "RepositoryNotFoundError" in names:
        return PathNotFound(where, NO_REPO)
    if "HfHubHTTPError" in names:
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if status == 401:
            return RemoteError(where, BAD_TOKEN)
        if status == 403:
            return RemoteError(where, "access denied")
        if status == 429:
            return RemoteError(where, "the Hub is rate-limiting these requests; try again later")
        if status is not None:
            return RemoteError(where, f"cannot read: the Hub answered HTTP {status}")
    return None


def _gcs_forbidden(e: OSError) -> bool:
    """gcsfs raises GCS's 403 as a plain OSError("Forbidden: <path>\n<GCS's message>")."""
    return type(e) is OSError and str(e).startswith("Forbidden: ")


@contextmanager
def remote_errors(where: str, timeout: float | None = None):
    """Translate what fsspec and its backends raise into one line about `where`."""
    try:
        try:
            yield
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - sorted below; the Hub's errors first
            hub = _hub_error(where, e)
            if hub is not None:
                raise hub from None
            raise
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise PathNotFound(where, "no such file or folder") from None
    except PermissionError as e:
        raise RemoteError(where, f"access denied ({_why(e)})") from None
    except ImportError as e:
        raise RemoteError(where, f"needs a filesystem that is not installed ({_why(e)}); "
                          f"install it with: {EXTRA}") from None
    except TimeoutError as e:
        raise RemoteError(where, f"timed out after {timeout or '?'} s ({_why(e)})") from None
    except ValueError as e:
        if "range" in str(e).lower():
            raise RemoteError(where, "the server does not honour Range requests; refusing to "
                              "download whole files") from None
        raise RemoteError(where, f"cannot read: {_why(e)}") from None
    except OSError as e:
        if _gcs_forbidden(e):
            raise RemoteError(where, f"access denied ({_why(e)})") from None
        raise RemoteError(where, f"cannot read: {_why(e)}") from None
    except Exception as e:  # noqa: BLE001 - aiohttp, botocore ... each have their own classes
        name = type(e).__name__
        if "Timeout" in name:
            raise RemoteError(where, f"timed out after {timeout or '?'} s") from None
        if "Disconnect" in name or "Payload" in name or "Connection" in name:
            raise RemoteError(where, f"the connection was lost ({name})") from None
        if "AccessDenied" in str(e) or "Forbidden" in str(e) or "403" in str(e):
            raise RemoteError(where, "access denied") from None
        if "NoSuchBucket" in str(e) or "NoSuchKey" in str(e) or "404" in str(e):
            raise PathNotFound(where, "no such file or folder") from None
        raise RemoteError(where, f"cannot read: {name}: {_why(e)}") from None
