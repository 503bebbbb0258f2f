"""A ``gs://`` or ``az://`` URL on a pyarrow without that file system and without the fsspec
package that stands in for it is an error naming the extra to install; an Azure connection
string gives the account, key and endpoints."""

from __future__ import annotations

import sys

import pyarrow.fs as pafs
import pytest

from cupel_np import _cloud, _fs


@pytest.mark.parametrize(
    "url, missing, extra",
    [
        ("az://container/items.parquet", "AzureFileSystem", "azure"),
        ("abfs://container/items.parquet", "AzureFileSystem", "azure"),
        ("gs://bucket/items.parquet", "GcsFileSystem", "gcs"),
    ],
)
def test_a_url_without_its_extra_names_the_extra(monkeypatch, url, missing, extra):
    monkeypatch.delattr(pafs, missing)
    monkeypatch.setitem(sys.modules, "fsspec", None)
    _fs.configure(None)
    try:
        with pytest.raises(_fs.StorageError, match=rf'{url.split(":")[0]}:// URLs need fsspec.*"cupel-np\[{extra}\]"'):
            _fs.as_path(url).exists()
    finally:
        _fs.configure(None)


def test_an_azure_connection_string_gives_account_key_and_endpoints():
    got = _cloud.connection_string(
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=k==;BlobEndpoint=http://127.0.0.1:10000/acct;"
    )
    assert got == {
        "account_name": "acct",
        "account_key": "k==",
        "blob_storage_authority": "127.0.0.1:10000",
        "blob_storage_scheme": "http",
        "dfs_storage_authority": "127.0.0.1:10000",
        "dfs_storage_scheme": "http",
    }
