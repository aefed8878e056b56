"""Problem variants: what one group of agents sees instead of the problem as written.

OpenAI's Navier-Stokes system gave each group of agents a different version of the problem
prompt; `workflow.groups` does the same, and a task says what its variants are through
`variant(problem, k)` (k = 1, 2, ...; group 0 sees the problem as written). A variant never
changes what is graded: the items, their labels and their answers stay those of the problem.

- arith: k = 1 lists the items in reverse order; k = 2 restates each item in words; k = 3 adds
  a decomposition hint (which items are independent, which depend on which); then repeats.
- math and code: k = 1, 2, 3 add a different approach hint to the statement (math: work
  backwards / split into cases / check each step; code: edge cases first / brute force first /
  restate the contract), then repeat. Rewording the statement itself would need a model.
"""

from __future__ import annotations

from swarmrl.tasks.arith_items import ArithProblem, label

MATH_HINTS = (
    "Hint: start from what is asked and work backwards to what is given.",
    "Hint: split the problem into cases or smaller sub-problems and solve each one.",
    "Hint: solve it step by step and check every step before you answer.",
)
CODE_HINTS = (
    "Hint: handle the edge cases first (empty input, a single element, the largest values).",
    "Hint: write the simplest correct (brute-force) solution first, then make it fast enough.",
    "Hint: restate the function's contract (inputs, output, examples) before writing code.",
)


def arith_variant(problem: ArithProblem, k: int) -> str:
    """Variant k >= 1 of an arith problem's text (the items and answers are unchanged)."""
    kind = (k - 1) % 3
    if kind == 0:  # the same items, bottom up
        return "\n".join(item.text() for item in reversed(problem.items))
    if kind == 1:  # in words
        lines = []
        for item in problem.items:
            first = f"the result of {label(item.dep)}" if item.dep is not None else str(item.terms[0])
            rest = " plus ".join(str(t) for t in item.terms[1:])
            lines.append(f"Item {label(item.index)} is {first} plus {rest}, modulo {problem.modulus}.")
        return "\n".join(lines)
    independent = [label(i.index) for i in problem.items if i.dep is None]
    chains = [f"{label(i.index)} needs {label(i.dep)}" for i in problem.items if i.dep is not None]
    hint = f"Hint: {', '.join(independent)} can be done at once" + (f"; {', '.join(chains)}." if chains else ".")
    return problem.text() + "\n" + hint


def hinted(text: str, hints: tuple[str, ...], k: int) -> str:
    """The statement with hint k >= 1 (cycling through `hints`) after it."""
    return f"{text}\n\n{hints[(k - 1) % len(hints)]}"
