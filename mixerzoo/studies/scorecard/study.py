"""The study kind ``scorecard``: ``mixerzoo study run scorecard --set model=MIXER`` is
``mixerzoo scorecard MIXER``; the scorecard makes no claims of its own (the studies whose cells it
borrows do), so it judges nothing and ``study run --all`` leaves it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.studies.base import ClaimPlan, Console, ResultsDir, RunOptions, Study
from mixerzoo.studies.scorecard.battery import battery_path, load_battery

NO_MIXER = "name the mixer to score: --set model=NAME (or `mixerzoo scorecard NAME`)"


class ScorecardStudy(Study):
    kind = "scorecard"
    in_run_all = False

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.battery = load_battery(name)
        self.path = battery_path(name)

    def row(self) -> dict[str, Any]:
        from mixerzoo.studies.scorecard.candidate import candidate
        from mixerzoo.studies.scorecard.card import mad_item_experiment
        from mixerzoo.studies.scorecard.items import planned_configs

        probe = candidate("attention")
        runs = {
            p: sum(len(planned_configs(i, p, probe)) for i in spec.items)
            + (len(mad_item_experiment(probe, spec.mad, p).expand()) if spec.mad else 0)
            for p, spec in self.battery.presets.items()
        }
        return {
            "name": self.battery.name,
            "kind": self.kind,
            "paper_ref": self.battery.paper,
            "runs": runs,
            "claims": [],
            "description": " ".join(self.battery.description.split()),
            "path": str(self.path),
        }

    def claim_row(self) -> dict[str, Any]:
        b = self.battery
        return {
            "name": b.name,
            "kind": self.kind,
            "paper_ref": b.paper,
            "presets": list(b.presets),
            "claims": [],
        }

    def describe(self) -> dict[str, Any]:
        items = {
            p: [{**i.model_dump(mode="json"), "where": i.where} for i in spec.items]
            for p, spec in self.battery.presets.items()
        }
        return {
            **self.row(),
            "details": " ".join(self.battery.model_note.split()),
            "presets": list(self.battery.presets),
            "references": self.battery.references,
            "items": items,
            "mad": {
                p: spec.mad.model_dump(mode="json") if spec.mad else None
                for p, spec in self.battery.presets.items()
            },
        }

    @staticmethod
    def _mixer(sets: dict[str, Any]) -> Any:
        extra = sorted(k for k in sets if k != "model")
        if extra:
            raise ConfigError(
                f"scorecard: --set {extra[0]}: only --set model=... is taken (the battery fixes the rest)"
            )
        if "model" not in sets:
            raise ConfigError(NO_MIXER)
        return sets["model"]

    def run(self, preset, sets, where: ResultsDir, opts: RunOptions, out: Console) -> int:
        from mixerzoo.studies.scorecard.scoring import dry_run_lines, score, write_outputs

        chosen = preset or "quick"
        spec = self._mixer(sets)
        if opts.dry_run:
            for line in dry_run_lines(spec, chosen, self.battery):
                out.echo(line)
            return 0
        out.check_dir(where.root, "--results")
        outcome = score(
            spec, chosen, where.open(create=True), self.battery, log=out.echo, workers=opts.workers
        )
        paths = write_outputs(outcome, self.out_dir(where, outcome.highlight, chosen))
        out.echo(outcome.markdown)
        out.echo(f"wrote {paths[0].parent}")
        return 0

    @staticmethod
    def out_dir(where: ResultsDir, label: str | None, preset: str) -> Path:
        return where.root / "scorecard" / f"{label}-{preset}"

    def _read(self, preset, sets, where: ResultsDir):
        from mixerzoo.studies.scorecard.scoring import score

        store = where.open() if where.root.is_dir() else None
        return score(
            self._mixer(sets), preset or "quick", store, self.battery, train=False, log=lambda _: None
        )

    def plot(self, preset, sets, where: ResultsDir, out_dir: str | None, out: Console) -> None:
        from mixerzoo.studies.scorecard.scoring import write_outputs

        outcome = self._read(preset, sets, where)
        folder = Path(out_dir) if out_dir else self.out_dir(where, outcome.highlight, outcome.preset)
        for path in write_outputs(outcome, folder):
            out.echo(f"wrote {path}")

    def report(self, preset, sets, where: ResultsDir, out_file, as_json: bool, out: Console) -> None:
        outcome = self._read(preset, sets, where)
        if as_json:
            out.write_json("-", outcome.as_json())
            return
        out.echo(outcome.markdown)

    def verdicts(self, preset, sets, where: ResultsDir, out: Console):
        return [], f"{self.name}: no claims (a mixer's scores among the references)", None

    def claim_plan(self, preset, sets) -> ClaimPlan:
        return ClaimPlan([], None, [], [], {}, [], preset or "quick")
