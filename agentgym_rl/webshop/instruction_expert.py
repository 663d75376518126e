"""A WebShop expert that acts on what the agent sees: the instruction, the page and its last action.

The goal-seeking expert (:class:`agentgym_rl.webshop.expert.ExpertAgent`) searches the goal
product's *name*, which no instruction states, so a model cloned from it learns to guess a
query. This one decides from what the trainer's prompt shows (with a history window of at
least one step), so a policy can imitate it exactly:

- the search page: search the instruction, word for word;
- a results page: open the first product listed;
- the item page: click, in the page's order, each option value the instruction names (a whole
  word or phrase of it), one per step: after the option it clicked last comes the next one
  the instruction names, after the last one ``buy now``; after any other action (arriving
  from the results, or a step that is not its own) it starts again at the first;
- a description, features or reviews page: back to the item (``< prev``).

On the generated shop's test goals it scores about 88 (70% success) against the goal-seeking
expert's 100: what it loses is the goals whose product BM25 does not rank first for the
instruction, which no page shows.

>>> expert = InstructionExpert("i need a red mug, and price lower than 30.00 dollars")
>>> expert.act("", ["search[<your query>]"])
'search[i need a red mug, and price lower than 30.00 dollars]'
>>> expert.act("", ["click[back to search]", "click[next >]", "click[b0abc]", "click[b0def]"])
'click[b0abc]'
>>> page = ["click[back to search]", "click[< prev]", "click[buy now]", "click[blue]", "click[red]"]
>>> expert.observe("click[b0abc]", ""); expert.act("", page)
'click[red]'
>>> expert.observe("click[red]", ""); expert.act("", page)
'click[buy now]'
"""

from __future__ import annotations

import re

from agentgym_rl.webshop.env import SEARCH_TEMPLATE

__all__ = ["InstructionExpert", "NAVIGATION"]

#: The clicks of WebShop's pages that are not products or option values.
NAVIGATION = frozenset(
    f"click[{name}]"
    for name in ("back to search", "< prev", "next >", "description", "features", "reviews", "buy now")
)


def _value(click: str) -> str:
    return click[len("click[") : -1]


class InstructionExpert:
    """Plays one WebShop episode from the instruction and each page's admissible actions.

    Args:
        instruction: The episode's instruction (``trainers.prompting.extract_task``).

    Call :meth:`act` for the action at each step, and :meth:`observe` with every action
    the episode took (its own or another's); both have the signatures of
    :class:`agentgym_rl.alfworld.search_expert.SearchExpert`, the ALFWorld expert of the same kind.
    """

    def __init__(self, instruction: str) -> None:
        self.instruction = instruction.strip()
        self.last_action: str | None = None

    def observe(self, action: str, observation: str) -> None:
        """Record the action just taken (the prompt's last history step shows it)."""
        del observation  # the next page's admissible actions say all it needs
        self.last_action = action

    def named(self, click: str) -> bool:
        """Whether ``click`` is an option value the instruction names (as a whole word or phrase)."""
        pattern = r"(?<![a-z0-9])" + re.escape(_value(click).lower()) + r"(?![a-z0-9])"
        return re.search(pattern, self.instruction.lower()) is not None

    def act(self, observation: str, admissible: list[str]) -> str:
        """The next action, from the page's admissible actions."""
        del observation  # what it shows is in the instruction and the admissible actions
        if SEARCH_TEMPLATE in admissible:
            return f"search[{self.instruction}]"
        others = [a for a in admissible if a.startswith("click[") and a not in NAVIGATION]
        if "click[buy now]" in admissible:  # an item page: its other clicks are option values
            wanted = [a for a in others if self.named(a)]
            if self.last_action in wanted:
                wanted = wanted[wanted.index(self.last_action) + 1 :]
            return wanted[0] if wanted else "click[buy now]"
        if others:  # a results page: its other clicks are products
            return others[0]
        return "click[< prev]" if "click[< prev]" in admissible else "click[back to search]"
