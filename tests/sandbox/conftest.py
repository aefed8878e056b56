"""One checked bubblewrap pool shared by the sandbox tests, in each of the two modes."""

import pytest

from sandbox_helpers import make_checked_pool


@pytest.fixture(scope="session", params=[True, False], ids=["persistent", "per_execution"])
def persistent(request):
    """`sandbox.persistent`: one long-lived sandbox per slot, or one sandbox per execution."""
    return request.param


@pytest.fixture(scope="session")
def pool(persistent):
    p = make_checked_pool(persistent=persistent)
    yield p
    p.close()
