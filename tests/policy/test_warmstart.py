"""Warm-start demonstrations: every team size, caps shown in the header, and a block told `max=0`."""

from __future__ import annotations

import re

from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.warmstart import demonstrations


def test_demos_respect_the_header_cap_and_include_a_max0_solo_block():
    cfg = load_config("configs/tiny_test.yaml")  # max_experts 3
    policy = build_tiny_policy(cfg.model)
    n = 20
    seqs, stats = demonstrations(cfg, policy, n, seed=0)
    ceo_texts = [policy.tokenizer.decode(s.ids) for s in seqs if s.role == "ceo"]
    assert len(ceo_texts) == n  # one CEO per rollout
    caps = [int(re.match(r"ceo max=(\d+)\n", t).group(1)) for t in ceo_texts]
    hires = [t.count('<hire role="expert"/>') for t in ceo_texts]
    assert all(h <= c for h, c in zip(hires, caps))  # no demo hires past its cap
    # n // (max_experts + 2) = 4 rollouts say max=0 on top of any solo demo that drew cap 0.
    cap0 = [h for h, c in zip(hires, caps) if c == 0]
    assert len(cap0) >= n // (cfg.workflow.max_experts + 2) and not any(cap0)
    assert stats["invalid_actions"] == 0  # (scores < 1 here: the tiny config caps turns per agent at 4)
