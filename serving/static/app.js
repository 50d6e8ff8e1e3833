// newsroom reader: renders the shared JSON of /v1/editions, /v1/editions/{e}/{s} and
// /v1/stories/{id}. Every piece of data goes into the DOM through textContent or checked
// attributes, never by parsing data as HTML.
"use strict";

(() => {
  const REFRESH_MS = 60_000;
  const MAX_SOURCES_ON_CARD = 4;

  const $ = (id) => document.getElementById(id);
  const els = {
    dateline: $("dateline"),
    editionSelect: $("edition-select"),
    tabs: $("section-tabs"),
    status: $("status"),
    front: $("front"),
    coverage: $("coverage"),
    asOf: $("as-of"),
    cardTemplate: $("story-card"),
  };

  const state = { editions: [], edition: null, section: null, pageKey: null };

  // ---- small helpers ---------------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Only http(s) links from the data become hrefs (no javascript:, data:, ...).
  function safeUrl(value) {
    if (typeof value !== "string") return null;
    try {
      const url = new URL(value, window.location.href);
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
    } catch {
      return null;
    }
  }

  function externalLink(url, text, className) {
    const href = safeUrl(url);
    const a = el(href ? "a" : "span", className, text);
    if (href) {
      a.href = href;
      a.rel = "noopener noreferrer";
    }
    return a;
  }

  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" });
  const absoluteFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

  function relativeTime(iso) {
    const then = new Date(iso);
    if (Number.isNaN(then.getTime())) return "";
    const seconds = Math.round((then.getTime() - Date.now()) / 1000);
    const abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    if (abs < 3600) return rtf.format(Math.round(seconds / 60), "minute");
    if (abs < 86400) return rtf.format(Math.round(seconds / 3600), "hour");
    if (abs < 86400 * 7) return rtf.format(Math.round(seconds / 86400), "day");
    return absoluteFormat.format(then);
  }

  function timeEl(iso, className) {
    const t = el("time", className, relativeTime(iso));
    const then = new Date(iso);
    if (!Number.isNaN(then.getTime())) {
      t.dateTime = then.toISOString();
      t.title = absoluteFormat.format(then);
    }
    return t;
  }

  function editionLabel(tag) {
    try {
      const name = new Intl.DisplayNames([tag], { type: "language" }).of(tag);
      return name ? `${name}` : tag;
    } catch {
      return tag;
    }
  }

  function sectionLabel(slug) {
    if (slug === "top") return "Top stories";
    return slug.replace(/[-_]+/g, " ").replace(/^./, (c) => c.toUpperCase());
  }

  function setStatus(message) {
    els.status.textContent = message || "";
    els.status.hidden = !message;
  }

  async function getJson(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" }, credentials: "omit" });
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  const enc = encodeURIComponent;

  // ---- routing ---------------------------------------------------------------------------
  // #/                          default edition, top stories
  // #/e/{edition}/{section}     one edition page
  // #/story/{id}                Full Coverage of one story

  function parseHash() {
    const parts = window.location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    if (parts[0] === "story" && parts[1]) return { view: "story", storyId: parts[1] };
    if (parts[0] === "e" && parts[1]) return { view: "page", edition: parts[1], section: parts[2] || null };
    return { view: "page", edition: null, section: null };
  }

  function pageHash(edition, section) {
    return `#/e/${enc(edition)}/${enc(section)}`;
  }

  function storyHash(storyId) {
    return `#/story/${enc(storyId)}`;
  }

  function pickEdition(wanted) {
    const names = state.editions.map((e) => e.edition);
    if (wanted && names.includes(wanted)) return wanted;
    if (state.edition && names.includes(state.edition)) return state.edition;
    const preferred = (navigator.languages || [navigator.language || ""]).map((l) => l.toLowerCase());
    for (const lang of preferred) {
      const exact = names.find((n) => n.toLowerCase() === lang);
      if (exact) return exact;
    }
    for (const lang of preferred) {
      const base = lang.split("-")[0];
      const same = names.find((n) => n.toLowerCase().split("-")[0] === base);
      if (same) return same;
    }
    return names[0] || null;
  }

  function sectionsOf(edition) {
    const found = state.editions.find((e) => e.edition === edition);
    return found ? found.sections : [];
  }

  // ---- chrome: dateline, edition picker, section tabs ------------------------------------

  function renderDateline() {
    els.dateline.textContent = new Intl.DateTimeFormat(undefined, {
      weekday: "long", year: "numeric", month: "long", day: "numeric",
    }).format(new Date());
  }

  function renderEditionPicker() {
    els.editionSelect.replaceChildren(
      ...state.editions.map((e) => {
        const option = el("option", null, editionLabel(e.edition));
        option.value = e.edition;
        return option;
      }),
    );
    els.editionSelect.value = state.edition || "";
    els.editionSelect.disabled = state.editions.length < 2;
  }

  function renderTabs(activeSection) {
    const items = sectionsOf(state.edition).map((section) => {
      const li = el("li");
      const a = el("a", "section-tab", sectionLabel(section));
      a.href = pageHash(state.edition, section);
      if (section === activeSection) a.setAttribute("aria-current", "page");
      li.append(a);
      return li;
    });
    els.tabs.replaceChildren(...items);
  }

  // ---- edition page ----------------------------------------------------------------------

  function sourceItem(source) {
    const li = el("li", source.is_copy ? "source is-copy" : "source");
    li.append(el("span", "publisher", source.publisher));
    if (source.first_seen_at) li.append(timeEl(source.first_seen_at, "source-time"));
    if (source.is_copy) li.append(el("span", "copy-badge", "syndicated copy"));
    li.append(externalLink(source.url, source.title, "source-title"));
    return li;
  }

  function storyCard(story, index) {
    const node = els.cardTemplate.content.firstElementChild.cloneNode(true);
    node.dataset.storyId = story.story_id;
    if (index === 0) node.classList.add("lead");
    const sources = Array.isArray(story.sources) ? story.sources : [];
    const representative = sources[0] || {};

    const image = safeUrl(story.image_url);
    const figure = node.querySelector(".story-image");
    if (image) {
      const img = figure.querySelector("img");
      img.addEventListener("error", () => { figure.hidden = true; node.classList.remove("has-image"); });
      img.src = image;
      const href = safeUrl(representative.url);
      if (href) { figure.href = href; figure.rel = "noopener noreferrer"; }
      figure.tabIndex = -1;
      figure.hidden = false;
      node.classList.add("has-image");
    } else {
      figure.remove();
    }

    const kicker = node.querySelector(".kicker");
    const section = (story.sections || []).find((s) => s !== state.section);
    if (section) kicker.textContent = sectionLabel(section);
    else kicker.remove();

    const headline = node.querySelector(".headline a");
    headline.textContent = story.title;
    const href = safeUrl(representative.url);
    if (href) { headline.href = href; headline.rel = "noopener noreferrer"; }

    const meta = node.querySelector(".meta");
    const count = story.source_count ?? sources.filter((s) => !s.is_copy).length;
    meta.append(el("span", "source-count", `${count} ${count === 1 ? "source" : "sources"}`));
    if (story.updated_at) {
      meta.append(el("span", "dot", "·"), el("span", null, "Updated "), timeEl(story.updated_at));
    }

    const snippet = node.querySelector(".snippet");
    if (story.snippet) snippet.textContent = story.snippet;
    else snippet.remove();

    const list = node.querySelector(".sources");
    list.setAttribute("aria-label", "Sources");
    list.append(...sources.slice(0, MAX_SOURCES_ON_CARD).map(sourceItem));

    const more = node.querySelector(".full-coverage");
    more.href = storyHash(story.story_id);
    const hidden = sources.length - MAX_SOURCES_ON_CARD;
    more.textContent = hidden > 0 ? `Full Coverage · ${hidden} more` : "Full Coverage";
    return node;
  }

  async function showPage(wantedEdition, wantedSection, { quiet = false } = {}) {
    const edition = pickEdition(wantedEdition);
    if (!edition) {
      els.front.hidden = true;
      els.coverage.hidden = true;
      setStatus("No news has been published yet. This page checks again in a minute.");
      return;
    }
    state.edition = edition;
    const sections = sectionsOf(edition);
    const section = wantedSection && sections.includes(wantedSection)
      ? wantedSection
      : (sections.includes("top") ? "top" : sections[0]);
    state.section = section;
    renderEditionPicker();
    renderTabs(section);
    if (!quiet) setStatus("Loading the news…");

    const page = await getJson(`/v1/editions/${enc(edition)}/${enc(section)}`);
    if (!page) {
      setStatus("This page is not available right now.");
      return;
    }
    const key = `${edition}/${section}/${page.version}`;
    if (quiet && key === state.pageKey && !els.front.hidden) return;
    state.pageKey = key;

    const stories = Array.isArray(page.stories) ? page.stories : [];
    const heading = el("h2", "page-heading", sectionLabel(section));
    const grid = el("div", "story-grid");
    grid.append(...stories.map(storyCard));
    els.front.replaceChildren(heading, grid);
    els.coverage.hidden = true;
    els.front.hidden = false;
    document.title = `${sectionLabel(section)} · ${editionLabel(edition)} · newsroom`;
    els.asOf.textContent = page.as_of ? `Page updated ${relativeTime(page.as_of)}.` : "";
    setStatus(stories.length ? "" : "No stories in this section yet.");
  }

  // ---- Full Coverage ---------------------------------------------------------------------

  function timelineItem(source) {
    const li = el("li", source.is_copy ? "timeline-item is-copy" : "timeline-item");
    li.append(timeEl(source.first_seen_at, "timeline-time"));
    const body = el("div", "timeline-body");
    body.append(el("span", "publisher", source.publisher));
    body.append(externalLink(source.url, source.title, "timeline-title"));
    if (source.is_copy) body.append(el("span", "copy-badge", "syndicated copy"));
    li.append(body);
    return li;
  }

  async function showStory(storyId) {
    setStatus("Loading Full Coverage…");
    const story = await getJson(`/v1/stories/${enc(storyId)}`);
    if (!story) {
      els.front.hidden = true;
      els.coverage.hidden = true;
      setStatus("This story is no longer available.");
      return;
    }
    if (story.story_id && story.story_id !== storyId) {
      // A merged story answered with a redirect: show the survivor's address.
      history.replaceState(null, "", storyHash(story.story_id));
    }
    const editions = story.editions || [];
    if (!state.edition && editions.length) state.edition = pickEdition(editions[0]);
    renderTabs(null);

    const sources = Array.isArray(story.sources) ? story.sources : [];
    const back = el("a", "back-link", "← Back to headlines");
    back.href = state.edition ? pageHash(state.edition, state.section || "top") : "#/";

    const header = el("header", "coverage-header");
    header.append(el("p", "kicker", "Full Coverage"));
    header.append(el("h2", "coverage-title", story.title));
    if (story.snippet) header.append(el("p", "coverage-snippet", story.snippet));
    const meta = el("p", "meta");
    const count = story.source_count ?? sources.filter((s) => !s.is_copy).length;
    meta.append(
      el("span", "source-count", `${count} ${count === 1 ? "source" : "sources"}`),
      el("span", "dot", "·"),
      el("span", null, `${sources.length} ${sources.length === 1 ? "article" : "articles"}`),
    );
    if (story.first_seen_at) meta.append(el("span", "dot", "·"), el("span", null, "First seen "), timeEl(story.first_seen_at));
    header.append(meta);

    const image = safeUrl(story.image_url);
    const parts = [back, header];
    if (image) {
      const img = el("img", "coverage-image");
      img.alt = "";
      img.addEventListener("error", () => img.remove());
      img.src = image;
      parts.push(img);
    }
    const timelineHeading = el("h3", "timeline-heading", "Timeline");
    const timeline = el("ol", "timeline");
    timeline.setAttribute("aria-label", "Every article, oldest first");
    timeline.append(...sources.map(timelineItem));
    parts.push(timelineHeading, timeline);

    els.coverage.replaceChildren(...parts);
    els.front.hidden = true;
    els.coverage.hidden = false;
    state.pageKey = null;
    document.title = `${story.title} · Full Coverage · newsroom`;
    setStatus("");
    window.scrollTo(0, 0);
  }

  // ---- wiring ----------------------------------------------------------------------------

  async function loadEditions() {
    state.editions = (await getJson("/v1/editions")) || [];
  }

  async function route({ quiet = false } = {}) {
    const where = parseHash();
    try {
      if (where.view === "story") await showStory(where.storyId);
      else await showPage(where.edition, where.section, { quiet });
    } catch (error) {
      if (!quiet) setStatus("The news could not be loaded. Check your connection and try again.");
      console.error(error);
    }
  }

  els.editionSelect.addEventListener("change", () => {
    const edition = els.editionSelect.value;
    const sections = sectionsOf(edition);
    window.location.hash = pageHash(edition, sections.includes(state.section) ? state.section : "top");
  });
  window.addEventListener("hashchange", () => route());

  async function start() {
    renderDateline();
    try {
      await loadEditions();
    } catch (error) {
      setStatus("The news could not be loaded. Check your connection and try again.");
      console.error(error);
      return;
    }
    await route();
    // Pages are republished every few minutes; pick up a new version while the reader stays.
    setInterval(async () => {
      if (document.hidden || parseHash().view !== "page") return;
      try {
        await loadEditions();
        await route({ quiet: true });
      } catch (error) {
        console.error(error);
      }
    }, REFRESH_MS);
  }

  start();
})();
