"""The manual in a browser: built as CI builds it (`mkdocs build --strict`), every page
opened from disk (file://) in headless Chromium at 1280x800, as a reader who opens the
built site would: nothing sticks out sideways, every link to the site lands on a file
(and its anchor), every page with sections has its table of contents, nothing is fetched
from the network, and search finds pages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.browser import Browser, Page, require_browser

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1280, 800

# What a page shows at WIDTH: how far it and its content column scroll sideways, the
# tables and code blocks whose visible box leaves the column (a table or code block that
# scrolls inside a box of its own is fine while that box stays inside), its links, ids,
# titles and table of contents.
PROBE = """(() => {
  const column = document.querySelector('.md-content');
  const edge = column.getBoundingClientRect();
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const wide = [];
  for (const el of column.querySelectorAll('table, pre')) {
    let box = null;
    for (let node = el; node && node !== column; node = node.parentElement) {
      if (scrolls(node)) { box = node; break; }
    }
    const code = el.tagName === 'PRE' ? el.querySelector(':scope > code') : null;
    if (!box && code && scrolls(code)) box = code;
    const rect = (box || el).getBoundingClientRect();
    const right = box ? rect.right : rect.left + Math.max(rect.width, el.scrollWidth);
    if (rect.left < edge.left - 1 || right > edge.right + 1) {
      wide.push(`${el.tagName.toLowerCase()} "${el.textContent.trim().slice(0, 60)}" ` +
                `reaches ${Math.round(right - edge.right)} px past the column`);
    }
  }
  const article = column.querySelector('article');
  const toc = [...document.querySelectorAll('.md-sidebar--secondary [data-md-component=toc] a')];
  const root = document.scrollingElement;
  return {
    page: [root.scrollWidth, root.clientWidth],
    column: [column.scrollWidth, column.clientWidth],
    wide: wide,
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id]')].map(el => el.id),
    h1: article.querySelectorAll('h1').length,
    h2: article.querySelectorAll('h2').length,
    toc: toc.filter(a => a.getBoundingClientRect().width > 0).length,
  };
})()"""

# Schemes a page may load from: itself, and what it makes in memory.
LOCAL = {"file", "data", "blob", "about"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="no mkdocs here (pyproject's docs group)")
    pytest.importorskip("material", reason="no mkdocs-material here (pyproject's docs group)")
    require_browser()
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner, not a problem
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def browser(site) -> Iterator[Browser]:
    with Browser(require_browser(), WIDTH, HEIGHT) as opened:
        yield opened


@pytest.fixture(scope="module")
def pages(site, browser) -> dict[str, Page]:
    """Every page of the site as loaded, keyed by its path in the site."""
    return {
        path.relative_to(site).as_posix(): browser.open(path.as_uri(), PROBE)
        for path in sorted(site.rglob("*.html"))
        # A server's page for a missing one: its links start at the server's root, and no
        # page links to it.
        if path.name != "404.html"
    }


def test_every_page_is_opened(pages):
    docs = ROOT / "docs"
    sources = {md.relative_to(docs).with_suffix(".html").as_posix() for md in docs.rglob("*.md")}
    assert set(pages) == sources


def test_nothing_sticks_out_sideways(pages):
    problems = []
    for name, page in pages.items():
        page_width, page_view = page.value["page"]
        column_width, column_view = page.value["column"]
        if page_width > page_view:
            problems.append(f"{name}: the page scrolls sideways ({page_width} > {page_view} px)")
        if column_width > column_view:
            problems.append(
                f"{name}: the content column overflows by {column_width - column_view} px"
            )
        problems += [f"{name}: {what}" for what in page.value["wide"]]
    assert problems == []


def test_every_link_to_the_site_lands_on_a_file_and_its_anchor(site, pages):
    ids = {name: set(page.value["ids"]) for name, page in pages.items()}
    broken = []
    for name, page in pages.items():
        for href in page.value["links"]:
            url = urlsplit(href)
            if url.scheme != "file":
                continue
            target = Path(unquote(url.path))
            where = target.relative_to(site).as_posix() if target.is_relative_to(site) else None
            if where is None:
                broken.append(f"{name}: {href} leaves the site")
            elif not target.is_file():
                broken.append(f"{name}: {href} is {'a folder' if target.is_dir() else 'missing'}")
            elif url.fragment and unquote(url.fragment) not in ids.get(where, ()):
                broken.append(f"{name}: {href} has no such anchor")
    assert broken == []


def test_every_page_has_one_title_and_a_table_of_contents_of_its_sections(pages):
    problems = []
    for name, page in pages.items():
        h1, h2, toc = page.value["h1"], page.value["h2"], page.value["toc"]
        if h1 != 1:
            problems.append(f"{name}: {h1} titles (h1), where one leaves the contents empty")
        if toc < h2:
            problems.append(f"{name}: {h2} sections but {toc} entries in its contents")
    assert problems == []
    assert pages["benchmark-history.html"].value["toc"] >= 10  # the long page, navigable


def test_nothing_comes_from_the_network_and_no_page_errs(pages):
    fetched = {
        f"{name}: {url[:120]}"
        for name, page in pages.items()
        for url in page.fetched
        if urlsplit(url).scheme not in LOCAL
    }
    assert sorted(fetched) == []
    errors = [f"{name}: {error}" for name, page in pages.items() for error in page.errors]
    assert errors == []


# Types a word into the search box and waits (at most 10 s) for the results it lists.
SEARCH = """(async () => {
  const input = document.querySelector('[data-md-component=search-query]');
  input.focus();
  input.value = 'tatoeba';
  input.dispatchEvent(new KeyboardEvent('keyup', {key: 'a'}));
  for (let i = 0; i < 100; i++) {
    const found = [...document.querySelectorAll('.md-search-result__item a')];
    if (found.length) return found.map(a => a.href);
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  return [];
})()"""


def test_search_finds_pages_from_disk(site, browser, pages):
    browser.open((site / "index.html").as_uri(), "1")
    found = browser.evaluate(SEARCH, wait=True)
    assert found, "search listed nothing for 'tatoeba'"
    paths = {Path(unquote(urlsplit(href).path)) for href in found}
    assert site / "recipes" / "tatoeba.html" in paths
    assert all(path.is_file() for path in paths)
