"""``python -m data_gen.guard_neardup``: the measurement refuses a data dir that was never mined,
naming the flag and the command that fixes it (the measurement itself embeds 36k strings: run by
hand, figures in docs/real_phrasing.md)."""

import pytest

from data_gen.guard_neardup import main


def test_an_unmined_data_dir_is_refused_with_the_fix(tmp_path):
    with pytest.raises(SystemExit, match=r"--data: no mined triples under .*python -m data_gen.mine --data"):
        main(["--data", str(tmp_path)])
