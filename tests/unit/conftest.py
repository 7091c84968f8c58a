import json

import pytest

from beekeeper import pins
from beekeeper.core.config import DEFAULT_HF_ENDPOINT
from beekeeper.core.profiles import PROFILES, HfSource

# Canned pins (the Hub cannot be reached from the tests): what pins.pin_model would have
# written after asking the Hub for each profile's model. Commit and sha256 are made up.
CANNED_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def canned_pins(tmp_path, monkeypatch):
    lock = tmp_path / "model-pins.json"
    entries = {}
    for p in PROFILES.values():
        for m in filter(None, [p.model, p.server.draft_model]):
            if isinstance(m.source, HfSource):
                key = pins._key(DEFAULT_HF_ENDPOINT, m.source, m.filename)
                entries[key] = {"commit": CANNED_COMMIT, "sha256": "ab" * 32,
                                "size_bytes": m.size_bytes}
    lock.write_text(json.dumps(entries))
    monkeypatch.setattr(pins, "LOCK", lock)
    return lock
