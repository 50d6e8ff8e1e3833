"""feedparser's handlers for the extensions feeds carry: Media RSS, iTunes and Creative Commons.

From feedparser 6.0's ``namespaces/mediarss.py``, ``itunes.py`` and ``cc.py``, kept line for line
where the line matters to a field parse_feed reads.
"""

from __future__ import annotations

from transforms.errors import FeedDeclinedError
from transforms.feeds.xml_handlers import FeedHandlers
from transforms.feeds.xml_stack import Attrs


class ExtensionHandlers(FeedHandlers):
    """feedparser's Media RSS, iTunes and Creative Commons element handlers."""

    def _start_media_category(self, attrs: Attrs) -> None:
        attrs.setdefault("scheme", "http://search.yahoo.com/mrss/category_schema")
        self._start_category(attrs)

    def _end_media_keywords(self) -> None:
        self._save_keyword_list("media_keywords", None)

    def _end_itunes_keywords(self) -> None:
        self._save_keyword_list("itunes_keywords", "http://www.itunes.com/")

    def _save_keyword_list(self, element: str, scheme: str | None) -> None:
        value = self.pop(element)
        if value is None:
            raise FeedDeclinedError(f"not replayed: <{element}> with attributes")
        for term in value.split(","):
            if term.strip():
                self._add_tag(term.strip(), scheme, None)

    def _start_tags(self, attrs: Attrs) -> None:
        self.push("tags", 1)

    def _end_tags(self) -> None:
        value = self.pop("tags")
        if value is None:
            raise FeedDeclinedError("not replayed: <tags> out of place")
        for term in value.split(","):
            self._add_tag(term.strip(), None, None)

    def _start_media_group(self, attrs: Attrs) -> None:
        pass

    def _start_media_content(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_content", [])
        context["media_content"].append(attrs)

    def _start_media_thumbnail(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_thumbnail", [])
        self.push("url", 1)
        context["media_thumbnail"].append(attrs)

    def _end_media_thumbnail(self) -> None:
        url = self.pop("url")
        context = self._get_context()
        if url is not None and url.strip():
            if "url" not in context["media_thumbnail"][-1]:
                context["media_thumbnail"][-1]["url"] = url

    def _start_media_credit(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_credit", [])
        context["media_credit"].append(attrs)
        self.push("credit", 1)

    def _end_media_credit(self) -> None:
        credit = self.pop("credit")
        if credit is not None and credit.strip():
            context = self._get_context()
            context["media_credit"][-1]["content"] = credit

    def _start_media_rating(self, attrs: Attrs) -> None:
        context = self._get_context()
        context.setdefault("media_rating", attrs)
        self.push("rating", 1)

    def _end_media_rating(self) -> None:
        rating = self.pop("rating")
        if rating is not None and rating.strip():
            context = self._get_context()
            context["media_rating"]["content"] = rating

    def _start_itunes_image(self, attrs: Attrs) -> None:
        self.push("itunes_image", 0)
        if attrs.get("href"):
            self._get_context()["image"] = dict({"href": attrs.get("href")})
        elif attrs.get("url"):
            self._get_context()["image"] = dict({"href": attrs.get("url")})

    def _start_itunes_category(self, attrs: Attrs) -> None:
        self._add_tag(attrs.get("text"), "http://www.itunes.com/", None)
        self.push("category", 1)

    def _start_itunes_owner(self, attrs: Attrs) -> None:
        self.inpublisher = 1
        self.push("publisher", 0)

    def _end_itunes_owner(self) -> None:
        self.pop("publisher")
        self.inpublisher = 0
        self._sync_author_detail("publisher")

    def _end_itunes_block(self) -> None:
        value = self.pop("itunes_block", 0)
        self._get_context()["itunes_block"] = (value == "yes" or value == "Yes") and 1 or 0

    def _end_itunes_explicit(self) -> None:
        value = self.pop("itunes_explicit", 0)
        self._get_context()["itunes_explicit"] = (None, False, True)[(value == "yes" and 2) or value == "clean" or 0]

    def _start_cc_license(self, attrs: Attrs) -> None:
        context = self._get_context()
        value = attrs.get(self._map_to_standard_prefix("rdf:resource"))
        link = {}
        link["rel"] = "license"
        if value:
            link["href"] = value
        context.setdefault("links", []).append(link)
