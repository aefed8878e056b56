"""One checked bubblewrap pool shared by the sandbox tests."""

import pytest

from sandbox_helpers import make_checked_pool


@pytest.fixture(scope="session")
def pool():
    p = make_checked_pool()
    yield p
    p.close()
