"""What an agent may spend: a model's prices (``model.pricing``, for models the price library does
not know) and the budgets of a turn and of a thread (``limits``).

Referenced by one field of :class:`~runner.manifest.ModelSpec` (``pricing``) and one of
:class:`~runner.manifest.Manifest` (``limits``), so an agent of its own can later carry them too.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from runner.manifest.basics import Duration, Spec

Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PricingSpec(Spec):
    """Prices in US dollars per million tokens; they replace the price library's for this model."""

    input_per_mtok: Price = Field(description="US dollars per million input tokens.")
    output_per_mtok: Price = Field(description="US dollars per million output tokens.")
    cached_input_per_mtok: Price | None = Field(
        None, description="US dollars per million input tokens read from the provider's cache "
        "(default: the input price).")


class BudgetSpec(Spec):
    """What may be spent; unset: no limit. Checked before each model step and each tool call."""

    max_tokens: Annotated[int, Field(gt=0, strict=True)] | None = Field(
        None, description="Input plus output tokens of every model step.")
    max_cost: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, description="US dollars, from the models' prices (model.pricing or the price library).")
    max_tool_calls: Annotated[int, Field(ge=0, strict=True)] | None = Field(
        None, description="Tool calls the model makes (0: none may run).")
    max_duration: Duration | None = Field(
        None, description="Wall time of the turns: 90s, 5m, 1h or a number of seconds.")

    def is_set(self) -> bool:
        return any(value is not None for value in self.model_dump().values())


class LimitsSpec(Spec):
    """Budgets shared by everything that works on a turn; reaching one ends the turn cleanly."""

    per_turn: BudgetSpec = Field(default_factory=BudgetSpec, description="Budget of each turn.")
    per_thread: BudgetSpec = Field(
        default_factory=BudgetSpec, description="Budget of a whole conversation (thread), across turns "
        "and restarts.")
