"""The built site's own links: every internal href reaches a page, and every #anchor an id on
it. (`mkdocs build --strict` checks the Markdown's links; this checks what the theme and raw
HTML add too.) External links (http, https, mailto) are not fetched: there is no network here."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.hrefs.append(str(values["href"]))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def _target(site: Path, page: Path, path: str) -> Path:
    """The file a link's path names: from the site's root when absolute (the 404 page's links,
    which must work at any depth), else from the page's directory."""
    base = site if path.startswith("/") else page.parent
    target = (base / unquote(path).lstrip("/")).resolve() if path else page
    if target.is_dir() or path.endswith("/"):
        target = target / "index.html"
    return target


def test_every_internal_link_and_anchor_resolves(site_dir: Path) -> None:
    parsed = {p.resolve(): _parse(p) for p in site_dir.rglob("*.html")}
    assert parsed, f"no pages in {site_dir}"
    broken: list[str] = []
    for page, html in parsed.items():
        for href in html.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc:
                continue  # external: not fetched
            target = _target(site_dir, page, parts.path)
            if not target.exists():
                broken.append(f"{page.relative_to(site_dir.resolve())}: {href} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site_dir.resolve())}: {href} (no anchor)")
    assert not broken, "\n".join(broken)
