"""The shop's workflows, found at startup because the module is called ``flows``."""

from __future__ import annotations

from workflows import Task, Workflow


class Checkout(Workflow):
    name = "checkout"
    version = 1

    reserve = Task("orders.steps.reserve_stock")
    confirm = Task("orders.steps.send_confirmation", after=["reserve"])
