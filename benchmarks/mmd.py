"""Tabular MMD: pbmarl's `pb.MMD` beside OpenSpiel's `MMDDilatedEnt`, same game, same alpha and step size.

For each game both run the same number of updates side by side in this process; the script prints
the seconds per update of each (OpenSpiel: ``update_sequences``; pbmarl: the update alone, and the
update plus the exact NashConv and regularised gap it records every step), their ratio, and the
largest difference between the two sequence-form iterates over all steps and between the final
regularised gaps (parity: both must be below 1e-9).

    python benchmarks/mmd.py                       # Leduc (100 updates) and liars_dice 1x3 (60 updates)
    python benchmarks/mmd.py --only leduc --steps 20
    python benchmarks/mmd.py --only liars6         # pbmarl alone on OpenSpiel's default liars_dice (1 die, 6 sides)

Every printed row is appended to ``benchmarks/results/mmd.csv`` with the date, the commit, the
machine, the command and the load average (the machine is shared; say how busy it was).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _rows import Stamp, append, load_avg

import pbmarl as pb

FIELDS = ["date", "commit", "machine", "command", "game", "measure", "pbmarl", "openspiel", "ratio", "note", "load_avg"]
#: name -> (OpenSpiel game string, alpha, updates); the reference README times liars_dice 1x3 at alpha 0.05
GAMES = {
    "leduc": ("leduc_poker", 0.05, 100),
    "liars": ("liars_dice(numdice=1,dice_sides=3)", 0.05, 60),
    "liars6": ("liars_dice", 0.05, 20),
}
TARGET = 50.0


class Report:
    def __init__(self) -> None:
        self.stamp = Stamp("benchmarks/mmd.py", iso=True)

    def row(self, game: str, measure: str, pbmarl: str, openspiel: str, ratio: str, note: str = "") -> None:
        load = load_avg()
        print(f"{game:<36} {measure:<28} pbmarl {pbmarl:>12}  openspiel {openspiel:>12}  {ratio:>9}  {note}"
              f"  (load {load})")
        append("mmd", [self.stamp.row(game=game, measure=measure, pbmarl=pbmarl, openspiel=openspiel, ratio=ratio,
                                      note=note, load_avg=load)], FIELDS)


def _columns(tree: object, reference: object, player: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenSpiel's sequence ids and the same sequences in pbmarl's numbering."""
    theirs, ours = [], []
    for key, seq in reference.infoset_actions_to_seq[player].items():  # type: ignore[attr-defined]
        theirs.append(seq)
        if key.startswith("***"):
            ours.append(0)
        else:
            info, action = key.split(" -=- ")
            ours.append(1 + tree.infosets[player].index[info] * tree.num_actions + int(action))  # type: ignore[attr-defined]
    return np.array(theirs), np.array(ours)


def compare(report: Report, name: str, alpha: float, steps: int, with_openspiel: bool) -> None:
    game = pb.load_game(name)
    start = time.perf_counter()
    tree = game.tree()
    run = pb.MMD(game, alpha=alpha)
    built = time.perf_counter() - start
    update = measure = 0.0
    reference = None
    if with_openspiel:
        import pyspiel
        from open_spiel.python.algorithms.mmd_dilated import MMDDilatedEnt

        start = time.perf_counter()
        reference = MMDDilatedEnt(pyspiel.load_game(name), alpha)
        os_built = time.perf_counter() - start
        cols = [_columns(tree, reference, p) for p in (0, 1)]
    os_update, worst = 0.0, 0.0
    for _ in range(steps):
        if reference is not None:
            start = time.perf_counter()
            reference.update_sequences()
            os_update += time.perf_counter() - start
        record = run.step()
        update += record.times["update"]
        measure += record.times["measure"]
        if reference is not None:
            worst = max(worst, max(float(np.abs(run.solver.plans[p][ours] - reference.sequences[p][theirs]).max())
                                   for p, (theirs, ours) in enumerate(cols)))
    label = f"{name} alpha {alpha}"
    mine = update / steps
    if reference is None:
        report.row(label, f"s/update ({steps} updates)", f"{mine * 1e3:.3f} ms", "-", "-",
                   f"update+measure {(update + measure) / steps * 1e3:.3f} ms; tree {built:.1f} s; "
                   f"last-iterate exploitability {record.exploitability:.4g}")
        return
    theirs_s = os_update / steps
    gap_diff = abs(record.gap - reference.get_gap())
    parity = "parity met" if worst < 1e-9 and gap_diff < 1e-9 else "PARITY NOT MET"
    report.row(label, f"s/update ({steps} updates)", f"{mine * 1e3:.3f} ms", f"{theirs_s * 1e3:.1f} ms",
               f"{theirs_s / mine:.0f}x", f"target >= {TARGET:.0f}x: {'met' if theirs_s / mine >= TARGET else 'NOT met'}")
    report.row(label, "s/update incl. exact NashConv+gap", f"{(update + measure) / steps * 1e3:.3f} ms",
               f"{theirs_s * 1e3:.1f} ms", f"{theirs_s / ((update + measure) / steps):.0f}x",
               f"build: pbmarl {built:.2f} s (tree walk cached after the first), OpenSpiel {os_built:.2f} s")
    report.row(label, "parity over all updates", f"{worst:.1e}", f"gap diff {gap_diff:.1e}", "-",
               f"{parity}; last-iterate exploitability {record.exploitability:.4g}, gap {record.gap:.4g}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(GAMES), help="games to run (default leduc, liars)")
    parser.add_argument("--steps", type=int, default=None, help="updates per game (default: the game's own)")
    args = parser.parse_args(argv)
    report = Report()
    for key in args.only or ["leduc", "liars"]:
        name, alpha, steps = GAMES[key]
        compare(report, name, alpha, args.steps or steps, with_openspiel=key != "liars6")


if __name__ == "__main__":
    main()
