"""The ``gs://`` and ``az://`` / ``abfs://`` file systems of ``cupel_np._fs``: which options each
takes, where its endpoint and credentials come from, and the fallback to fsspec where this
pyarrow lacks the file system.

* ``gs://``: pyarrow's ``GcsFileSystem``. ``STORAGE_EMULATOR_HOST`` (the variable Google's
  clients read, e.g. ``http://127.0.0.1:9023``) or the ``endpoint_url`` option points it at
  an emulator or another endpoint (then anonymous unless an ``access_token`` is given, and
  retries end after ``retry_time_limit`` seconds, default 30, instead of pyarrow's 15 minutes).
  Without ``GcsFileSystem`` in this pyarrow: fsspec's ``gcsfs`` (the ``gcs`` extra).
* ``az://``: pyarrow's ``AzureFileSystem``: the account from ``account_name`` /
  ``AZURE_STORAGE_ACCOUNT_NAME``, the key from ``account_key`` / ``AZURE_STORAGE_ACCOUNT_KEY``,
  or all of it from a connection string (``AZURE_STORAGE_CONNECTION_STRING``: ``AccountName``,
  ``AccountKey``, ``SharedAccessSignature``, ``BlobEndpoint``, ``DfsEndpoint``), the form Azurite
  and Azure's tools use. ``endpoint_url`` (``http://127.0.0.1:10000``) sets the blob and dfs
  endpoints at once. Without ``AzureFileSystem`` (pyarrow < 16): fsspec's ``adlfs`` (the
  ``azure`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from cupel_np.errors import StorageError

GCS_OPTIONS = (
    "anonymous",
    "access_token",
    "endpoint_url",
    "endpoint_override",
    "scheme",
    "project_id",
    "default_bucket_location",
    "retry_time_limit",
)
AZURE_OPTIONS = (
    "account_name",
    "account_key",
    "sas_token",
    "endpoint_url",
    "blob_storage_authority",
    "blob_storage_scheme",
    "dfs_storage_authority",
    "dfs_storage_scheme",
)
BOOL_OPTIONS = ("anonymous", "force_virtual_addressing", "allow_bucket_creation")
SECONDS_OPTIONS = ("connect_timeout", "request_timeout", "retry_time_limit")

#: the extra that brings each fsspec protocol's package
EXTRAS = {
    "memory": "fsspec",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "adl": "azure",
    "gs": "gcs",
    "gcs": "gcs",
}

#: retries against a custom GCS endpoint end after this many seconds (pyarrow's default: 15 min)
GCS_EMULATOR_RETRY_SECONDS = 30.0


def typed(key: str, value: str) -> Any:
    """A storage option's string value as the type pyarrow takes (bool, seconds, str)."""
    if key in BOOL_OPTIONS:
        v = value.strip().lower()
        if v not in ("1", "0", "true", "false", "yes", "no"):
            raise StorageError(f"storage option {key} takes true or false, got {value!r}")
        return v in ("1", "true", "yes")
    if key in SECONDS_OPTIONS:
        try:
            return float(value)
        except ValueError:
            raise StorageError(f"storage option {key} takes a number of seconds, got {value!r}") from None
    return value


def check_keys(scheme: str, options: dict[str, str], allowed: tuple[str, ...]) -> None:
    """Refuse an option the scheme does not know, listing the known ones (never a value)."""
    bad = sorted(set(options) - set(allowed))
    if bad:
        raise StorageError(
            f"storage option(s) {', '.join(map(repr, bad))} are not known for {scheme}:// URLs; known: {', '.join(allowed)}"
        )


def split_endpoint(url: str) -> tuple[str, str]:
    """``http://host:port`` -> (``host:port``, ``http``); a bare ``host:port`` is https."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, "https"
    return rest.rstrip("/"), scheme.lower()


def gcs(options: dict[str, str], fallback: Callable[..., Any]) -> Any:
    """pyarrow's GCS file system for ``options`` (else ``fallback``: fsspec's gcsfs)."""
    import datetime

    import pyarrow.fs as pafs

    cls = getattr(pafs, "GcsFileSystem", None)
    if cls is None:
        return fallback("gs", options, extra="gcs")
    check_keys("gs", options, GCS_OPTIONS)
    kw: dict[str, Any] = {k: typed(k, v) for k, v in options.items()}
    endpoint = kw.pop("endpoint_url", None) or os.environ.get("STORAGE_EMULATOR_HOST")
    if endpoint and "endpoint_override" not in kw:
        kw["endpoint_override"], scheme = split_endpoint(endpoint)
        kw.setdefault("scheme", scheme)
    if kw.get("endpoint_override"):  # an emulator or a private endpoint: no Google sign-in
        if "access_token" not in kw:
            kw.setdefault("anonymous", True)
        kw.setdefault("retry_time_limit", GCS_EMULATOR_RETRY_SECONDS)
    if "retry_time_limit" in kw:
        kw["retry_time_limit"] = datetime.timedelta(seconds=kw["retry_time_limit"])
    try:
        return cls(**kw)
    except (TypeError, ValueError) as e:
        raise StorageError(f"bad storage options for gs:// URLs: {e}") from None


def connection_string(text: str) -> dict[str, str]:
    """The options an Azure connection string gives (``Key=Value;...``): account name and key
    or SAS token, and the blob / dfs endpoints it names."""
    fields: dict[str, str] = {}
    for part in text.split(";"):
        key, eq, value = part.partition("=")
        if eq and key.strip():
            fields[key.strip().lower()] = value.strip()
    out: dict[str, str] = {}
    for field, option in (("accountname", "account_name"), ("accountkey", "account_key")):
        if fields.get(field):
            out[option] = fields[field]
    if fields.get("sharedaccesssignature"):
        out["sas_token"] = fields["sharedaccesssignature"]
    for field, kind in (("blobendpoint", "blob"), ("dfsendpoint", "dfs")):
        if fields.get(field):
            authority, scheme = split_endpoint(fields[field])
            out[f"{kind}_storage_authority"] = authority.split("/", 1)[0]  # Azurite: host:port/account
            out[f"{kind}_storage_scheme"] = scheme
    if "blob_storage_authority" in out and "dfs_storage_authority" not in out:
        out["dfs_storage_authority"] = out["blob_storage_authority"]
        out["dfs_storage_scheme"] = out["blob_storage_scheme"]
    return out


def azure(scheme: str, options: dict[str, str], fallback: Callable[..., Any]) -> Any:
    """pyarrow's Azure file system for ``options`` (else ``fallback``: fsspec's adlfs)."""
    import pyarrow.fs as pafs

    cls = getattr(pafs, "AzureFileSystem", None)
    if cls is None:
        return fallback(scheme, options, extra="azure")
    check_keys(scheme, options, AZURE_OPTIONS)
    kw: dict[str, Any] = {}
    conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn:
        kw.update(connection_string(conn))
    for option, var in (("account_name", "AZURE_STORAGE_ACCOUNT_NAME"), ("account_key", "AZURE_STORAGE_ACCOUNT_KEY")):
        if os.environ.get(var) and option not in kw:
            kw[option] = os.environ[var]
    endpoint = options.get("endpoint_url")
    kw.update({k: v for k, v in options.items() if k != "endpoint_url"})
    if endpoint:
        authority, http = split_endpoint(endpoint)
        for kind in ("blob", "dfs"):
            kw[f"{kind}_storage_authority"] = authority.split("/", 1)[0]
            kw[f"{kind}_storage_scheme"] = http
    if kw.get("sas_token") and "account_key" in kw and "account_key" not in options:
        del kw["account_key"]  # pyarrow takes one of the two: the one given explicitly wins
    if not kw.get("account_name"):
        raise StorageError(
            f"{scheme}:// URLs need an account name: set AZURE_STORAGE_ACCOUNT_NAME (or "
            "AZURE_STORAGE_CONNECTION_STRING) or --storage-option account_name=..."
        )
    try:
        return cls(**kw)
    except (TypeError, ValueError) as e:
        raise StorageError(f"bad storage options for {scheme}:// URLs: {e}") from None
