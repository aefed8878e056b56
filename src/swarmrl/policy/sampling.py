"""Drawing the next token of each row from its logits, with the log-prob the PPO ratio needs."""

from __future__ import annotations

import torch


def sample_tokens(logits: torch.Tensor, temperature: float, greedy: bool,
                  generator: torch.Generator | list[torch.Generator] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [B, V] -> (token [B], log p_T(token) [B]), p_T = softmax(logits / temperature).

    The learner recomputes log p_T with the same division (rl/batch.py `token_logprobs`), so
    the PPO ratio starts at 1. Greedy takes the argmax (the same token at any T > 0) and also
    returns log p_T: its true behaviour distribution is a point mass (log-prob 0 everywhere),
    which no learner recomputes, so the one number that stays meaningful is the log-prob of
    the token under the trained policy, the same whether the token was sampled or picked.

    `generator` may be one generator per row: then each row is sampled by Gumbel-max with its
    own noise, so a row's tokens depend on its own seed only, not on which other rows share
    the batch (rollouts split across workers sample exactly what they sample in one process).
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)  # [B, V]
    if greedy:
        tok = logp.argmax(dim=-1)  # [B]
    elif isinstance(generator, list):
        u = torch.stack([torch.rand(logp.shape[-1], generator=g, device=logp.device) for g in generator])  # [B, V]
        tok = (logp - torch.log(-torch.log(u))).argmax(dim=-1)  # [B] argmax(logp + Gumbel) ~ softmax(logp)
    else:
        tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)  # [B]
    return tok, logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
