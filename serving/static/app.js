// newsroom reader: renders the shared JSON of /v1/editions, /v1/editions/{e}/{s} and
// /v1/stories/{id}, and the personal JSON of /v1/feed (For you). Every piece of data goes into
// the DOM through textContent or checked attributes, never by parsing data as HTML.
//
// Clicks: shared pages hold the publishers' own URLs (the same bytes for everyone). Following a
// link asks POST /v1/click-token (with the session, when signed in) for a signed /r/{token} and
// goes there (the click is logged, then the server redirects to the publisher). For-you cards
// also carry anonymous click URLs, used when minting fails or nobody is signed in.
//
// Live updates (issue 30): the page holds one Server-Sent Events stream per edition (read with
// fetch, so a signed-in reader's stream carries the session as a bearer token, never in a URL).
// It announces new page versions ("New stories · Show them") and, to a signed-in reader, Breaking
// stories (opted in) and stories matching a followed keyword; on a dropped connection it
// reconnects with the last event id, so nothing is shown twice.
//
// Words, dates and relative times follow the edition's language (issue 21): every string the
// page shows lives in /static/i18n/{language}.json, one file per language (English is the
// fallback for a missing file or key), so adding a language is adding one file. Section slugs
// from the API stay canonical; only their display names are translated.
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
    account: $("account"),
    pill: $("new-stories"),
    alerts: $("alerts"),
    searchForm: $("search-form"),
    searchInput: $("search-input"),
    feedLink: $("feed-link"),
  };

  const SESSION_KEY = "newsroom.session";
  const FALLBACK_LANGUAGE = "en";
  const LIVE_RETRY_MS = 3000;
  const MAX_ALERTS = 4;

  const state = {
    editions: [], edition: null, section: null, pageKey: null, shownVersion: null, session: loadSession(),
    profile: null,
  };

  function loadSession() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(SESSION_KEY) || "null");
      if (saved && saved.token && saved.expires_at * 1000 > Date.now()) return saved;
    } catch { /* a damaged entry is the same as none */ }
    return null;
  }

  // ---- language: strings, plurals and date formats of the edition ------------------------

  const catalogs = new Map();  // language -> its file (or null when there is none)
  const i18n = { language: FALLBACK_LANGUAGE, locale: FALLBACK_LANGUAGE, catalog: null, base: null, plurals: null };
  let rtf = new Intl.RelativeTimeFormat(FALLBACK_LANGUAGE, { numeric: "auto", style: "short" });
  let absoluteFormat = new Intl.DateTimeFormat(FALLBACK_LANGUAGE, { dateStyle: "medium", timeStyle: "short" });

  async function loadCatalog(language) {
    if (!catalogs.has(language)) {
      let catalog = null;
      try {
        const response = await fetch(`/static/i18n/${encodeURIComponent(language)}.json`, { credentials: "omit" });
        if (response.ok) catalog = await response.json();
      } catch (error) {
        console.error(error);
      }
      catalogs.set(language, catalog);
    }
    return catalogs.get(language);
  }

  function languageOf(edition) {
    return String(edition || FALLBACK_LANGUAGE).split(/[-_]/)[0].toLowerCase() || FALLBACK_LANGUAGE;
  }

  // Switch the page to an edition's language: <html lang>, strings, number/date formats.
  async function useLanguage(edition) {
    const locale = edition || FALLBACK_LANGUAGE;
    if (i18n.catalog && i18n.locale === locale) return;
    const base = await loadCatalog(FALLBACK_LANGUAGE);
    const language = languageOf(locale);
    const catalog = language === FALLBACK_LANGUAGE ? base : await loadCatalog(language);
    let tag = locale;
    try { tag = Intl.getCanonicalLocales(locale)[0]; } catch { tag = catalog ? language : FALLBACK_LANGUAGE; }
    Object.assign(i18n, {
      language: catalog ? language : FALLBACK_LANGUAGE, locale: tag, catalog: catalog || base, base,
      plurals: new Intl.PluralRules(tag),
    });
    rtf = new Intl.RelativeTimeFormat(tag, { numeric: "auto", style: "short" });
    absoluteFormat = new Intl.DateTimeFormat(tag, { dateStyle: "medium", timeStyle: "short" });
    document.documentElement.lang = catalog ? tag : FALLBACK_LANGUAGE;
    translateStatic();
    renderDateline();
    renderAccount();
  }

  function lookup(group, key) {
    const own = i18n.catalog && i18n.catalog[group] ? i18n.catalog[group][key] : undefined;
    if (own !== undefined) return own;
    return i18n.base && i18n.base[group] ? i18n.base[group][key] : undefined;
  }

  // t("source_count", { count: 3 }) -> "3 sources"; a plural entry picks its form by the
  // language's own rules (Chinese and Malay have one form, English two).
  function t(key, params = {}) {
    let text = lookup("strings", key);
    if (text && typeof text === "object") {
      const form = i18n.plurals ? i18n.plurals.select(Number(params.count)) : "other";
      text = text[form] ?? text.other;
    }
    if (typeof text !== "string") return key;
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
  }

  // A string with a DOM node in it (a <time>): "Updated {time}" or "{time}更新".
  function tNodes(key, nodes) {
    return t(key).split(/(\{\w+\})/).filter(Boolean).map((part) => {
      const name = part.match(/^\{(\w+)\}$/);
      return name && nodes[name[1]] ? nodes[name[1]] : document.createTextNode(part);
    });
  }

  function translateStatic() {
    for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
    for (const node of document.querySelectorAll("[data-i18n-aria-label]")) {
      node.setAttribute("aria-label", t(node.dataset.i18nAriaLabel));
    }
    for (const node of document.querySelectorAll("[data-i18n-placeholder]")) {
      node.setAttribute("placeholder", t(node.dataset.i18nPlaceholder));
    }
    for (const node of document.querySelectorAll("template")) {
      for (const inner of node.content.querySelectorAll("[data-i18n]")) inner.textContent = t(inner.dataset.i18n);
    }
  }

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

  function relativeTime(iso) {
    const then = new Date(iso);
    if (Number.isNaN(then.getTime())) return "";
    const seconds = Math.round((then.getTime() - Date.now()) / 1000);
    const abs = Math.abs(seconds);
    if (abs < 45) return t("just_now");
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

  // Canonical slugs get the language's display name; a feed's own slug is shown as it reads.
  function sectionLabel(slug) {
    const name = lookup("sections", slug);
    if (typeof name === "string") return name;
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

  // Personal calls send the session as a bearer token; shared calls above never do.
  async function personal(method, path, body) {
    const headers = { Accept: "application/json" };
    if (state.session) headers.Authorization = `Bearer ${state.session.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method, headers, credentials: "omit", body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) { signOut(); throw new Error("signed out"); }
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  const enc = encodeURIComponent;

  // ---- routing ---------------------------------------------------------------------------
  // #/                          default edition, top stories
  // #/e/{edition}/{section}     one edition page
  // #/story/{id}                Full Coverage of one story
  // #/search?q=&section=&publisher=&language=   search over the live window

  function parseHash() {
    // A hand-edited or truncated link ("#/story/%E2") must not throw: unreadable parts are dropped.
    const decode = (part) => { try { return decodeURIComponent(part); } catch (error) { return ""; } };
    const raw = window.location.hash.replace(/^#\/?/, "");
    if (raw.startsWith("search")) {
      const params = new URLSearchParams(raw.slice(raw.indexOf("?") + 1 || raw.length));
      return { view: "search", q: params.get("q") || "", section: params.get("section"),
               publisher: params.get("publisher"), language: params.get("language") };
    }
    const parts = raw.split("/").map(decode);
    if (parts[0] === "story" && parts[1]) return { view: "story", storyId: parts[1] };
    if (parts[0] === "foryou") return { view: "foryou", edition: parts[1] || null };
    if (parts[0] === "e" && parts[1]) return { view: "page", edition: parts[1], section: parts[2] || null };
    return { view: "page", edition: null, section: null };
  }

  function pageHash(edition, section) {
    return `#/e/${enc(edition)}/${enc(section)}`;
  }

  function forYouHash(edition) {
    return `#/foryou/${enc(edition || "")}`;
  }

  function storyHash(storyId) {
    return `#/story/${enc(storyId)}`;
  }

  function searchHash(q, filters = {}) {
    const params = new URLSearchParams({ q });
    for (const [name, value] of Object.entries(filters)) if (value) params.set(name, value);
    return `#/search?${params.toString()}`;
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
    els.dateline.textContent = new Intl.DateTimeFormat(i18n.locale, {
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
    const li = el("li");
    const forYou = el("a", "section-tab for-you", t("for_you"));
    forYou.href = forYouHash(state.edition);
    if (activeSection === "@foryou") forYou.setAttribute("aria-current", "page");
    li.append(forYou);
    items.splice(Math.min(1, items.length), 0, li);
    els.tabs.replaceChildren(...items);
  }

  // ---- account (demo sign-in: a signed session token from POST /v1/session) ----------------

  function renderAccount() {
    if (state.session) {
      const who = el("span", "who", t("signed_in_as", { reader: state.session.reader }));
      const out = el("button", null, t("sign_out"));
      out.type = "button";
      out.id = "sign-out";
      out.addEventListener("click", () => { signOut(); route(); });
      els.account.replaceChildren(who, out);
      return;
    }
    const input = el("input");
    input.id = "reader-name";
    input.placeholder = t("your_name");
    input.setAttribute("aria-label", t("reader_name"));
    input.autocomplete = "username";
    const go = el("button", "primary", t("sign_in"));
    go.type = "button";
    go.id = "sign-in";
    const submit = async () => {
      const reader = input.value.trim();
      if (!reader) return;
      try {
        state.session = await personal("POST", "/v1/session", { reader });
        window.localStorage.setItem(SESSION_KEY, JSON.stringify(state.session));
      } catch (error) {
        console.error(error);
        return;
      }
      renderAccount();
      route();
    };
    go.addEventListener("click", submit);
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") submit(); });
    els.account.replaceChildren(input, go);
  }

  function signOut() {
    state.session = null;
    state.profile = null;
    window.localStorage.removeItem(SESSION_KEY);
    renderAccount();
  }

  // ---- edition page ----------------------------------------------------------------------

  function trackClicks(a, source, surface, position) {
    if (a.tagName !== "A") return a;
    a.dataset.articleId = source.article_id || "";
    a.dataset.surface = surface;
    a.dataset.position = String(position);
    if (typeof source.click_url === "string" && source.click_url.startsWith("/r/")) a.dataset.clickUrl = source.click_url;
    return a;
  }

  function sourceItem(source, ctx) {
    const li = el("li", source.is_copy ? "source is-copy" : "source");
    li.dataset.publisherId = source.publisher_id || "";
    li.append(el("span", "publisher", source.publisher));
    if (source.first_seen_at) li.append(timeEl(source.first_seen_at, "source-time"));
    if (source.is_copy) li.append(el("span", "copy-badge", t("syndicated_copy")));
    if (source.is_opinion) li.append(el("span", "opinion-badge", t("opinion")));
    if (ctx.controls && source.publisher_id) {
      const hide = el("button", "hide-source", t("hide"));
      hide.type = "button";
      hide.setAttribute("aria-label", t("hide_source", { publisher: source.publisher }));
      hide.addEventListener("click", () => hideSource(source.publisher_id));
      li.append(hide);
    }
    li.append(trackClicks(externalLink(source.url, source.title, "source-title"), source, ctx.surface, ctx.position));
    return li;
  }

  function storyCard(story, index, options = {}) {
    const ctx = {
      surface: options.surface || (state.section === "top" ? "top" : "section"),
      position: index,
      controls: Boolean(options.controls),
    };
    const node = els.cardTemplate.content.firstElementChild.cloneNode(true);
    node.dataset.storyId = story.story_id;
    if (typeof story.language === "string" && story.language) node.lang = story.language;
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
    if (href) { headline.href = href; headline.rel = "noopener noreferrer"; trackClicks(headline, representative, ctx.surface, index); }

    const reason = node.querySelector(".reason");
    if (story.reason && options.controls) { reason.textContent = story.reason; reason.hidden = false; } else reason.remove();

    const meta = node.querySelector(".meta");
    const count = story.source_count ?? sources.filter((s) => !s.is_copy).length;
    meta.append(el("span", "source-count", t("source_count", { count })));
    if (story.updated_at) {
      const updated = el("span", "updated");
      updated.append(...tNodes("updated", { time: timeEl(story.updated_at) }));
      meta.append(el("span", "dot", "·"), updated);
    }

    const snippet = node.querySelector(".snippet");
    if (story.snippet) snippet.textContent = story.snippet;
    else snippet.remove();

    const list = node.querySelector(".sources");
    list.setAttribute("aria-label", t("sources_label"));
    list.append(...sources.slice(0, MAX_SOURCES_ON_CARD).map((s) => sourceItem(s, ctx)));

    if (options.why && story.score_parts) list.after(whyPanel(story, options.why));

    const more = node.querySelector(".full-coverage");
    if (story.has_coverage === false) {
      more.remove();  // found by search, listed on no page: its Full Coverage does not open
      return node;
    }
    more.href = storyHash(story.story_id);
    const hidden = sources.length - MAX_SOURCES_ON_CARD;
    more.textContent = hidden > 0 ? t("full_coverage_more", { count: hidden }) : t("full_coverage");
    if (options.controls && story.topic) {
      const following = Boolean(state.profile && state.profile.follows.topic.includes(story.topic));
      const follow = el("button", "follow-topic",
        t(following ? "following_topic" : "follow_topic", { topic: sectionLabel(story.topic) }));
      follow.type = "button";
      follow.dataset.topic = story.topic;
      follow.setAttribute("aria-pressed", following ? "true" : "false");
      follow.addEventListener("click", () => toggleFollow(story.topic, following));
      const controls = el("div", "story-controls");
      more.replaceWith(controls);
      controls.append(more, follow);
    }
    return node;
  }

  // ---- "Why this story?" (issue 18) -----------------------------------------------------------
  // The card's score_parts and the page's ranking weights (docs/snapshots.md), turned back into
  // what they stand for: the publishers' combined authority behind coverage, the age of the latest
  // report behind freshness, the region's share, Breaking, the publisher cap, and how the parts
  // multiply into the score. Nothing is fetched: the page already holds every number.

  function num(value, fallback) {
    const n = Number(value);
    return Number.isFinite(n) ? n : fallback;
  }

  function fixed(value, digits = 2) {
    return new Intl.NumberFormat(i18n.locale, { minimumFractionDigits: digits, maximumFractionDigits: digits })
      .format(value);
  }

  function percent(value) {
    return new Intl.NumberFormat(i18n.locale, { style: "percent", maximumFractionDigits: 0 }).format(value);
  }

  function agoText(hours) {
    const minutes = Math.round(hours * 60);
    if (minutes < 90) return rtf.format(-minutes, "minute");
    if (hours < 36) return rtf.format(-Math.round(hours), "hour");
    return rtf.format(-Math.round(hours / 24), "day");
  }

  function publisherName(story, publisherId) {
    const found = (story.sources || []).find((s) => s.publisher_id === publisherId);
    return found && found.publisher ? found.publisher : publisherId;
  }

  // The numbers the view shows, from the story and the page alone (a browser test checks each
  // against the snapshot).
  function whyNumbers(story, ranking) {
    const parts = story.score_parts || {};
    const w = {
      coverage: num(ranking.coverage_weight, 1), velocity: num(ranking.velocity_weight, 0.5),
      freshness: num(ranking.freshness_weight, 1), regional: num(ranking.regional_weight, 0.5),
    };
    const coverage = num(parts.coverage, 0);
    const velocity = num(parts.velocity, 0);
    const freshness = num(parts.freshness, 0);
    const share = num(parts.regional_share, 0);
    const halfLife = num(ranking.freshness_half_life_hours, 4);
    const factor = 1 - w.regional + w.regional * share;
    const score = num(story.score, 0);
    return {
      w, coverage, velocity, freshness, share, halfLife, factor, score,
      authority: Math.expm1(coverage),
      ageHours: freshness > 0 ? -Math.log2(freshness) * halfLife : null,
      baseNow: (w.coverage * coverage + w.velocity * velocity) * Math.pow(freshness, w.freshness),
      baseAveraged: factor ? score / factor : 0,
      cycles: num(ranking.smoothing_cycles, 5),
      windowHours: num(ranking.coverage_window_hours, 6),
      cap: num(ranking.publisher_daily_share_cap, 0.1),
    };
  }

  function whyRow(part, label, value, note) {
    const row = el("div", "why-row");
    row.dataset.part = part;
    row.append(el("dt", "why-label", label));
    const dd = el("dd", "why-detail");
    if (value !== null) dd.append(el("span", "why-value", value));
    dd.append(el("span", "why-note", note));
    row.append(dd);
    return row;
  }

  function whyBody(story, why) {
    const n = whyNumbers(story, why.ranking);
    const region = (why.edition || "").split("-").pop();
    const body = el("div", "why-body");
    body.append(el("p", "why-rank", t("why_rank", {
      rank: story.rank ?? "?", page: sectionLabel(why.section), score: fixed(n.score, 2),
    })));
    const list = el("dl", "why-parts");
    list.append(
      whyRow("coverage", t("why_coverage"), fixed(n.coverage), t("why_coverage_note", { hours: n.windowHours })),
      whyRow("authority", t("why_authority"), fixed(n.authority), t("why_authority_note")),
      whyRow("velocity", t("why_velocity"), fixed(n.velocity), t("why_velocity_note")),
      whyRow("freshness", t("why_freshness"), fixed(n.freshness),
        n.ageHours === null ? t("why_freshness_old", { hours: n.halfLife })
          : t("why_freshness_note", { age: agoText(n.ageHours), hours: n.halfLife })),
      whyRow("region", t("why_region"), percent(n.share), t("why_region_note", { region })),
    );
    const breaking = story.is_breaking
      ? whyRow("breaking", t("why_breaking"), null, t("why_breaking_yes", { time: relativeTime(story.breaking_since) }))
      : whyRow("breaking", t("why_breaking"), null, t("why_breaking_no"));
    list.append(breaking);
    const choice = story.representative_choice;
    if (choice) {
      const aside = Array.isArray(choice.stepped_aside) ? choice.stepped_aside : [];
      list.append(whyRow("cap", t("why_cap"), null, aside.length
        ? t("why_cap_stepped_aside", { publishers: aside.map((p) => publisherName(story, p)).join(", "), cap: percent(n.cap) })
        : t("why_cap_none", { cap: percent(n.cap) })));
      const ties = Array.isArray(choice.near_ties) ? choice.near_ties.length : 0;
      list.append(whyRow("headline", t("why_headline"), null,
        t("why_headline_note", { count: num(choice.candidates, 0) })
        + (ties > 1 ? ` ${t("why_near_ties", { count: ties })}` : "")));
    }
    body.append(list);
    const formula = el("p", "why-formula");
    formula.dataset.part = "formula";
    formula.textContent = t(story.is_breaking ? "why_formula_breaking" : "why_formula", {
      wc: fixed(n.w.coverage, 1), wv: fixed(n.w.velocity, 1), wf: fixed(n.w.freshness, 1),
      now: fixed(n.baseNow), avg: fixed(n.baseAveraged), cycles: n.cycles, factor: fixed(n.factor), score: fixed(n.score),
    });
    body.append(el("h4", "why-subheading", t("why_formula_heading")), formula);
    return body;
  }

  function whyPanel(story, why) {
    const details = el("details", "why");
    const summary = el("summary", "why-toggle", t("why_this_story"));
    details.append(summary);
    details.addEventListener("toggle", () => {
      if (details.open && !details.querySelector(".why-body")) details.append(whyBody(story, why));
    });
    return details;
  }

  async function showPage(wantedEdition, wantedSection, { quiet = false } = {}) {
    const edition = pickEdition(wantedEdition);
    await useLanguage(edition);
    if (!edition) {
      els.front.hidden = true;
      els.coverage.hidden = true;
      setStatus(t("no_news_yet"));
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
    if (!quiet) setStatus(t("loading"));

    const page = await getJson(`/v1/editions/${enc(edition)}/${enc(section)}`);
    if (!page) {
      setStatus(t("page_unavailable"));
      return;
    }
    const key = `${edition}/${section}/${page.version}`;
    setFeedLink(`/v1/editions/${enc(edition)}/${enc(section)}/feed.atom`);
    if (quiet && key === state.pageKey && !els.front.hidden) return;
    state.pageKey = key;
    state.shownVersion = { edition, section, version: page.version };
    els.pill.hidden = true;

    const stories = Array.isArray(page.stories) ? page.stories : [];
    const heading = el("h2", "page-heading", sectionLabel(section));
    const grid = el("div", "story-grid");
    const why = { ranking: page.ranking || {}, asOf: page.as_of, section, edition };
    grid.append(...stories.map((story, i) => storyCard(story, i, { why })));
    els.front.replaceChildren(heading, grid);
    els.coverage.hidden = true;
    els.front.hidden = false;
    document.title = `${sectionLabel(section)} · ${editionLabel(edition)} · newsroom`;
    els.asOf.textContent = page.as_of ? t("page_updated", { time: relativeTime(page.as_of) }) : "";
    setStatus(stories.length ? "" : t("no_stories_in_section"));
  }

  // ---- For you ---------------------------------------------------------------------------

  async function showForYou(wantedEdition) {
    const edition = pickEdition(wantedEdition);
    await useLanguage(edition);
    state.edition = edition;
    state.shownVersion = null;
    els.pill.hidden = true;
    setFeedLink(null);
    renderEditionPicker();
    renderTabs("@foryou");
    els.coverage.hidden = true;
    const heading = el("h2", "page-heading", t("for_you"));
    if (!state.session) {
      const notice = el("p", "notice", t("sign_in_for_you"));
      els.front.replaceChildren(heading, notice);
      els.front.hidden = false;
      setStatus("");
      return;
    }
    setStatus(t("loading_your_stories"));
    const [feed, profile] = await Promise.all([
      personal("GET", `/v1/feed?edition=${enc(edition)}`),
      personal("GET", "/v1/me"),
    ]);
    state.profile = profile;
    const parts = [heading];
    if (feed.mode === "top_stories_fallback") {
      parts.push(el("p", "notice", t("personalisation_unavailable")));
    } else if (feed.mode === "top_stories") {
      parts.push(el("p", "notice", t("follow_to_learn")));
    }
    const grid = el("div", "story-grid for-you-grid");
    grid.append(...feed.stories.map((story, i) => storyCard(story, i, { surface: "for_you", controls: true })));
    parts.push(readerTools(profile), grid);
    els.front.replaceChildren(...parts);
    els.front.hidden = false;
    state.pageKey = null;
    document.title = `${t("for_you")} · ${editionLabel(edition)} · newsroom`;
    setStatus(feed.stories.length ? "" : t("nothing_new"));
    loadSources();
  }

  // Keywords followed, Breaking alerts, and the reader's own sources (issue 30).
  function readerTools(profile) {
    const tools = el("section", "reader-tools");
    const keywords = el("div", "your-keywords");
    keywords.append(el("h3", null, t("your_keywords")));
    const followed = (profile.follows && profile.follows.keyword) || [];
    if (followed.length) {
      const list = el("ul", "keyword-list");
      list.append(...followed.map((keyword) => {
        const li = el("li", "keyword");
        li.dataset.keyword = keyword;
        const a = el("a", "keyword-link", keyword);
        a.href = searchHash(keyword);
        const remove = el("button", "unfollow-keyword", "×");
        remove.type = "button";
        remove.setAttribute("aria-label", t("unfollow_keyword", { keyword }));
        remove.addEventListener("click", async () => {
          try {
            await personal("DELETE", `/v1/me/keywords?q=${enc(keyword)}`);
            await showForYou(state.edition);
          } catch (error) { console.error(error); }
        });
        li.append(a, remove);
        return li;
      }));
      keywords.append(list);
    } else {
      keywords.append(el("p", "note", t("no_keywords")));
    }
    const alerts = el("label", "breaking-toggle");
    const box = el("input");
    box.type = "checkbox";
    box.id = "breaking-alerts";
    box.checked = Boolean(profile.breaking_alerts);
    box.addEventListener("change", async () => {
      try {
        state.profile = await personal(box.checked ? "PUT" : "DELETE", "/v1/me/alerts/breaking");
      } catch (error) { console.error(error); box.checked = !box.checked; }
    });
    alerts.append(box, document.createTextNode(` ${t("breaking_alerts")}`));
    keywords.append(alerts);

    const sources = el("div", "your-sources");
    sources.append(el("h3", null, t("your_sources")));
    const form = el("form", "source-form");
    form.id = "source-form";
    const input = el("input");
    input.id = "source-url";
    input.type = "text";
    input.inputMode = "url";
    input.required = true;
    input.maxLength = 2048;
    input.placeholder = t("source_url_example");
    input.setAttribute("aria-label", t("source_url"));
    const suggest = el("button", "primary", t("suggest_source"));
    suggest.type = "submit";
    const message = el("p", "source-message");
    message.id = "source-message";
    message.setAttribute("role", "status");
    form.append(input, suggest);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      message.textContent = t("checking_source");
      const response = await fetch("/v1/subscriptions", {
        method: "POST", credentials: "omit",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${state.session.token}` },
        body: JSON.stringify({ url: input.value.trim() }),
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        message.textContent = t("source_pending", { title: answer.title || answer.feed_url });
        input.value = "";
        loadSources();
      } else {
        message.textContent = typeof answer.detail === "string" ? answer.detail : t("source_refused");
      }
    });
    const list = el("ul", "source-list");
    list.id = "source-list";
    sources.append(form, message, list);
    tools.append(keywords, sources);
    return tools;
  }

  async function loadSources() {
    const list = $("source-list");
    if (!list || !state.session) return;
    try {
      const answer = await personal("GET", "/v1/subscriptions");
      list.replaceChildren(...answer.sources.map((source) => {
        const li = el("li", `pending-source status-${source.status}`);
        li.dataset.feedId = source.feed_id;
        li.append(el("span", "source-name", source.title || source.feed_url),
          el("span", "source-status", t(`source_status_${source.status}`)));
        if (Array.isArray(source.items) && source.items.length) {
          const items = el("ul", "source-items");
          items.append(...source.items.slice(0, 5).map((item) => {
            const row = el("li");
            row.append(externalLink(item.link, item.title || item.link, "source-item"));
            return row;
          }));
          li.append(items);
        }
        return li;
      }));
    } catch (error) {
      console.error(error);
    }
  }

  // ---- search (issue 30) ---------------------------------------------------------------------

  const FACETS = ["section", "publisher", "language"];

  async function showSearch(where) {
    const edition = pickEdition(null);
    await useLanguage(edition);
    state.edition = edition;
    state.shownVersion = null;
    els.pill.hidden = true;
    renderEditionPicker();
    renderTabs(null);
    els.coverage.hidden = true;
    els.searchInput.value = where.q;
    const filters = { section: where.section, publisher: where.publisher, language: where.language };
    const heading = el("h2", "page-heading", t("search_results", { query: where.q }));
    document.title = `${where.q} · ${t("search")} · newsroom`;
    if (!where.q.trim()) {
      els.front.replaceChildren(heading);
      els.front.hidden = false;
      setStatus("");
      return;
    }
    setStatus(t("searching"));
    const params = new URLSearchParams({ q: where.q, edition, limit: "20" });
    for (const [name, value] of Object.entries(filters)) if (value) params.set(name, value);
    const response = await fetch(`/v1/search?${params}`, { headers: { Accept: "application/json" }, credentials: "omit" });
    const result = await response.json().catch(() => ({}));
    setFeedLink(`/v1/search/feed.atom?${new URLSearchParams({ q: where.q, edition })}`);
    if (!response.ok) {
      const why = el("p", "notice search-error", typeof result.detail === "string" ? result.detail : t("load_failed"));
      els.front.replaceChildren(heading, why);
      els.front.hidden = false;
      setStatus("");
      return;
    }
    const parts = [heading, el("p", "search-count", t("search_count", { count: result.total }))];
    if (state.session) parts.push(await followSearchButton(result.query));
    parts.push(facetsBlock(result, where));
    const grid = el("div", "story-grid search-grid");
    grid.append(...result.stories.map((story, i) => storyCard(story, i, { surface: "search" })));
    parts.push(grid);
    if (result.next_offset !== null && result.next_offset !== undefined) {
      const more = el("button", "more-results", t("more_results"));
      more.type = "button";
      let offset = result.next_offset;
      more.addEventListener("click", async () => {
        params.set("offset", String(offset));
        const next = await getJson(`/v1/search?${params}`);
        if (!next) return;
        grid.append(...next.stories.map((story, i) => storyCard(story, offset + i, { surface: "search" })));
        offset = next.next_offset;
        if (offset === null || offset === undefined) more.remove();
      });
      parts.push(more);
    }
    els.front.replaceChildren(...parts);
    els.front.hidden = false;
    state.pageKey = null;
    setStatus(result.total ? "" : t("no_results"));
  }

  async function followSearchButton(query) {
    if (!state.profile) {
      try { state.profile = await personal("GET", "/v1/me"); } catch (error) { console.error(error); }
    }
    const following = Boolean(state.profile && (state.profile.follows.keyword || []).includes(query));
    const button = el("button", "follow-keyword", t(following ? "following_keyword" : "follow_keyword", { keyword: query }));
    button.type = "button";
    button.id = "follow-search";
    button.setAttribute("aria-pressed", following ? "true" : "false");
    button.addEventListener("click", async () => {
      const now = button.getAttribute("aria-pressed") === "true";
      try {
        state.profile = now
          ? await personal("DELETE", `/v1/me/keywords?q=${enc(query)}`)
          : await personal("POST", "/v1/me/keywords", { query });
      } catch (error) {
        console.error(error);
        return;
      }
      button.setAttribute("aria-pressed", now ? "false" : "true");
      button.textContent = t(now ? "follow_keyword" : "following_keyword", { keyword: query });
    });
    return button;
  }

  function facetLabel(name, value) {
    if (name === "section") return sectionLabel(value.value);
    if (name === "language") return editionLabel(value.value);
    return value.label || value.value;
  }

  function facetsBlock(result, where) {
    const block = el("div", "facets");
    for (const name of FACETS) {
      const values = (result.facets && result.facets[name]) || [];
      if (!values.length) continue;
      const group = el("div", "facet");
      group.dataset.facet = name;
      group.append(el("span", "facet-name", t(`facet_${name}`)));
      for (const value of values) {
        const chosen = where[name] === value.value;
        const filters = { section: where.section, publisher: where.publisher, language: where.language };
        filters[name] = chosen ? null : value.value;
        const a = el("a", "facet-value", `${facetLabel(name, value)} (${value.count})`);
        a.href = searchHash(where.q, filters);
        a.dataset.value = value.value;
        a.setAttribute("aria-pressed", chosen ? "true" : "false");
        group.append(a);
      }
      block.append(group);
    }
    return block;
  }

  async function toggleFollow(topic, following) {
    try {
      await personal(following ? "DELETE" : "PUT", `/v1/me/follows/topic/${enc(topic)}`);
      await showForYou(state.edition);
    } catch (error) {
      console.error(error);
    }
  }

  async function hideSource(publisherId) {
    try {
      await personal("POST", "/v1/me/hide", { source: publisherId });
      await showForYou(state.edition);
    } catch (error) {
      console.error(error);
    }
  }

  // ---- clicks ----------------------------------------------------------------------------

  document.addEventListener("click", async (event) => {
    const a = event.target.closest && event.target.closest("a[data-article-id]");
    if (!a || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    // A signed-in reader's click is minted with the session, which records the read in their own
    // profile; a card's ready-made click_url is anonymous (safe to share), so it is only the
    // fallback, and the publisher's URL the last resort.
    if (a.dataset.clickUrl && !state.session) { window.location.assign(a.dataset.clickUrl); return; }
    try {
      const minted = await personal("POST", "/v1/click-token", {
        article_id: a.dataset.articleId, surface: a.dataset.surface, position: Number(a.dataset.position) || 0,
      });
      window.location.assign(minted.click_url);
    } catch (error) {
      window.location.assign(a.dataset.clickUrl || a.href);  // never strand a reader because logging failed
    }
  });

  // ---- live updates: one Server-Sent Events stream per edition (issue 30) ------------------

  const live = { controller: null, key: null, lastEventId: null, timer: null };

  function liveKey() {
    return `${state.edition || ""}|${state.session ? state.session.token : ""}`;
  }

  // (Re)open the stream when the edition or the reader changed; keep it otherwise.
  function ensureLive() {
    if (!state.edition) return;
    const key = liveKey();
    if (live.key === key && live.controller) return;
    stopLive();
    live.key = key;
    // A first connection names the page shown, so a version published since it loaded is announced.
    const shown = state.shownVersion;
    live.lastEventId = shown && shown.edition === state.edition ? `v1;p=${shown.section}:${shown.version};b=;k=0` : null;
    openLive();
  }

  function stopLive() {
    if (live.controller) live.controller.abort();
    if (live.timer) clearTimeout(live.timer);
    live.controller = null;
    live.timer = null;
    live.key = null;
  }

  async function openLive() {
    const controller = new AbortController();
    live.controller = controller;
    const key = live.key;
    const headers = { Accept: "text/event-stream" };
    if (live.lastEventId) headers["Last-Event-ID"] = live.lastEventId;
    let path = `/v1/live/${enc(state.edition)}`;
    if (state.session) {
      headers.Authorization = `Bearer ${state.session.token}`;
      path = `/v1/me/live?edition=${enc(state.edition)}`;
    }
    let retry = LIVE_RETRY_MS;
    try {
      const response = await fetch(path, { headers, credentials: "omit", cache: "no-store", signal: controller.signal });
      if (response.ok && response.body) {
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        let message = { event: "message", data: [], id: null };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
            const line = buffer.slice(0, end);
            buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
            if (line === "") {
              if (message.id !== null) live.lastEventId = message.id;
              if (message.data.length) onLiveEvent(message.event, message.data.join("\n"));
              message = { event: "message", data: [], id: null };
            } else if (!line.startsWith(":")) {
              const colon = line.indexOf(":");
              const name = colon < 0 ? line : line.slice(0, colon);
              const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (name === "event") message.event = text;
              else if (name === "data") message.data.push(text);
              else if (name === "id") message.id = text;
              else if (name === "retry" && /^\d+$/.test(text)) retry = Number(text);
            }
          }
        }
      } else if (response.status === 401) {
        signOut();
      } else if (response.headers.get("retry-after")) {
        retry = Number(response.headers.get("retry-after")) * 1000 || retry;
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      console.warn(error);
    }
    if (controller.signal.aborted || live.key !== key) return;
    live.controller = null;
    live.timer = setTimeout(() => { if (live.key === key) { live.timer = null; openLive(); } }, retry);
  }

  function onLiveEvent(kind, text) {
    let data;
    try { data = JSON.parse(text); } catch { return; }
    if (kind === "pages") {
      const shown = state.shownVersion;
      if (!shown || data.edition !== shown.edition) return;
      const page = (data.pages || []).find((p) => p.section === shown.section);
      if (page && page.version > shown.version) els.pill.hidden = false;
    } else if (kind === "breaking") {
      showAlert("breaking", t("breaking_alert"), data.title || data.story_id, data.story_id);
    } else if (kind === "keyword" && data.story) {
      showAlert("keyword", t("keyword_alert", { keyword: data.keyword }), data.story.title, data.story.story_id,
        data.story.has_coverage !== false);
    }
  }

  function showAlert(kind, label, title, storyId, opens = true) {
    const box = el("div", `alert alert-${kind}`);
    box.dataset.storyId = storyId || "";
    box.setAttribute("role", kind === "breaking" ? "alert" : "status");
    box.append(el("strong", "alert-label", label));
    const headline = el(opens ? "a" : "span", "alert-title", title);
    if (opens) headline.href = storyHash(storyId);
    box.append(headline);
    const close = el("button", "alert-close", "×");
    close.type = "button";
    close.setAttribute("aria-label", t("dismiss"));
    close.addEventListener("click", () => box.remove());
    box.append(close);
    els.alerts.prepend(box);
    while (els.alerts.childElementCount > MAX_ALERTS) els.alerts.lastElementChild.remove();
  }

  els.pill.addEventListener("click", async () => {
    els.pill.hidden = true;
    await route({ quiet: true });
    window.scrollTo(0, 0);
  });

  // ---- Full Coverage ---------------------------------------------------------------------

  function timelineItem(source) {
    const li = el("li", source.is_copy ? "timeline-item is-copy" : "timeline-item");
    li.append(timeEl(source.first_seen_at, "timeline-time"));
    const body = el("div", "timeline-body");
    body.append(el("span", "publisher", source.publisher));
    body.append(trackClicks(externalLink(source.url, source.title, "timeline-title"), source, "story", 0));
    if (source.is_copy) body.append(el("span", "copy-badge", t("syndicated_copy")));
    if (source.is_opinion) body.append(el("span", "opinion-badge", t("opinion")));
    li.append(body);
    return li;
  }

  async function showStory(storyId) {
    setFeedLink(null);
    await useLanguage(state.edition || pickEdition(null));
    setStatus(t("loading_coverage"));
    const story = await getJson(`/v1/stories/${enc(storyId)}`);
    if (!story) {
      els.front.hidden = true;
      els.coverage.hidden = true;
      setStatus(t("story_gone"));
      return;
    }
    if (story.story_id && story.story_id !== storyId) {
      // A merged story answered with a redirect: show the survivor's address.
      history.replaceState(null, "", storyHash(story.story_id));
    }
    const editions = story.editions || [];
    if (!state.edition && editions.length) state.edition = pickEdition(editions[0]);
    await useLanguage(state.edition);
    renderEditionPicker();
    renderTabs(null);

    const sources = Array.isArray(story.sources) ? story.sources : [];
    const back = el("a", "back-link", t("back_to_headlines"));
    back.href = state.edition ? pageHash(state.edition, state.section || "top") : "#/";

    const header = el("header", "coverage-header");
    header.append(el("p", "kicker", t("full_coverage")));
    const title = el("h2", "coverage-title", story.title);
    if (typeof story.language === "string" && story.language) title.lang = story.language;
    header.append(title);
    if (story.snippet) header.append(el("p", "coverage-snippet", story.snippet));
    const meta = el("p", "meta");
    const count = story.source_count ?? sources.filter((s) => !s.is_copy).length;
    meta.append(
      el("span", "source-count", t("source_count", { count })),
      el("span", "dot", "·"),
      el("span", "article-count", t("article_count", { count: sources.length })),
    );
    if (story.first_seen_at) {
      const first = el("span", "first-seen");
      first.append(...tNodes("first_seen", { time: timeEl(story.first_seen_at) }));
      meta.append(el("span", "dot", "·"), first);
    }
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
    const timelineHeading = el("h3", "timeline-heading", t("timeline"));
    const timeline = el("ol", "timeline");
    timeline.setAttribute("aria-label", t("timeline_label"));
    const timelineSources = Array.isArray(story.timeline) ? story.timeline : sources;
    timeline.append(...timelineSources.map(timelineItem));
    parts.push(timelineHeading, timeline);

    const aside = el("section", "coverage-aside");
    if (Array.isArray(story.publishers) && story.publishers.length) {
      const box = el("div", "coverage-publishers");
      const list = el("ul");
      list.append(...story.publishers.map((p) => {
        const li = el("li", null, p.publisher || p.publisher_id);
        li.append(el("span", "count", `${p.article_count}`));
        return li;
      }));
      box.append(el("h3", null, t("who_covered")), list);
      aside.append(box);
    }
    const local = story.local_sources && state.edition ? story.local_sources[state.edition] : null;
    if (Array.isArray(local) && local.length) {
      const byId = new Map(sources.map((s) => [s.article_id, s]));
      const box = el("div", "coverage-local");
      const list = el("ul");
      list.append(...local.map((id) => byId.get(id)).filter(Boolean).map((s) => {
        const li = el("li");
        li.append(trackClicks(externalLink(s.url, `${s.publisher}: ${s.title}`, "local-title"), s, "story", 0));
        return li;
      }));
      box.append(el("h3", null, t("local_sources", { edition: editionLabel(state.edition) })), list);
      aside.append(box);
    }
    if (Array.isArray(story.linked) && story.linked.length) {
      const box = el("div", "coverage-linked");
      const list = el("ul");
      list.append(...story.linked.map((l) => {
        const li = el("li");
        const label = l.language ? editionLabel(l.language) : l.story_id;
        const a = el("a", null, l.title ? `${label} · ${l.title}` : label);
        if (l.language) a.lang = l.language;
        a.href = storyHash(l.story_id);
        li.append(a);
        return li;
      }));
      box.append(el("h3", null, t("other_languages")), list);
      aside.append(box);
    }
    if (aside.childElementCount) parts.push(aside);

    els.coverage.replaceChildren(...parts);
    els.front.hidden = true;
    els.coverage.hidden = false;
    state.pageKey = null;
    document.title = `${story.title} · ${t("full_coverage")} · newsroom`;
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
      else if (where.view === "foryou") await showForYou(where.edition);
      else if (where.view === "search") await showSearch(where);
      else await showPage(where.edition, where.section, { quiet });
    } catch (error) {
      if (!quiet) setStatus(t("load_failed"));
      console.error(error);
    }
    ensureLive();
  }

  function setFeedLink(path) {
    els.feedLink.hidden = !path;
    if (path) els.feedLink.href = path;
    else els.feedLink.removeAttribute("href");
  }

  els.searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const q = els.searchInput.value.trim();
    if (q) window.location.hash = searchHash(q);
  });

  els.editionSelect.addEventListener("change", () => {
    const edition = els.editionSelect.value;
    const sections = sectionsOf(edition);
    if (parseHash().view === "foryou") { window.location.hash = forYouHash(edition); return; }
    window.location.hash = pageHash(edition, sections.includes(state.section) ? state.section : "top");
  });
  window.addEventListener("hashchange", () => route());

  async function start() {
    try {
      await loadEditions();
    } catch (error) {
      await useLanguage(pickEdition(null));
      setStatus(t("load_failed"));
      console.error(error);
      return;
    }
    await route();
    // New sections appear over time; the page itself is refreshed only when the reader asks
    // (the "new stories" pill), so stories never jump under a reader's finger.
    setInterval(async () => {
      if (document.hidden) return;
      try {
        await loadEditions();
      } catch (error) {
        console.error(error);
      }
    }, REFRESH_MS);
  }

  start();
})();
