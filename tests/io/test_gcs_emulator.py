"""The storage tests' emulators stay usable for a whole session (``tests/object_stores.py``):
fake-gcs-server answers past the ~460 requests after which the wrapper's ``start()`` left it
blocked on its unread stderr pipe, and starting Azurite does not unset GCS's
``STORAGE_EMULATOR_HOST`` (each emulator's fixture owns only its own variables)."""

from __future__ import annotations

import json
import os
import urllib.request


def test_fake_gcs_server_keeps_answering_after_many_requests(gcs_server):
    bucket = gcs_server.new_bucket()
    gcs_server.put(bucket, "x", b"hello")
    url = f"{gcs_server.endpoint}/storage/v1/b/{bucket}/o/x"
    for _ in range(1500):  # each request adds a line to the server's log
        with urllib.request.urlopen(url, timeout=10) as r:
            assert json.loads(r.read())["size"] == "5"


def test_each_emulator_keeps_its_own_variables(gcs_server, azure_server):
    assert os.environ["STORAGE_EMULATOR_HOST"] == gcs_server.endpoint
    assert os.environ["AZURE_STORAGE_CONNECTION_STRING"] == azure_server.env["AZURE_STORAGE_CONNECTION_STRING"]
