import json
from dataclasses import dataclass, field


@dataclass
class Item:
    sku: str
    name: str
    price: float
    quantity: int = 0
    tags: list = field(default_factory=list)


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, item):
        if item.sku in self.items:
            raise ValueError(f"duplicate sku {item.sku}")
        self.items[item.sku] = item

    def remove(self, sku):
        return self.items.pop(sku)

    def restock(self, sku, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.items[sku].quantity += amount

    def sell(self, sku, amount):
        item = self.items[sku]
        if item.quantity < amount:
            raise ValueError(f"only {item.quantity} left")
        item.quantity -= amount
        return item.price * amount

    def total_value(self):
        return sum(item.price * item.quantity for item in self.items.values())

    def low_stock(self, threshold=5):
        return [item for item in self.items.values() if item.quantity < threshold]

    def find_by_tag(self, tag):
        return [item for item in self.items.values() if tag in item.tags]

    def to_json(self):
        return json.dumps([item.__dict__ for item in self.items.values()], indent=2)


def load(path):
    inventory = Inventory()
    with open(path) as fh:
        for row in json.load(fh):
            inventory.add(Item(**row))
    return inventory
