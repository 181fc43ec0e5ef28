"""What tests/site/test_site.py's accessibility checks run in each page: axe-core finds no serious or critical
problem, in the light and in the dark colour mode, and no page is wider than a phone's screen.

Once a page has drawn its views, axe-core (the npm package, from package-lock.json, put into the page by the test
only: the site does not ship it) checks it with its default rules (WCAG 2.0 and 2.1, A and AA, and best practices) at
1280 x 800 in the light mode, and for colour contrast in the dark one (the theme keeps the reader's choice in
localStorage ``mode`` and shows it as ``data-theme`` on ``<html>``, which its stylesheets follow). Then, in the light
mode, the page shrinks to a phone's 390 x 844, where it must not pan sideways, no part of a view may stick out or show
text under 12 px, and axe checks again that whatever now scrolls is reached by keyboard. The whole page is checked,
the book's own views included; a failure lists each problem's rule, impact, screen and elements, the views' (inside
``.mha-view``) apart from the rest.

Code is the one part checked by kind rather than element by element. Its text is coloured by the syntax highlighter's
token classes, the same few dozen on every page, in thousands of spans per page; so axe's contrast rule skips the
text of code blocks, and each block's text is merged into one text node before axe runs (of axe's rules, only the
contrast rule and the landmark rule ``region`` apply to a token's span, and ``region`` still judges the block that
holds it; the merge more than halves the elements axe walks on the pages with the most code). Instead, for each kind
of code block a page shows (its background, font and text colour, in each colour mode) that no page before it showed,
a copy of that block holding one token of every class that the site's stylesheets colour is put beside it and checked
by the same rule. Every kind of code block on the site is so checked in both modes with every token colour, including
those no page happens to use.
"""

from dataclasses import dataclass, field
from pathlib import Path

from conftest import POLL

ROOT = Path(__file__).resolve().parents[1]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
MODES = ("light", "dark")
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SERIOUS = ("serious", "critical")  # axe's impacts, from minor to critical, that fail a page
SECONDS = 1000  # Playwright counts milliseconds

# The page is ready once every view says so and bertviz has drawn, and the theme has made each code block or
# notebook output that scrolls a tab stop, and no other (its script does so 300 ms after a change or a resize;
# these are the elements it looks at).
DRAWN = """() => [...document.querySelectorAll('.mha-view')].every((view) => view.dataset.ready)
  && [...document.querySelectorAll("[id^='bertviz-']")].every((view) => view.querySelector('svg'))"""
TAB_STOPS = """() => [...document.querySelectorAll(
    'pre, .nboutput > .output_area, .cell_output > .output, .jp-RenderedHTMLCommon, .pst-scrollable-table-container')]
  .every((el) => (el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight) === (el.tabIndex === 0))"""
# What axe checks (its run options): all its default rules on a laptop's screen in the light mode, and in the dark
# mode what the colours change, their contrast; then, on a phone, what the narrower page changes: what now scrolls
# must be reached by keyboard. The page's width does not depend on its colours, so the phone is measured in one mode.
LAPTOP_RULES = {"light": {}, "dark": {"runOnly": {"type": "rule", "values": ["color-contrast"]}}}
PHONE_RULES = {"runOnly": {"type": "rule", "values": ["scrollable-region-focusable"]}}
PHONE_MODE = "light"
# On a phone, a view's own parts: none sticks out past the screen (wide maps scroll inside their area), and no text
# is smaller than 12 px
VIEW_ON_A_PHONE = """() => {
  const views = [...document.querySelectorAll('.mha-view')];
  const sizes = views.flatMap((v) => [...v.querySelectorAll('svg.mha-map text, label, button, select, p')]
    .filter((node) => node.getClientRects().length).map((node) => parseFloat(getComputedStyle(node).fontSize)));
  const wide = views.flatMap((v) => [...v.querySelectorAll('*')])
    .filter((node) => node.getBoundingClientRect().right > innerWidth + 1
      && !node.closest('.mha-picture, .mha-table, .mha-panels'))
    .map((node) => `${node.tagName.toLowerCase()}.${node.className.baseVal ?? node.className}`);
  return {smallest: sizes.length ? Math.min(...sizes) : null, wide: [...new Set(wide)].slice(0, 5)};
}"""
# axe's verdict on the page (or on the elements ``include`` selects): each violation with its rule, impact, and the
# elements it names, each marked as inside a view; and how many elements passed or failed (with resultTypes
# ['violations'], axe lists only the first element of the others)
AUDIT = """async ([options, include]) => {
  const result = await axe.run(include ? {include} : document, options);
  const violations = result.violations.map((rule) => ({
    rule: rule.id, impact: rule.impact, help: rule.help,
    nodes: rule.nodes.map((node) => ({
      target: node.target.join(' '), impact: node.impact || rule.impact,
      in_view: !!document.querySelector(node.target[0])?.closest('.mha-view'),
    })),
  }));
  const judged = [...result.violations, ...result.passes].reduce((count, rule) => count + rule.nodes.length, 0);
  return {violations, judged};
}"""
VIOLATIONS_ONLY = {"resultTypes": ["violations"]}  # on a whole page: the details of what passed are not needed
WIDTH = "() => document.documentElement.scrollWidth"
# axe's contrast rule leaves out the text of code blocks (div.highlight), except the token samples below
SKIP_CODE = """() => {
  const rule = axe._audit.rules.find((r) => r.id === 'color-contrast');
  const matches = rule.matches.bind(rule);
  axe.configure({rules: [{id: 'color-contrast', matches: (node, virtualNode) =>
    !node.closest('div.highlight:not([data-mha-token-sample])') && matches(node, virtualNode)}]});
}"""
# Each code block's text as one text node in place of the highlighter's token spans (see the module's docstring)
MERGE_CODE_TOKENS = """() => {
  for (const pre of document.querySelectorAll('div.highlight:not([data-mha-token-sample]) pre')) {
    pre.textContent = pre.textContent;
  }
}"""
# What the contrast of a code block's text depends on, as one string: the first opaque background behind its text,
# its text colour, font size and weight
KIND_OF = """const kindOf = (block) => {
  const pre = block.querySelector('pre');
  let background = 'rgba(0, 0, 0, 0)';
  for (let node = pre; node && node.nodeType === 1; node = node.parentElement) {
    const colour = getComputedStyle(node).backgroundColor;
    if (!/rgba\\(.*, 0\\)$|transparent/.test(colour)) { background = colour; break; }
  }
  const style = getComputedStyle(pre);
  return [background, style.color, style.fontSize, style.fontWeight].join(' / ');
};
// the code blocks a reader sees: not those of a folded cell (a closed <details>) or of a hidden tab, for example
const shownBlocks = () => [...document.querySelectorAll('div.highlight:not([data-mha-token-sample])')]
  .filter((block) => block.querySelector('pre')?.checkVisibility({visibilityProperty: true, opacityProperty: true})
    && !block.closest('details:not([open])'));"""
# Each kind of code block the page shows, with how many blocks of that kind
CODE_KINDS = """() => { """ + KIND_OF + """
  const kinds = {};
  for (const block of shownBlocks()) kinds[kindOf(block)] = (kinds[kindOf(block)] || 0) + 1;
  return kinds;
}"""
# Beside the first code block of a kind, a copy of it (marked data-mha-token-sample) holding plain code text and one
# token of each class that the site's stylesheets colour inside a code block; returns the number of classes
TOKEN_SAMPLE = """(kind) => { """ + KIND_OF + """
  const classes = new Set();
  const walk = (rules) => { for (const rule of rules) {
    for (const found of (rule.selectorText || '').matchAll(/\\.highlight\\s+(?:[a-z]+)?\\.([A-Za-z][\\w-]*)/g)) {
      classes.add(found[1]);
    }
    if (rule.cssRules) walk(rule.cssRules);
  } };
  for (const sheet of document.styleSheets) { try { walk(sheet.cssRules); } catch (error) {} }
  const block = shownBlocks().find((shown) => kindOf(shown) === kind);
  const sample = block.cloneNode(true);
  sample.dataset.mhaTokenSample = '';
  sample.querySelectorAll('button').forEach((button) => button.remove());
  sample.querySelector('pre').replaceChildren('plain code text\\n', ...[...classes].sort().flatMap((name) => {
    const token = document.createElement('span');
    token.className = name;
    token.textContent = `token ${name}`;
    return [token, '\\n'];
  }));
  block.after(sample);
  return classes.size;
}"""
CONTRAST_ONLY = {"runOnly": {"type": "rule", "values": ["color-contrast"]}}
SAMPLES = [["[data-mha-token-sample]"]]  # axe's context: only the token samples
# No transition between the colour modes, and every part of the page rendered (website/theme.css lets the browser skip
# what is off screen until the reader scrolls near it, content-visibility: auto): the page is checked as the reader
# sees it once scrolled through, its width included. From a stylesheet built in the page (allowed by its policy).
FULLY_DRAWN = """() => {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync('*, *::before, *::after { transition: none !important; content-visibility: visible !important; }');
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}"""


@dataclass
class Audit:
    """What axe found on one page in one colour mode, at each screen size, and how wide the page was on a phone."""

    mode: str = ""
    violations: dict[str, list[dict]] = field(default_factory=dict)  # screen ("laptop", "phone") -> axe's list
    phone_width: int = 0
    views_on_a_phone: dict = field(default_factory=dict)  # VIEW_ON_A_PHONE's answer
    problems: list[str] = field(default_factory=list)  # the page did not load, or not in its colour mode
    code_kinds: dict[str, int] = field(default_factory=dict)  # CODE_KINDS' answer
    # kind of code block sampled here -> the number of token classes its sample held (0: axe did not judge them)
    token_classes: dict[str, int] = field(default_factory=dict)


async def settled(page) -> None:
    """Wait until the theme has set the tab stops of what scrolls (see TAB_STOPS); axe then says what it missed."""
    from playwright.async_api import Error as PlaywrightError

    try:  # a page whose tab stops never settle waits 5 s (not a bound: nothing fails), then axe judges it as it is
        await page.wait_for_function(TAB_STOPS, timeout=5 * SECONDS, polling=POLL)  # limit under test: none
    except PlaywrightError:
        pass


async def audit(page, axe: str, sampled: dict[str, set[str]]) -> dict[str, Audit]:
    """Check a page that has loaded in the light mode at a laptop's size: put axe into it (``page.evaluate``, which
    the page's own Content-Security-Policy does not stop, so the page is checked under that policy), wait until its
    views are drawn, run axe's LAPTOP_RULES, then switch the page to the dark mode as the theme's own button does
    (``data-theme`` on ``<html>``) and run the dark mode's; in each mode, check the token colours of each kind of code
    block not yet ``sampled`` in that mode (TOKEN_SAMPLE). Then, on a phone, measure the page and its views and run
    the PHONE_RULES there. One Audit per colour mode; the page is left at a phone's size."""
    from playwright.async_api import Error as PlaywrightError

    seen = {mode: Audit(mode=mode) for mode in MODES}
    try:
        await page.wait_for_function(DRAWN, timeout=15 * SECONDS, polling=POLL)
        await settled(page)
        await page.evaluate(axe + "\n;0")
        await page.evaluate(SKIP_CODE)
        await page.evaluate(MERGE_CODE_TOKENS)
        # colours are measured as they end, not halfway through the theme's transition between the modes
        await page.evaluate(FULLY_DRAWN)
        for mode in MODES:
            await page.evaluate("(mode) => { document.documentElement.dataset.theme = mode; "
                                "try { localStorage.setItem('mode', mode); } catch (e) {} }", mode)
            await page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            shown = await page.evaluate("() => document.documentElement.dataset.theme")
            if shown != mode:
                seen[mode].problems.append(f"the page shows the {shown!r} colour mode, not {mode!r}")
            found = await page.evaluate(AUDIT, [LAPTOP_RULES[mode] | VIOLATIONS_ONLY, None])
            seen[mode].violations["laptop"] = found["violations"]
            seen[mode].code_kinds = await page.evaluate(CODE_KINDS)
            for kind in [kind for kind in seen[mode].code_kinds if kind not in sampled[mode]]:
                sampled[mode].add(kind)
                classes = await page.evaluate(TOKEN_SAMPLE, kind)
                found = await page.evaluate(AUDIT, [CONTRAST_ONLY, SAMPLES])
                await page.evaluate("() => document.querySelector('[data-mha-token-sample]').remove()")
                seen[mode].violations[f"code tokens on {kind}"] = found["violations"]
                # each token and the plain text judged, or the sample was hidden from axe
                seen[mode].token_classes[kind] = classes if found["judged"] > classes else 0
        await page.evaluate("(mode) => { document.documentElement.dataset.theme = mode; }", PHONE_MODE)
        phone = seen[PHONE_MODE]
        await page.set_viewport_size(PHONE)
        await settled(page)
        phone.phone_width = await page.evaluate(WIDTH)
        phone.views_on_a_phone = await page.evaluate(VIEW_ON_A_PHONE)
        phone.violations["phone"] = (await page.evaluate(AUDIT, [PHONE_RULES | VIOLATIONS_ONLY, None]))["violations"]
    except PlaywrightError as error:
        for mode in MODES:
            seen[mode].problems.append(f"the page's views were not drawn, or axe could not check it: {error}")
    return seen


def serious(audit: Audit) -> list[str]:
    """Each serious or critical violation, one line per element: the views' first, then the rest of the page."""
    lines = []
    for screen, violations in audit.violations.items():
        for rule in violations:
            for node in rule["nodes"]:
                if node["impact"] in SERIOUS:
                    where = "inside a view (.mha-view)" if node["in_view"] else "on the page"
                    lines.append(f"{where}: {rule['rule']} ({node['impact']}, {screen}): {node['target']}"
                                 f" -- {rule['help']}")
    return sorted(dict.fromkeys(lines))
