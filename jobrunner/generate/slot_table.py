"""The class slots of this process's one server, shared by all its datasets: how many requests of
each prompt class are in flight, and whether one more may go (the rule: class_slots)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from draftgen_contracts.prompt_classes import PromptClass
from jobrunner.generate import class_slots
from jobrunner.generate.dataset_controller import DatasetController


class SlotTable:
    def __init__(self, classes: Mapping[str, PromptClass], datasets: Sequence[DatasetController]):
        self.classes = classes
        self.datasets = datasets  # read only: which classes they may still send to
        self.in_flight = {name: 0 for name in classes}

    def take(self, prompt_class: str) -> None:
        self.in_flight[prompt_class] += 1

    def free(self, prompt_class: str) -> None:
        self.in_flight[prompt_class] -= 1

    def may_take(self, prompt_class: str, context_length: int, now: float) -> bool:
        """Whether a request of `prompt_class` may be sent: a slot of its own, or one an idle class lends."""
        cls = self.classes[prompt_class]
        # The idle classes only matter to a full class: they are not worked out on every wake-up.
        return self.in_flight[cls.name] < cls.concurrency or class_slots.may_take_slot(
            cls, self.classes, self.in_flight, self.idle_classes(now), context_length)

    def idle_classes(self, now: float) -> set[str]:
        """The prompt classes no dataset of this process may still send to (one that has sent
        nothing yet may send to any): their free slots are lent."""
        busy: set[str] = set()
        for d in self.datasets:
            if d.may_take_slots(now):
                busy |= d.classes_sent or set(self.classes)
        return set(self.classes) - busy

    def holds_up(self, dataset: DatasetController) -> bool:
        """The dataset's next prompt waits for a full class while another class has free slots:
        the next dataset may use them meanwhile."""
        waiting = dataset.waiting_for_class
        return waiting is not None and self.in_flight[waiting] >= self.classes[waiting].concurrency and any(
            self.in_flight[c.name] < c.concurrency for c in self.classes.values() if c.name != waiting)
