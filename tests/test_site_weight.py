"""What each page of the site weighs in a real browser (issue 9): the heaviest page stays within 3 MB.

Every page of the site that ``built_site`` (conftest.py) builds is opened in headless Chromium, served on 127.0.0.1
(``site_address``), as on a first visit, and weighed: the bytes of every response it received (HTML, CSS, scripts,
fonts, images). The measurement is scripts/page_weights.py's, which prints the same table for `make book`'s site.
The table of every page's weight is printed (``pytest tests/test_site_weight.py -s``) and written next to the built
site.
"""

from conftest import load_script


def test_every_page_weighs_at_most_3_mb(built_site, site_address, chromium):
    script = load_script("page_weights")
    weights = script.weigh(chromium, site_address, script.site_pages(built_site))
    report = script.table(weights)
    (built_site.parent / "page_weights.md").write_text(report + "\n")
    print(f"\nwhat each page loads on a first visit ({built_site.parent / 'page_weights.md'}):\n{report}")

    assert sorted(weights) == script.site_pages(built_site) and "chapters/index.html" in weights
    outside = {path: weight.outside for path, weight in weights.items() if weight.outside}
    assert not outside, f"pages requested files from outside the site, which were not weighed: {outside}"
    unweighed = [path for path, weight in weights.items() if not weight.by_kind["html"] or not weight.by_kind["css"]]
    assert not unweighed, f"these pages' HTML or CSS was not weighed: {unweighed}"
    assert script.BUDGET == 3_000_000
    heavy = {path: f"{weight.total / 1e6:.2f} MB" for path, weight in weights.items() if weight.total > script.BUDGET}
    assert not heavy, f"pages heavier than 3 MB (see the table above): {heavy}"
