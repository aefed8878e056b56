"""The org: only the CEO hires and fires, a cap on active experts, names never reused."""

from __future__ import annotations

import pytest

from swarmrl.collective.org import Org


def test_hire_names_in_order_and_size():
    org = Org()
    assert org.size() == 1 and org.active() == ["ceo"] and org.peak_size == 1
    assert org.hire("ceo") == ("expert-1", None)
    assert org.hire("ceo", "expert") == ("expert-2", None)
    assert org.active() == ["ceo", "expert-1", "expert-2"]
    assert org.size() == 3 and org.hired_total == 2 and org.peak_size == 3
    assert org.role_of("ceo") == "ceo" and org.role_of("expert-2") == "expert"
    assert org.role_of("expert-9") is None


def test_hire_cap_counts_active_experts_only():
    org = Org(max_experts=8)
    names = [org.hire("ceo")[0] for _ in range(8)]
    assert names == [f"expert-{i}" for i in range(1, 9)]
    assert org.hire("ceo") == (None, "error: team is full (max 8 experts)")
    assert org.size() == 9 and org.peak_size == 9
    assert org.fire("ceo", "expert-3") is None
    assert org.size() == 8
    assert org.hire("ceo") == ("expert-9", None)  # a slot freed; the name is new
    assert org.hire("ceo") == (None, "error: team is full (max 8 experts)")
    assert org.hired_total == 9 and org.peak_size == 9


def test_names_are_never_reused_after_fire():
    org = Org(max_experts=2)
    assert org.hire("ceo") == ("expert-1", None)
    assert org.fire("ceo", "expert-1") is None
    assert org.hire("ceo") == ("expert-2", None)
    assert org.is_active("expert-2") and not org.is_active("expert-1")
    assert org.fired == {"expert-1"}
    assert org.active() == ["ceo", "expert-2"]
    assert org.role_of("expert-1") == "expert"  # fired agents keep their role for the logs


def test_only_the_ceo_hires_and_fires():
    org = Org()
    org.hire("ceo")
    assert org.hire("expert-1") == (None, "error: only the CEO can hire")
    assert org.fire("expert-1", "expert-1") == "error: only the CEO can fire"
    assert org.hired_total == 1 and org.size() == 2 and org.fired == set()


def test_fire_needs_an_active_expert():
    org = Org()
    org.hire("ceo")
    assert org.fire("ceo", "ceo") == "error: no active expert named ceo"
    assert org.fire("ceo", "expert-7") == "error: no active expert named expert-7"
    assert org.fire("ceo", "expert-1") is None
    assert org.fire("ceo", "expert-1") == "error: no active expert named expert-1"  # twice
    assert org.size() == 1


def test_is_active_and_custom_ceo_name():
    org = Org(ceo="boss", max_experts=1)
    assert org.is_active("boss") and not org.is_active("ceo")
    assert org.hire("ceo") == (None, "error: only the CEO can hire")
    assert org.hire("boss") == ("expert-1", None)


def test_unknown_role_is_an_error_and_roles_number_separately():
    org = Org(roles=("expert", "critic"))
    assert org.hire("ceo", "wizard") == (None, 'error: unknown role "wizard" (roles: expert, critic)')
    assert org.hire("ceo", "critic") == ("critic-1", None)
    assert org.hire("ceo", "expert") == ("expert-1", None)
    assert org.role_of("critic-1") == "critic"


def test_zero_experts_allowed_means_solo():
    org = Org(max_experts=0)
    assert org.hire("ceo") == (None, "error: team is full (max 0 experts)")


def test_bad_roles_raise():
    with pytest.raises(ValueError):
        Org(roles=("Bad Role",))
