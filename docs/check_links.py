"""Check every internal link of a built site: each local href names a file that exists and, with a
``#fragment``, an element with that id. External links are not followed (the site must work offline).

    python docs/check_links.py docs/_build/html
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and ((tag == "a" and name == "href") or (tag in ("img", "script") and name == "src")
                          or (tag == "link" and name == "href")):
                self.links.append(value)


def check(site: Path) -> list[str]:
    pages: dict[Path, _Page] = {}
    for path in site.rglob("*.html"):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = page
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site.resolve())}: {link} (no such anchor)")
    return broken


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else Path(__file__).resolve().parent / "_build" / "html")
    broken = check(site)
    for line in broken:
        print(line, file=sys.stderr)
    print(f"links: {len(broken)} broken internal links in {sum(1 for _ in site.rglob('*.html'))} pages")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
