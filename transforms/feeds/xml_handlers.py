"""feedparser's element handlers for RSS and Atom (``namespaces/_base.py``), replayed over lxml's tree.

Each method is the handler of the same name in feedparser 6.0, kept line for line where the line
matters to a field parse_feed reads, so that a difference shows in a diff against it.
"""

from __future__ import annotations

from typing import Any

from feedparser.datetimes import _parse_date
from feedparser.mixin import _FeedParserMixin

from transforms.errors import FeedDeclinedError
from transforms.feeds.xml_stack import Attrs, ElementStack, EntryDict, map_content_type

_HTML_TYPES = frozenset(_FeedParserMixin.html_types)


def _enforce_href(attrs: Attrs) -> Attrs:
    href = attrs.get("url", attrs.get("uri", attrs.get("href", None)))
    if href:
        attrs.pop("url", None)
        attrs.pop("uri", None)
        attrs["href"] = href
    return attrs


class FeedHandlers(ElementStack):
    """feedparser's RSS and Atom element handlers (``namespaces/_base.py``)."""

    def _start_rss(self, attrs: Attrs) -> None:
        versionmap = {"0.91": "rss091u", "0.92": "rss092", "0.93": "rss093", "0.94": "rss094"}
        if not self.version or not self.version.startswith("rss"):
            attr_version = attrs.get("version", "")
            version = versionmap.get(attr_version)
            if version:
                self.version = version
            elif attr_version.startswith("2."):
                self.version = "rss20"
            else:
                self.version = "rss"

    def _start_channel(self, attrs: Attrs) -> None:
        self.infeed = 1
        self._cdf_common(attrs)

    def _cdf_common(self, attrs: Attrs) -> None:
        if "lastmod" in attrs:
            self._start_updated({})
            self.stack[-1][-1] = [attrs["lastmod"]]
            self._end_updated()
        if "href" in attrs:
            self._start_link({})
            self.stack[-1][-1] = [attrs["href"]]
            self._end_link()

    def _start_feed(self, attrs: Attrs) -> None:
        self.infeed = 1
        versionmap = {"0.1": "atom01", "0.2": "atom02", "0.3": "atom03"}
        if not self.version:
            self.version = versionmap.get(attrs.get("version"), "atom")  # type: ignore[arg-type]

    def _end_channel(self) -> None:
        self.infeed = 0

    def _start_image(self, attrs: Attrs) -> None:
        context = self._get_context()
        if not self.inentry:
            context.setdefault("image", {})
        self.inimage = 1
        self.title_depth = -1
        self.push("image", 0)

    def _end_image(self) -> None:
        self.pop("image")
        self.inimage = 0

    def _start_textinput(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("textinput", {})
        self.intextinput = 1
        self.title_depth = -1
        self.push("textinput", 0)

    def _end_textinput(self) -> None:
        self.pop("textinput")
        self.intextinput = 0

    def _start_author(self, attrs: Attrs) -> None:
        self.inauthor = 1
        self.push("author", 1)
        context = self._get_context()
        context.setdefault("authors", [])
        context["authors"].append({})

    def _end_author(self) -> None:
        self.pop("author")
        self.inauthor = 0
        self._sync_author_detail()

    def _start_contributor(self, attrs: Attrs) -> None:
        self.incontributor = 1
        context = self._get_context()
        context.setdefault("contributors", [])
        context["contributors"].append({})
        self.push("contributor", 0)

    def _end_contributor(self) -> None:
        self.pop("contributor")
        self.incontributor = 0

    def _start_dc_contributor(self, attrs: Attrs) -> None:
        self.incontributor = 1
        context = self._get_context()
        context.setdefault("contributors", [])
        context["contributors"].append({})
        self.push("name", 0)

    def _end_dc_contributor(self) -> None:
        self._end_name()
        self.incontributor = 0

    def _start_name(self, attrs: Attrs) -> None:
        self.push("name", 0)

    def _end_name(self) -> None:
        value = self.pop("name")
        if not self._save_person("name", value) and self.intextinput:
            context = self._get_context()
            context["name"] = value

    def _save_person(self, key: str, value: str | None) -> bool:
        """A publisher's, an author's or a contributor's ``key``, stored where feedparser's ``_end_name``
        and ``_end_email`` store it; False outside all three."""
        if self.inpublisher:
            self._save_author(key, value, "publisher")
        elif self.inauthor:
            self._save_author(key, value)
        elif self.incontributor:
            self._save_contributor(key, value)
        else:
            return False
        return True

    def _start_width(self, attrs: Attrs) -> None:
        self.push("width", 0)

    def _end_width(self) -> None:
        self._save_dimension("width")

    def _start_height(self, attrs: Attrs) -> None:
        self.push("height", 0)

    def _end_height(self) -> None:
        self._save_dimension("height")

    def _save_dimension(self, key: str) -> None:
        value: Any = self.pop(key)
        try:
            value = int(value)  # type: ignore[arg-type]
        except ValueError:
            value = 0
        except TypeError as e:  # feedparser would raise out of the parse
            raise FeedDeclinedError(f"not replayed: <{key}> outside an image") from e
        if self.inimage:
            self._get_context()[key] = value

    def _start_url(self, attrs: Attrs) -> None:
        self.push("href", 1)

    def _end_url(self) -> None:
        value = self.pop("href")
        if self.inauthor:
            self._save_author("href", value)
        elif self.incontributor:
            self._save_contributor("href", value)

    def _start_email(self, attrs: Attrs) -> None:
        self.push("email", 0)

    def _end_email(self) -> None:
        self._save_person("email", self.pop("email"))

    def _start_subtitle(self, attrs: Attrs) -> None:
        self.push_content("subtitle", attrs, "text/plain", 1)

    def _end_subtitle(self) -> None:
        self.pop_content("subtitle")

    def _start_rights(self, attrs: Attrs) -> None:
        self.push_content("rights", attrs, "text/plain", 1)

    def _end_rights(self) -> None:
        self.pop_content("rights")

    def _start_item(self, attrs: Attrs) -> None:
        self.entries.append(EntryDict())
        self.push("item", 0)
        self.inentry = 1
        self.guidislink = False
        self.title_depth = -1
        about = attrs.get(self._map_to_standard_prefix("rdf:about"))
        if about:
            self._get_context()["id"] = about
        self._cdf_common(attrs)

    def _map_to_standard_prefix(self, name: str) -> str:
        prefix, colon, suffix = name.partition(":")
        if colon:
            return self.namespacemap.get(prefix, prefix) + ":" + suffix
        return name

    def _end_item(self) -> None:
        self.pop("item")
        self.inentry = 0
        self.has_content = 0

    def _start_language(self, attrs: Attrs) -> None:
        self.push("language", 1)

    def _end_language(self) -> None:
        self.lang = self.pop("language")

    def _start_webmaster(self, attrs: Attrs) -> None:
        self.push("publisher", 1)

    def _end_webmaster(self) -> None:
        self.pop("publisher")
        self._sync_author_detail("publisher")

    def _start_published(self, attrs: Attrs) -> None:
        self.push("published", 1)

    def _end_published(self) -> None:
        self._save_date("published")

    def _start_updated(self, attrs: Attrs) -> None:
        self.push("updated", 1)

    def _end_updated(self) -> None:
        self._save_date("updated")

    def _start_created(self, attrs: Attrs) -> None:
        self.push("created", 1)

    def _end_created(self) -> None:
        self._save_date("created")

    def _start_expirationdate(self, attrs: Attrs) -> None:
        self.push("expired", 1)

    def _end_expirationdate(self) -> None:
        self._save_date("expired")

    def _save_date(self, element: str) -> None:
        """feedparser's date handlers: the text is stored as read, its parse as ``{element}_parsed``."""
        self._save(f"{element}_parsed", _parse_date(self.pop(element)), overwrite=True)

    def _start_category(self, attrs: Attrs) -> None:
        term = attrs.get("term")
        scheme = attrs.get("scheme", attrs.get("domain"))
        label = attrs.get("label")
        self._add_tag(term, scheme, label)
        self.push("category", 1)

    def _end_category(self) -> None:
        value = self.pop("category")
        if not value:
            return
        context = self._get_context()
        tags = context["tags"]
        if value and len(tags) and not tags[-1]["term"]:
            tags[-1]["term"] = value
        else:
            self._add_tag(value, None, None)

    def _start_cloud(self, attrs: Attrs) -> None:
        self._get_context()["cloud"] = dict(attrs)

    def _start_link(self, attrs: Attrs) -> None:
        attrs.setdefault("rel", "alternate")
        if attrs["rel"] == "self":
            attrs.setdefault("type", "application/atom+xml")
        else:
            attrs.setdefault("type", "text/html")
        context = self._get_context()
        attrs = _enforce_href(attrs)
        if "href" in attrs:
            attrs["href"] = self.resolve_uri(attrs["href"])
        expecting_text = self.infeed or self.inentry or self.insource
        context.setdefault("links", [])
        if not (self.inentry and self.inimage):
            context["links"].append(dict(attrs))
        if "href" in attrs:
            if attrs.get("rel") == "alternate" and map_content_type(attrs.get("type")) in _HTML_TYPES:
                context["link"] = attrs["href"]
        else:
            self.push("link", expecting_text)

    def _end_link(self) -> None:
        self.pop("link")

    def _start_guid(self, attrs: Attrs) -> None:
        self.guidislink = attrs.get("ispermalink", "true") == "true"
        self.push("id", 1)

    def _end_guid(self) -> None:
        value = self.pop("id")
        self._save("guidislink", self.guidislink and "link" not in self._get_context())
        if self.guidislink:
            self._save("link", value)

    def _start_title(self, attrs: Attrs) -> None:
        self.push_content("title", attrs, "text/plain", self.infeed or self.inentry or self.insource)

    def _end_title(self) -> None:
        value = self.pop_content("title")
        if not value:
            return
        self.title_depth = self.depth

    def _end_media_title(self) -> None:
        title_depth = self.title_depth
        self._end_title()
        self.title_depth = title_depth

    def _start_description(self, attrs: Attrs) -> None:
        context = self._get_context()
        if "summary" in context and not self.has_content:
            self.summary_key = "content"
            self._start_content(attrs)
        else:
            self.push_content("description", attrs, "text/html", self.infeed or self.inentry or self.insource)

    def _start_abstract(self, attrs: Attrs) -> None:
        self.push_content("description", attrs, "text/plain", self.infeed or self.inentry or self.insource)

    def _end_description(self) -> None:
        if self.summary_key == "content":
            self._end_content()
        else:
            self.pop_content("description")
        self.summary_key = None

    def _start_info(self, attrs: Attrs) -> None:
        self.push_content("info", attrs, "text/plain", 1)

    def _end_info(self) -> None:
        self.pop_content("info")

    def _start_generator(self, attrs: Attrs) -> None:
        if attrs:
            attrs = _enforce_href(attrs)
            if "href" in attrs:
                attrs["href"] = self.resolve_uri(attrs["href"])
        self._get_context()["generator_detail"] = dict(attrs)
        self.push("generator", 1)

    def _end_generator(self) -> None:
        value = self.pop("generator")
        context = self._get_context()
        if "generator_detail" in context:
            context["generator_detail"]["name"] = value

    def _start_summary(self, attrs: Attrs) -> None:
        context = self._get_context()
        if "summary" in context and not self.has_content:
            self.summary_key = "content"
            self._start_content(attrs)
        else:
            self.summary_key = "summary"
            self.push_content(self.summary_key, attrs, "text/plain", 1)

    def _end_summary(self) -> None:
        if self.summary_key == "content":
            self._end_content()
        else:
            self.pop_content(self.summary_key or "summary")
        self.summary_key = None

    def _start_enclosure(self, attrs: Attrs) -> None:
        attrs = _enforce_href(attrs)
        context = self._get_context()
        attrs["rel"] = "enclosure"
        context.setdefault("links", []).append(dict(attrs))

    def _start_source(self, attrs: Attrs) -> None:
        if "url" in attrs:
            self.sourcedata["href"] = attrs["url"]
        self.push("source", 1)
        self.insource = 1
        self.title_depth = -1

    def _end_source(self) -> None:
        self.insource = 0
        value = self.pop("source")
        if value:
            self.sourcedata["title"] = value
        self._get_context()["source"] = dict(self.sourcedata)
        self.sourcedata.clear()

    def _start_content(self, attrs: Attrs) -> None:
        self.has_content = 1
        self.push_content("content", attrs, "text/plain", 1)
        src = attrs.get("src")
        if src:
            self.contentparams["src"] = src
        self.push("content", 1)  # pushed twice, as feedparser does; the first stays on the stack

    def _start_content_encoded(self, attrs: Attrs) -> None:
        self.has_content = 1
        self.push_content("content", attrs, "text/html", 1)

    def _end_content(self) -> None:
        copy_to_summary = map_content_type(self.contentparams.get("type")) in ({"text/plain"} | _HTML_TYPES)
        value = self.pop_content("content")
        if copy_to_summary:
            self._save("summary", value)
