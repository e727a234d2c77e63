"""The claims' counts are generated once (issue 50, point 5): the table's header, the README's
sentence and every note come from :func:`robench.stats.claims.counts` over the same rows, so
they cannot disagree; the bound is the pre-data one and the table says what each row counts
as, with its control at the row's size and repeat figures at 80% power."""

import re
from pathlib import Path

from robench.present.docgen import generate

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "docs.db"


def test_the_readme_sentence_and_the_table_header_are_generated_from_the_same_counts(tmp_path):
    page = tmp_path / "README.md"
    page.write_text("Intro.\n<!-- generated: claims-count@standard -->\nstale: 11 hold\n"
                    "<!-- /generated -->\n\n<!-- generated: claims@standard -->\nold\n"
                    "<!-- /generated -->\n")
    ((path, names, changed, kept),) = generate(FIXTURE, tmp_path, label="docs.db")
    assert changed and not kept and names == ["claims-count@standard", "claims@standard"]
    text = page.read_text()
    assert "stale" not in text and text.startswith("Intro.\n")
    head = re.search(r"(\d+) claims: (\d+) evidence \(([^)]*)\); (\d+) by construction; "
                     r"(\d+) confounded; (\d+) algebra checks\. Expected false decisions among "
                     r"the (\d+) decided evidence rows: at most ([\d.]+), a pre-data bound: "
                     r"the sum of the levels of all (\d+) rows", text)
    line = re.search(r"On this database, of (\d+) claims (\d+) (?:is|are) evidence \((\d+) hold, "
                     r"(\d+) do not hold, (\d+) equivalent, (\d+) undecided; at most ([\d.]+) "
                     r"expected false decisions, a pre-data bound\), (\d+) come out the same "
                     r"without the property \(by construction\), (\d+) (?:is|are) explained "
                     r"by a simpler quantity \(confounded\) and (\d+) (?:is an|are) algebra "
                     r"checks?\.", text)
    assert head and line, text[:2000]
    rows, evidence, parts, by_con, conf, alg, decided, bound, all_rows = head.groups()
    assert (rows, evidence, bound, by_con, conf, alg) == (
        line.group(1), line.group(2), line.group(7), line.group(8), line.group(9),
        line.group(10))
    assert all_rows == rows  # the bound sums every row, not only those left evidence
    verdicts = {v: int(n) for n, v in re.findall(r"(\d+) (holds|does not hold|equivalent|"
                                                  r"undecided)", parts)}
    assert verdicts.get("holds", 0) == int(line.group(3))
    assert verdicts.get("does not hold", 0) == int(line.group(4))
    assert verdicts.get("undecided", 0) == int(line.group(6))
    assert int(decided) == int(line.group(3)) + int(line.group(4)) + int(line.group(5))
    # every row says what it counts as, and its control at which size; figures at 80% power
    table = [r for r in text.splitlines() if r.startswith("| ") and "**" in r]
    assert table and int(rows) == len(table)
    assert "| counts as | control (the property absent, at the row's size) |" in text
    for r in table:
        cells = [c.strip() for c in r.strip("|").split(" | ")]
        assert cells[6] in ("evidence", "by construction", "confounded", "algebra"), cells[6]
        if cells[6] == "evidence" and cells[5].strip("*") in ("holds", "does not hold",
                                                               "equivalent"):
            assert "none applies" in cells[7] or ">= 80%): evidence" in cells[7], cells[7]
        if cells[5] == "**undecided**" and "about" in cells[9]:
            assert "80% power" in cells[9], cells[9]
