"""Rendering of the replay site's documents: robots.txt, RSS 2.0, Atom 1.0, sitemaps and article pages.

Every function is pure: the same arguments give the same bytes, so ETags are stable across runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from email.utils import format_datetime
from html import escape

from replay.corpus import Publisher, ReplayArticle, stable_hash

FEED_SIZE = 50
SNIPPET_CHARS = 300
SENTENCES_PER_PARAGRAPH = 3
LONG_LINE_CHARS = 400
"""Lines longer than this are split into paragraphs of a few sentences."""

_AUTHORS = {
    "en": ("Margaret Ellison", "David Okafor", "Priya Raman", "Tom Whitfield", "Hannah Lee", "Carlos Mendes",
           "Siobhan Walsh", "Wei Jie Tan", "Rachel Goldberg", "Samuel Adeyemi", "Aisha Rahman", "Oliver Grant"),
    "ms": ("Ahmad Faizal", "Nurul Izzah Hamid", "Siti Aminah", "Mohd Hafiz Rahman", "Farah Nadia", "Azlan Yusof"),
    "zh": ("陈丽华", "王志强", "李美玲", "张伟", "林晓峰", "黄静怡"),
}
_UI = {
    "en": {"home": "Home", "related": "Related stories", "newsletter": "Get our morning briefing",
           "newsletter_body": "The day's most important stories, in your inbox every weekday at 7am.",
           "subscribe": "Sign up", "cookies": "We use cookies to improve your experience and to show you "
           "personalised advertising. By continuing to browse you agree to our use of cookies.",
           "accept": "Accept all", "by": "By", "paywall": "Subscribe to continue reading. "
           "Subscribers get unlimited access to our journalism.", "rights": "All rights reserved."},
    "ms": {"home": "Utama", "related": "Berita berkaitan", "newsletter": "Langgan buletin pagi kami",
           "newsletter_body": "Berita terpenting hari ini, terus ke peti mel anda setiap pagi.",
           "subscribe": "Langgan", "cookies": "Kami menggunakan kuki untuk menambah baik pengalaman anda. "
           "Dengan terus melayari laman ini, anda bersetuju dengan penggunaan kuki.",
           "accept": "Terima", "by": "Oleh", "paywall": "Langgan untuk terus membaca.",
           "rights": "Hak cipta terpelihara."},
    "zh": {"home": "首页", "related": "相关新闻", "newsletter": "订阅早报简讯", "newsletter_body": "每天早上七点，把最重要的新闻送到您的邮箱。",
           "subscribe": "订阅", "cookies": "本网站使用Cookie以改善您的浏览体验。继续浏览即表示您同意我们使用Cookie。",
           "accept": "接受", "by": "记者", "paywall": "订阅后继续阅读全文。", "rights": "版权所有。"},
}
_MENU = ("world", "politics", "business", "technology", "sport", "opinion", "lifestyle")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(\[A-Z0-9])|(?<=[。！？])")


def _x(text: str) -> str:
    """Escape for XML/HTML text and double-quoted attributes."""
    return escape(text, quote=True)


def _section_label(section: str) -> str:
    return section.replace("-", " ").capitalize()


def _ui(language: str) -> dict[str, str]:
    return _UI.get(language, _UI["en"])


def _rfc822(dt: datetime) -> str:
    return format_datetime(dt, usegmt=True)


def _iso(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def author_of(article: ReplayArticle) -> str:
    """The byline: chosen from the story's root id, so a reprint keeps the original's author."""
    pool = _AUTHORS.get(article.language, _AUTHORS["en"])
    return pool[stable_hash(0, "author", article.root_id) % len(pool)]


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The first ``limit`` characters of a text, whitespace collapsed, cut at a word boundary.

    >>> snippet("one two three", 9)
    'one two…'
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs of a corpus text: one per line; long lines split into a few sentences each.

    >>> split_paragraphs("A.\\nB.")
    ['A.', 'B.']
    """
    paragraphs: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if len(line) <= LONG_LINE_CHARS:
            paragraphs.append(line)
            continue
        sentences = [s.strip() for s in _SENTENCE_END.split(line) if s and s.strip()]
        for i in range(0, len(sentences), SENTENCES_PER_PARAGRAPH):
            chunk = sentences[i : i + SENTENCES_PER_PARAGRAPH]
            joiner = "" if all(s[-1:] in "。！？" for s in chunk[:-1]) else " "
            paragraphs.append(joiner.join(chunk))
    return paragraphs


def render_robots(publisher: Publisher) -> bytes:
    """robots.txt: everything allowed except /private/, with a Sitemap line."""
    return (
        "# robots.txt for " + publisher.domain + "\n"
        "User-agent: *\n"
        "Disallow: /private/\n"
        "Allow: /articles/\n"
        "\n"
        f"Sitemap: {publisher.base_url}/sitemap.xml\n"
    ).encode()


def render_rss(publisher: Publisher, articles: Sequence[ReplayArticle], updated_at: datetime,
               hub_url: str | None = None) -> bytes:
    """RSS 2.0 feed of ``articles`` (newest first) with ttl, an atom:link rel=self and, given a hub, rel=hub."""
    items = []
    for a in articles:
        items.append(
            "<item>"
            f"<title>{_x(a.title)}</title>"
            f"<link>{_x(a.feed_url)}</link>"
            f'<guid isPermaLink="true">{_x(a.url)}</guid>'
            f"<description>{_x(snippet(a.text))}</description>"
            f"<pubDate>{_rfc822(a.published_at)}</pubDate>"
            + (f"<category>{_x(a.section)}</category>" if a.section else "")
            + "</item>"
        )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">\n'
        "<channel>\n"
        f"<title>{_x(publisher.name)}</title>\n"
        f"<link>{_x(publisher.base_url)}/</link>\n"
        f"<description>{_x(publisher.name)}</description>\n"
        f"<language>{publisher.language}-{publisher.region.lower()}</language>\n"
        f"<lastBuildDate>{_rfc822(updated_at)}</lastBuildDate>\n"
        # Wire and lead papers (tier 1) publish all day and set no ttl; the rest ask for 5 minutes.
        + ("" if publisher.tier == 1 else "<ttl>5</ttl>\n")
        + f'<atom:link href="{_x(publisher.rss_url)}" rel="self" type="application/rss+xml"/>\n'
        + (f'<atom:link href="{_x(hub_url)}" rel="hub"/>\n' if hub_url else "")
        + "\n".join(items)
        + ("\n" if items else "")
        + "</channel>\n</rss>\n"
    )
    return body.encode("utf-8")


def render_atom(publisher: Publisher, articles: Sequence[ReplayArticle], updated_at: datetime,
                hub_url: str | None = None) -> bytes:
    """Atom 1.0 feed of ``articles`` (newest first); given a hub, with ``link rel="hub"`` (WebSub §4)."""
    entries = []
    for a in articles:
        entries.append(
            "<entry>"
            f"<id>{_x(a.url)}</id>"
            f"<title>{_x(a.title)}</title>"
            f'<link rel="alternate" type="text/html" href="{_x(a.feed_url)}"/>'
            f"<published>{_iso(a.published_at)}</published>"
            f"<updated>{_iso(a.published_at)}</updated>"
            f"<author><name>{_x(author_of(a))}</name></author>"
            f'<summary type="text">{_x(snippet(a.text))}</summary>'
            + (f'<category term="{_x(a.section)}"/>' if a.section else "")
            + "</entry>"
        )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="{publisher.language}">\n'
        f"<id>{_x(publisher.base_url)}/</id>\n"
        f"<title>{_x(publisher.name)}</title>\n"
        f"<updated>{_iso(updated_at)}</updated>\n"
        f'<link rel="self" type="application/atom+xml" href="{_x(publisher.atom_url)}"/>\n'
        f'<link rel="alternate" type="text/html" href="{_x(publisher.base_url)}/"/>\n'
        + (f'<link rel="hub" href="{_x(hub_url)}"/>\n' if hub_url else "")
        + f"<author><name>{_x(publisher.name)}</name></author>\n"
        + "\n".join(entries)
        + ("\n" if entries else "")
        + "</feed>\n"
    )
    return body.encode("utf-8")


def render_sitemap(articles: Sequence[ReplayArticle], publisher: Publisher | None = None) -> bytes:
    """A Google News sitemap of the released article pages (a plain sitemap without ``publisher``)."""
    def entry(a: ReplayArticle) -> str:
        news = ""
        if publisher is not None:
            news = (
                "<news:news><news:publication>"
                f"<news:name>{_x(publisher.name)}</news:name><news:language>{_x(a.language)}</news:language>"
                f"</news:publication><news:publication_date>{_iso(a.published_at)}</news:publication_date>"
                f"<news:title>{_x(a.title)}</news:title></news:news>"
            )
        return f"<url><loc>{_x(a.url)}</loc><lastmod>{_iso(a.published_at)}</lastmod>{news}</url>\n"

    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">\n'
        + "".join(entry(a) for a in articles) + "</urlset>\n"
    ).encode()


def _json_ld(publisher: Publisher, article: ReplayArticle, author: str, image_url: str) -> str:
    data: dict[str, object] = {
        "@context": "https://schema.org",
        "@type": "NewsArticle",
        "headline": article.title,
        "description": snippet(article.text, 160),
        "image": [image_url],
        "datePublished": _iso(article.published_at),
        "dateModified": _iso(article.published_at),
        "author": [{"@type": "Person", "name": author}],
        "publisher": {"@type": "NewsMediaOrganization", "name": publisher.name, "url": publisher.base_url + "/"},
        "inLanguage": article.language,
        "mainEntityOfPage": {"@type": "WebPage", "@id": article.url},
    }
    if article.section:  # a page names a section only where the corpus gives one (issue 33)
        data["articleSection"] = article.section
    if publisher.paywalled:
        # Google's markup for subscription content: the text is in the page but gated by script.
        data["isAccessibleForFree"] = False
        data["hasPart"] = {"@type": "WebPageElement", "isAccessibleForFree": False, "cssSelector": ".article-body"}
    # "</" must not appear inside a <script> element.
    return json.dumps(data, ensure_ascii=False, indent=1).replace("</", "<\\/")


def render_page(publisher: Publisher, article: ReplayArticle, related: Sequence[ReplayArticle]) -> bytes:
    """A full article page: head metadata, site chrome, the article and boilerplate around it."""
    ui = _ui(article.language)
    author = author_of(article)
    slug = article.slug
    image_url = f"{publisher.base_url}/img/{slug}.jpg"
    description = snippet(article.text, 200)
    menu = "".join(f'<li><a href="/section/{s}/">{_section_label(s)}</a></li>' for s in _MENU)
    paragraphs = "\n".join(f"<p>{_x(p)}</p>" for p in split_paragraphs(article.text))
    related_items = "".join(
        f'<li><a href="{_x(r.url)}">{_x(r.title)}</a></li>' for r in related
    ) or f'<li><a href="/">{_x(ui["home"])}</a></li>'
    section_meta = (f'<meta property="article:section" content="{_x(article.section)}">\n'
                    if article.section else "")
    crumb = (f'<li><a href="/section/{_x(article.section)}/">{_x(_section_label(article.section))}</a></li>'
             if article.section else "")
    paywall = (
        f'<div class="paywall-notice" role="note"><p>{_x(ui["paywall"])}</p>'
        '<a class="button" href="/subscribe/">Subscribe</a></div>\n' if publisher.paywalled else ""
    )
    year = article.published_at.year
    page = f"""<!DOCTYPE html>
<html lang="{article.language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_x(article.title)} | {_x(publisher.name)}</title>
<meta name="description" content="{_x(description)}">
<link rel="canonical" href="{_x(article.url)}">
<link rel="alternate" type="application/rss+xml" title="{_x(publisher.name)}" href="{_x(publisher.rss_url)}">
<meta property="og:type" content="article">
<meta property="og:site_name" content="{_x(publisher.name)}">
<meta property="og:title" content="{_x(article.title)}">
<meta property="og:url" content="{_x(article.url)}">
<meta property="og:description" content="{_x(description)}">
<meta property="og:image" content="{_x(image_url)}">
<meta property="article:published_time" content="{_iso(article.published_at)}">
<meta property="article:modified_time" content="{_iso(article.published_at)}">
{section_meta}<meta name="author" content="{_x(author)}">
<script type="application/ld+json">
{_json_ld(publisher, article, author, image_url)}
</script>
<link rel="stylesheet" href="/static/site.css">
</head>
<body>
<div class="cookie-banner" id="cookie-banner"><p>{_x(ui["cookies"])}</p><button type="button">{_x(ui["accept"])}</button></div>
<header class="site-header">
<a class="logo" href="/">{_x(publisher.name)}</a>
<nav class="site-nav" aria-label="Main"><ul>{menu}</ul></nav>
<form class="search" action="/search/"><input type="search" name="q" placeholder="Search"></form>
</header>
<main>
<nav class="breadcrumbs" aria-label="Breadcrumb"><ol><li><a href="/">{_x(ui["home"])}</a></li>{crumb}<li aria-current="page">{_x(article.title)}</li></ol></nav>
<article class="story">
<header class="story-header">
<h1>{_x(article.title)}</h1>
<p class="byline">{_x(ui["by"])} <a rel="author" href="/authors/{_x(author.lower().replace(" ", "-"))}/">{_x(author)}</a></p>
<time datetime="{_iso(article.published_at)}">{article.published_at.strftime("%d %B %Y, %H:%M UTC")}</time>
</header>
<figure class="lead-image"><img src="{_x(image_url)}" alt="" width="1200" height="675"></figure>
<div class="article-body">
{paragraphs}
</div>
{paywall}</article>
<aside class="related">
<h2>{_x(ui["related"])}</h2>
<ul>{related_items}</ul>
</aside>
<aside class="newsletter">
<h2>{_x(ui["newsletter"])}</h2>
<p>{_x(ui["newsletter_body"])}</p>
<form action="/newsletter/" method="post"><input type="email" name="email" placeholder="you@example.com"><button type="submit">{_x(ui["subscribe"])}</button></form>
</aside>
</main>
<footer class="site-footer">
<ul><li><a href="/about/">About us</a></li><li><a href="/contact/">Contact</a></li><li><a href="/privacy/">Privacy policy</a></li><li><a href="/terms/">Terms of use</a></li><li><a href="{_x(publisher.rss_url)}">RSS</a></li></ul>
<p>&copy; {year} {_x(publisher.name)}. {_x(ui["rights"])}</p>
</footer>
</body>
</html>
"""
    return page.encode("utf-8")
