"""The training curve shows what the run recorded and nothing else (issue 48): with ``--guards none``
and selection on dev accuracy it draws two panels, not two empty placeholders, and says why; the
loss terms stay apart when they coincide (``loss`` = ``loss_dpo`` when DPO is the only term)."""

import matplotlib.figure
import pytest

from memgate.train.curve import plot_training_curve
from tests.train.test_selection_card import _entry


@pytest.fixture
def drawn(monkeypatch):
    """The figures plot_training_curve saves (it closes them after saving)."""
    figures = []
    save = matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return figures


def _unguarded(step):
    """A validation point of a run without real-data guards, selected on dev accuracy."""
    return {"step": step, "epoch": 0, "dev_pref_acc_gated": 0.5 + step / 1000,
            "dev_pref_acc_reference": 0.5, "passed": True, "selected": step == 20}


def _texts(fig):
    return " | ".join(t.get_text() for t in fig.texts)


def test_guards_none_draws_only_the_panels_with_something_to_show(tmp_path, drawn):
    rows = [{"step": s, "loss": 0.69 - s / 500, "loss_dpo": 0.69 - s / 500} for s in range(1, 41)]
    plot_training_curve(tmp_path / "curve.png", rows, [_unguarded(10), _unguarded(20), _unguarded(40)],
                        guards="none (--guards none)")
    (fig,) = drawn
    assert [a.get_title() for a in fig.axes] == ["training loss terms (per step)",
                                                 "dev preference accuracy (per validation)"]
    assert "no real-data guards: none (--guards none)" in _texts(fig)
    assert "no text-risk figure" in _texts(fig)
    assert all(len(a.lines) > 0 for a in fig.axes)  # no placeholder panel


def test_a_guarded_run_keeps_all_four_panels(tmp_path, drawn):
    history = [_entry(0, False, 0.0, low=0.3), _entry(70, True, 0.03), _entry(140, True, 0.031)]
    history[1]["selected"] = True
    rows = [{"step": s, "loss": 0.69 - s / 1000} for s in range(1, 141, 10)]
    plot_training_curve(tmp_path / "curve.png", rows, history)
    (fig,) = drawn
    assert len(fig.axes) == 4 and "not drawn" not in _texts(fig)


def test_coinciding_loss_terms_are_drawn_distinguishably(tmp_path, drawn):
    terms = ("loss", "loss_dpo", "loss_listwise", "loss_margin", "loss_preservation", "loss_list_kl")
    rows = [{"step": s, **{t: 0.69 - s / 500 for t in terms}} for s in range(1, 41)]
    plot_training_curve(tmp_path / "curve.png", rows, [_unguarded(20)])
    (fig,) = drawn
    lines = {line.get_label(): line for line in fig.axes[0].lines if not line.get_label().startswith("_")}
    assert set(lines) == set(terms)
    styles = {(line.get_linestyle(), line.get_marker(), line.get_linewidth()) for line in lines.values()}
    assert len(styles) == len(terms), styles  # no two terms share line style, marker and width
    loss, dpo = lines["loss"], lines["loss_dpo"]
    assert loss.get_linewidth() > 2 * dpo.get_linewidth() and dpo.get_marker() not in ("", "None", None)
