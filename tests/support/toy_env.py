"""A toy tool environment for live-episode tests: a shop with two orders, one read tool and
one write tool (resources/agents/environments.py's ToolEnvironment)."""

from __future__ import annotations

from metric_ops.base import Sample
from resources.agents.environments import ToolEnvironment, tool

ORDERS = {"A1": {"status": "pending", "item": "lamp"}, "B2": {"status": "delivered", "item": "desk"}}


class ToyShop(ToolEnvironment):
    """Orders A1 (pending) and B2 (delivered); ``cancel_order`` changes the state."""

    name = "toy-shop"
    policy = "You are a shop assistant. Confirm with the user (yes) before cancelling an order."
    write_tools = ("cancel_order",)

    def reset(self, task: Sample) -> None:
        self.state = {"orders": {k: dict(v) for k, v in ORDERS.items()}}

    @tool("Look up an order by id.", {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]})
    def get_order(self, order_id: str) -> dict:
        if order_id not in self.state["orders"]:
            raise KeyError(f"order {order_id} not found")
        return {"order_id": order_id, **self.state["orders"][order_id]}

    @tool("Cancel a pending order.", {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]})
    def cancel_order(self, order_id: str) -> dict:
        order = self.state["orders"].get(order_id)
        if order is None or order["status"] != "pending":
            raise ValueError(f"order {order_id} cannot be cancelled")
        order["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled"}
