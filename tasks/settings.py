"""Pipeline settings (``NEWSROOM_INGEST_*``, ``NEWSROOM_RANK_*``, ...), read once through get_*().

A command that needs other settings than the environment's (the demo's own store, loopback fetches
for its replay site) builds a :class:`PipelineSettings` and runs its flows inside
:func:`use_settings`: every ``get_*_settings()`` and ``tasks.storage.configured_store()`` of that
thread, and of the tasks it submits, answers from it. Nothing is written to the environment, and no
cache is cleared (issue 17); child processes get their settings as environment variables of their own.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal, TypeVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from transforms.affinity import HALF_LIFE_HOURS
from warehouse.profile_db import is_postgres_url
from warehouse.settings import WarehouseSettings, check_settings, http_url_problem
from warehouse.store import ObjectStore, check_store_settings, open_store


def _area_config(env_prefix: str, *, populate_by_name: bool = False) -> SettingsConfigDict:
    """One area's settings: read from ``<env_prefix><FIELD>`` variables and ``.env``, other variables
    ignored, NaN and infinity refused."""
    return SettingsConfigDict(env_prefix=env_prefix, env_file=".env", extra="ignore",
                              populate_by_name=populate_by_name, allow_inf_nan=False)


class IngestSettings(BaseSettings):
    model_config = _area_config("NEWSROOM_INGEST_")

    embeddings: bool = Field(
        True,
        description="Compute each new article's sentence embedding (title and lede, USE multilingual v3; its CPU "
        "per article in docs/measurements.md, bench/embedding_speed.py): cross-language story links, the join score, "
        "the headline path and the section classifier read it. Off: links fall back to shared names and numbers, "
        "sections to the feeds' own.",
    )
    allow_private_addresses: bool = Field(
        False,
        description="Allow fetching private, loopback and link-local addresses. Off in production; "
        "the demo and the tests turn it on to reach the local replay site.",
    )
    allowed_private_networks: str = Field(
        "127.0.0.0/8,::1/128",
        description="With allow_private_addresses on, the only non-public networks that may be fetched "
        "(comma-separated CIDRs; loopback by default, so a redirect to 169.254.169.254 stays blocked).",
    )
    user_agent: str = Field("newsroom/0.1", description="Product(s) sent in User-Agent. robots.txt groups are "
                            "chosen by the most specific product token: 'newsroom-eu/0.1 newsroom/0.1' follows a "
                            "newsroom-eu group if there is one, else a newsroom group, else *.")
    contact_url: str = Field(
        "https://github.com/newsroom/newsroom#for-publishers",
        description="Where a publisher can reach the operator; sent in User-Agent.",
    )
    connect_timeout_seconds: float = Field(5.0, gt=0, description="TCP connect timeout per request.")
    read_timeout_seconds: float = Field(10.0, gt=0, description="Read timeout between bytes per request.")
    total_timeout_seconds: float = Field(30.0, gt=0, description="Wall-clock deadline for a whole fetch: every redirect hop, headers and body.")
    max_feed_bytes: int = Field(10_000_000, gt=0, description="Cap on a feed body, after decompression.")
    max_page_bytes: int = Field(5_000_000, gt=0, description="Cap on an article page, after decompression.")
    max_redirects: int = Field(5, ge=0, le=20, description="Redirects followed per request, each re-checked.")
    max_workers: int = Field(16, ge=1, le=256, description="Threads fetching feeds and pages in one ingest run.")
    max_items_per_feed: int = Field(100, ge=1, description="New items taken from one feed per poll.")
    article_workers: int = Field(
        1, ge=0, le=64,
        description="Worker processes that extract, sign and embed fetched pages, each article under the time and "
        "memory budget below (README, 'Hostile pages'). 0: in the polling threads, with the caps on every text "
        "but no budget.",
    )
    article_seconds: float = Field(
        20.0, gt=0,
        description="Time budget of one article's extraction, features and embedding in a worker; past it the "
        "worker is stopped and the article is recorded as a 'time_budget' page error.",
    )
    article_memory_mb: int = Field(
        512, ge=64,
        description="Memory budget (address space, MB) of one article's extraction, features and embedding in a "
        "worker, beyond what the worker held before it; past it the article is recorded as a 'memory_budget' "
        "page error.",
    )
    tier1_min_interval_seconds: int = Field(60, gt=0, description="Shortest poll interval for a tier-1 publisher's feed.")
    min_interval_seconds: int = Field(300, gt=0, description="Shortest poll interval for other publishers' feeds.")
    max_interval_seconds: int = Field(3600, gt=0, description="Longest poll interval for a healthy feed.")
    host_max_concurrency: int = Field(2, ge=1, description="Requests in flight to one host at most.")
    host_rate_per_second: float = Field(
        2.0, gt=0, description="Token-bucket rate per host; halved on 429/5xx/timeouts/slow responses (AIMD)."
    )
    host_burst: float = Field(4.0, ge=1, description="Token-bucket size per host.")
    host_min_rate_per_second: float = Field(0.05, gt=0, description="The AIMD decrease never goes below this.")
    slow_response_seconds: float = Field(5.0, gt=0, description="A response slower than this lowers the host's rate.")
    robots_ttl_seconds: int = Field(
        3600, ge=0, le=86400,
        description="How long a fetched robots.txt verdict is reused across ingest runs (kept in the store) before "
        "it is fetched again; RFC 9309 §2.4 allows at most 24 hours. A 5xx or unreachable robots.txt (disallow all) "
        "is kept at most 10 minutes. 0 fetches it on every run.",
    )

    @field_validator("user_agent")
    @classmethod
    def _user_agent_is_a_header_value(cls, value: str) -> str:
        if not value.strip() or not (value.isascii() and value.isprintable()):
            raise ValueError("must be printable ASCII, not empty (it is sent in User-Agent)")
        return value

    @field_validator("contact_url")
    @classmethod
    def _contact_is_a_url(cls, value: str) -> str:
        if (problem := http_url_problem(value)) or not value.isascii():
            raise ValueError(problem or "must be ASCII (it is sent in User-Agent)")
        return value

    @field_validator("allowed_private_networks")
    @classmethod
    def _networks_are_cidrs(cls, value: str) -> str:
        for network in (n.strip() for n in value.split(",")):
            if not network:
                continue
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError as e:
                raise ValueError(f"{network!r} is not a network in CIDR form (127.0.0.0/8, ::1/128)") from e
        return value

    @model_validator(mode="after")
    def _intervals_in_order(self) -> IngestSettings:
        if self.max_interval_seconds < self.min_interval_seconds:
            raise ValueError("NEWSROOM_INGEST_MAX_INTERVAL_SECONDS: must be at least NEWSROOM_INGEST_MIN_INTERVAL_SECONDS")
        return self

    @property
    def private_networks(self) -> tuple[str, ...]:
        """The non-public networks that may be fetched: none unless allow_private_addresses is on."""
        if not self.allow_private_addresses:
            return ()
        return tuple(n.strip() for n in self.allowed_private_networks.split(",") if n.strip())

    @property
    def user_agent_header(self) -> str:
        return f"{self.user_agent} (+{self.contact_url})"


class RankSettings(BaseSettings):
    model_config = _area_config("NEWSROOM_RANK_")

    coverage_window_hours: float = Field(6.0, gt=0, description="Articles counted for coverage.")
    freshness_half_life_hours: float = Field(4.0, gt=0, description="Half-life of the freshness decay.")
    regional_weight: float = Field(
        0.5, ge=0, description="Weight of the share of coverage from the edition's region (0 ignores region)."
    )
    active_hours: float = Field(48.0, gt=0, description="Stories with no article for this long leave the pages.")
    top_stories: int = Field(30, ge=1, description="Stories on an edition's top page.")
    section_stories: int = Field(20, ge=1, description="Stories on a section page.")
    min_section_stories: int = Field(3, ge=1, description="Sections with fewer stories are not published.")
    min_page_stories: int = Field(1, ge=1, description="A page version with fewer stories is refused.")
    max_story_loss: float = Field(
        0.5, ge=0, le=1, description="Refuse a version that loses more than this share of the live page's stories."
    )
    coverage_weight: float = Field(1.0, ge=0, description="Weight of coverage, log(1 + sum of publishers' authority).")
    velocity_weight: float = Field(0.5, ge=0, description="Weight of velocity (last 30 min against the story's own rate).")
    freshness_weight: float = Field(1.0, ge=0, description="Exponent of the freshness decay on the score.")
    velocity_window_minutes: float = Field(30.0, gt=0, description="Window of the velocity part.")
    cycle_seconds: int = Field(60, gt=0, description="Rank cadence; smoothing recomputes raw scores this far apart.")
    smoothing_cycles: int = Field(5, ge=1, description="Scores are averaged over this many cycles (1 turns smoothing off).")
    swap_margin: float = Field(0.10, ge=0, description="Two stories swap places only when the gap exceeds this share.")
    burst_window_minutes: float = Field(5.0, gt=0, description="Window in which a burst is counted.")
    burst_min_articles: int = Field(10, ge=1, description="Originals within the burst window that make a burst.")
    burst_min_publishers: int = Field(5, ge=1, description="Publishers above the authority floor within the burst window.")
    burst_authority_floor: float = Field(0.3, ge=0, le=1, description="Authority a publisher needs to count towards a burst.")
    burst_max_tail: float = Field(1e-6, gt=0, le=1, description="Poisson tail against the new-story baseline below which a burst is real.")
    burst_baseline_floor: float = Field(0.5, gt=0, description="Least expected originals per burst window for a new story.")
    breaking_new_story_minutes: float = Field(60.0, gt=0, description="A burst makes a story Breaking only this soon after it appears.")
    breaking_hours: float = Field(2.0, gt=0, description="How long a Breaking story stays pinned.")
    breaking_min_regional_share: float = Field(
        0.2, ge=0, le=1, description="A Breaking story is pinned in editions whose region has at least this share of its coverage."
    )
    boost_hours: float = Field(1.0, ge=0, description="Feeds of a Breaking story's publishers are polled faster this long.")
    max_section_share_top10: int = Field(3, ge=1, description="At most this many of an edition's top 10 from one section.")
    max_centroid_cosine: float = Field(0.85, gt=0, le=1, description="Never list two stories whose centroids are closer than this.")
    fresh_slot_rank: int = Field(8, ge=0, description="Rank of the slot kept for a fresh unproven story (0: none).")
    fresh_slot_minutes: float = Field(60.0, ge=0, description="A story younger than this may take the fresh slot.")
    publisher_daily_share_cap: float = Field(
        0.10, gt=0, le=1, description="Cap on a publisher's share of representative impressions per edition per day."
    )
    representative_tie_margin: float = Field(0.05, ge=0, description="Representatives within this share rotate hourly.")
    supporting_links: int = Field(4, ge=0, description="Supporting links per story on a page (MMR).")
    pool_stories: int = Field(1000, ge=1, description="Stories in an edition's candidate pool.")
    search_max_stories: int = Field(
        50_000, ge=1, le=1_000_000,
        description="Most stories in the search index of the live window: every listed story, then the most "
        "recently updated of the other active ones (issue 30).",
    )
    search_keep_versions: int = Field(
        5, ge=1, le=1000, description="Search index versions kept below the live one (older ones are deleted).",
    )


def get_ingest_settings() -> IngestSettings:
    """The settings in effect (:func:`use_settings`), else the environment's, read once."""
    return _in_effect_or_environment("ingest", IngestSettings)


def get_rank_settings() -> RankSettings:
    """The settings in effect (:func:`use_settings`), else the environment's, read once."""
    return _in_effect_or_environment("rank", RankSettings)


class ScaleSettings(BaseSettings):
    model_config = _area_config("NEWSROOM_SCALE_")

    dask_scheduler_address: str | None = Field(
        None,
        description="A Dask scheduler (tcp://host:8786) for the fetch and extract fan-out; unset runs it "
        "in-process on threads.",
    )
    @field_validator("dask_scheduler_address")
    @classmethod
    def _address_not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty: unset it to run in-process")
        return value

    ingest_threads: int = Field(4, ge=1, le=256, description="In-process ingest shards run at once (no Dask).")
    ingest_processes: int = Field(
        0, ge=0, le=256,
        description="Worker processes for the ingest shards on this machine (no Dask); 0 runs them on threads in "
        "the flow's process. One process polls on one core at most (the interpreter lock): with N cores, N "
        "processes poll up to N times as fast (python -m bench.poll_throughput --processes), at a few seconds of "
        "start-up per run.",
    )

    writer_mode: Literal["per_minute", "long_running"] = Field(
        "per_minute",
        description="How the cluster writers run: per_minute (a flow run each minute loads the state, small "
        "installs) or long_running (one process per language keeps its window in memory and consumes "
        "segments as they land; issue 15).",
    )
    writer_compact_every: int = Field(
        30, ge=1, le=10_000,
        description="Per-run state deltas after which a writer folds its chain into a new base (off the "
        "critical path).",
    )
    writer_poll_seconds: float = Field(
        5.0, gt=0, le=3600, description="How often a long-running writer looks for new article segments.",
    )


def get_scale_settings() -> ScaleSettings:
    """The settings in effect (:func:`use_settings`), else the environment's, read once."""
    return _in_effect_or_environment("scale", ScaleSettings)


class FreshnessSettings(BaseSettings):
    """Event-driven hand-offs (``NEWSROOM_FRESHNESS_*``, issue 31): who reacts to the pipeline's Prefect events."""

    model_config = _area_config("NEWSROOM_FRESHNESS_")

    mode: Literal["events", "minute"] = Field(
        "events",
        description="events: the long-running ingest and rank flows act as soon as a push is recorded, a feed "
        "falls due or a writer commits (Prefect events), and the minute deployments stand by as the fallback; "
        "minute: every step runs on its own schedule only (the behaviour before issue 31).",
    )
    rank_debounce_seconds: float = Field(
        1.0, ge=0, le=60,
        description="After a writer's commit, rank waits this long for other languages' commits, so one pass "
        "covers them.",
    )
    rank_backstop_seconds: float = Field(
        60.0, gt=0, le=3600, description="The rank flow ranks at least this often when no commit arrives.",
    )
    ingest_batch_seconds: float = Field(
        5.0, ge=0, le=300,
        description="A feed falling due waits at most this long for others to fall due, so they share one pass "
        "(a push never waits).",
    )
    ingest_backstop_seconds: float = Field(
        60.0, gt=0, le=3600, description="The ingest flow looks at the feeds at least this often.",
    )
    service_stale_seconds: float = Field(
        120.0, gt=0, le=3600,
        description="A scheduled ingest or rank run leaves the work to the long-running flow while that flow "
        "reported a pass this recently, and does it itself otherwise (the fallback).",
    )


def get_freshness_settings() -> FreshnessSettings:
    """The settings in effect (:func:`use_settings`), else the environment's, read once."""
    return _in_effect_or_environment("freshness", FreshnessSettings)


class WebSubSettings(BaseSettings):
    """WebSub subscriber and publisher pings (``NEWSROOM_WEBSUB_*``, issue 3)."""

    model_config = _area_config("NEWSROOM_WEBSUB_")

    enabled: bool = Field(
        False,
        description="Subscribe to the hubs feeds advertise. Needs callback_base_url and master_secret, and "
        "`newsroom websub` running at that URL.",
    )
    callback_base_url: str | None = Field(
        None, description="Public base URL of the `newsroom websub` receiver; callbacks are {base}/websub/{feed_id}."
    )
    master_secret: SecretStr | None = Field(
        None,
        description="Master secret: each feed's hub.secret is HMAC(master, feed_id) and each publisher's ping "
        "token HMAC(master, 'ping:' + publisher_id). Required when enabled and by `newsroom websub`.",
    )
    lease_seconds: int = Field(10 * 86400, gt=0, description="hub.lease_seconds we ask for (the hub may grant less).")
    renew_fraction: float = Field(0.25, gt=0, lt=1, description="Renew a lease when less than this share of it remains ...")
    renew_min_seconds: int = Field(3600, ge=0, description="... or when less than this long remains.")
    pending_timeout_seconds: int = Field(600, gt=0, description="Ask again when a hub has not verified a request by then.")
    retry_seconds: int = Field(3600, gt=0, description="Ask a hub that failed or denied a request again after this long.")
    backstop_seconds: int = Field(900, gt=0, description="While a lease is live, poll the feed at most this often.")
    max_body_bytes: int = Field(2_000_000, gt=0, description="Cap on a delivery or ping body; larger ones get 413.")
    ping_min_interval_seconds: int = Field(
        30, ge=0, description="A publisher's pings (and a feed's pushes) trigger at most one poll per this long."
    )
    hub_timeout_seconds: float = Field(10.0, gt=0, description="Timeout of a subscription request to a hub.")
    bind_host: str = Field("127.0.0.1", description="Address `newsroom websub` listens on.")
    bind_port: int = Field(8090, ge=0, le=65535, description="Port `newsroom websub` listens on.")

    @field_validator("callback_base_url")
    @classmethod
    def _callback_is_a_url(cls, value: str | None) -> str | None:
        if value is not None and (problem := http_url_problem(value)):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _enabled_needs_callback_and_secret(self) -> WebSubSettings:
        if self.enabled and (not self.callback_base_url or self.master_secret is None):
            raise ValueError("NEWSROOM_WEBSUB_ENABLED needs NEWSROOM_WEBSUB_CALLBACK_BASE_URL and "
                             "NEWSROOM_WEBSUB_MASTER_SECRET")
        if self.master_secret is not None and not self.master_secret.get_secret_value():
            raise ValueError("NEWSROOM_WEBSUB_MASTER_SECRET must not be empty")
        return self

    def master_key(self) -> bytes:
        """The master secret as bytes.

        Raises:
            ValueError: no master secret is configured.
        """
        if self.master_secret is None:
            raise ValueError("set NEWSROOM_WEBSUB_MASTER_SECRET")
        return self.master_secret.get_secret_value().encode("utf-8")


def get_websub_settings() -> WebSubSettings:
    """The settings in effect (:func:`use_settings`), else the environment's, read once."""
    return _in_effect_or_environment("websub", WebSubSettings)


class ProfilesSettings(BaseSettings):
    """Where the profile store is and how fast interests fade (the profiles flow, ``NEWSROOM_PROFILES_*``)."""

    model_config = _area_config("NEWSROOM_PROFILES_", populate_by_name=True)

    profiles_path: str = Field(
        default="var/profiles.sqlite3",
        min_length=1,
        validation_alias="NEWSROOM_SERVING_PROFILES_PATH",
        description="The serving profile store (SQLite); the same variable serving reads.",
    )
    profiles_url: SecretStr | None = Field(
        default=None,
        validation_alias="NEWSROOM_SERVING_PROFILES_URL",
        description="The serving profile store on PostgreSQL (postgresql://...); when set it replaces "
        "the SQLite file. The same variable serving reads.",
    )
    half_life_hours: float = Field(
        default=HALF_LIFE_HOURS, gt=0, description="Hours for a click's weight to halve."
    )

    @field_validator("profiles_url")
    @classmethod
    def _postgres_only(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not is_postgres_url(value.get_secret_value()):
            raise ValueError("NEWSROOM_SERVING_PROFILES_URL must start with postgresql:// or postgres://")
        return value

    @property
    def profiles_at(self) -> str:
        """Where the fold writes: the PostgreSQL URL when set, else the SQLite path."""
        return self.profiles_url.get_secret_value() if self.profiles_url is not None else self.profiles_path


def get_profiles_settings() -> ProfilesSettings:
    """The settings in effect (:func:`use_settings`), else the environment's (read on every call)."""
    return _in_effect_or_environment("profiles", ProfilesSettings, cached=False)


SETTINGS_CLASSES: tuple[type[BaseSettings], ...] = (
    WarehouseSettings, IngestSettings, RankSettings, ScaleSettings, WebSubSettings, ProfilesSettings,
    FreshnessSettings,
)
"""Every settings class the pipeline reads (serving checks its own when it starts)."""


def check_all_settings() -> None:
    """Read every pipeline setting from the environment now, so a bad one stops a command at start.

    Raises:
        ValueError: one line naming the first invalid variable and why (and how many more).
    """
    for cls in SETTINGS_CLASSES:
        check_settings(cls)


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """Every setting a pipeline command reads, built once and passed in."""

    warehouse: WarehouseSettings
    ingest: IngestSettings
    rank: RankSettings
    scale: ScaleSettings
    websub: WebSubSettings
    profiles: ProfilesSettings
    freshness: FreshnessSettings

    @classmethod
    def from_environment(cls, **replaced: object) -> PipelineSettings:
        """Every class read from the environment (and ``.env``), except the ones ``replaced`` names
        (``warehouse=WarehouseSettings(root=...)``).

        Raises:
            ValueError: one line naming the first invalid variable and why (and how many more).
        """
        built = {name: replaced[name] if name in replaced else check_settings(kind)
                 for name, kind in _PIPELINE_CLASSES.items()}
        return cls(**built)  # type: ignore[arg-type]

    def with_store(self, root: str) -> PipelineSettings:
        """These settings with the store at ``root`` (its other ``NEWSROOM_WAREHOUSE_*`` read as before).

        Raises:
            ValueError: ``root`` names no store (the one line of :func:`check_settings`).
        """
        warehouse = check_settings(WarehouseSettings, root=root)
        return replace(self, warehouse=warehouse)  # type: ignore[arg-type]

    def check_store(self) -> None:
        """Check that the store these settings name can be opened, creating and fetching nothing.

        Raises:
            ValueError: one line, ``invalid setting NEWSROOM_WAREHOUSE_…: why`` (a root that is a
                file, an s3:// root without credentials; see ``warehouse.store.store_settings_problem``).
        """
        check_store_settings(self.warehouse)

    def with_private_addresses(self) -> PipelineSettings:
        """These settings with fetches of the allowed private networks on (loopback, by default): the
        demo's replay site and the tests' servers."""
        return replace(self, ingest=self.ingest.model_copy(update={"allow_private_addresses": True}))


_PIPELINE_CLASSES: dict[str, type[BaseSettings]] = {
    "warehouse": WarehouseSettings, "ingest": IngestSettings, "rank": RankSettings, "scale": ScaleSettings,
    "websub": WebSubSettings, "profiles": ProfilesSettings, "freshness": FreshnessSettings,
}


@dataclass(slots=True)
class _InEffect:
    settings: PipelineSettings
    stores: list[ObjectStore] = field(default_factory=list)
    """The store the warehouse settings name, once opened (at most one)."""

    def store(self) -> ObjectStore:
        if not self.stores:
            self.stores.append(open_store(self.settings.warehouse))
        return self.stores[0]


_IN_EFFECT: ContextVar[_InEffect | None] = ContextVar("newsroom_pipeline_settings", default=None)


@contextmanager
def use_settings(settings: PipelineSettings) -> Iterator[PipelineSettings]:
    """Run what this block calls with ``settings`` in effect, instead of the environment's.

    Flows and tasks called here (and the tasks Prefect's thread pool runs for them, which copies
    this context) read their settings and open their store from ``settings``. A Dask worker, another
    process, reads its own environment.
    """
    token = _IN_EFFECT.set(_InEffect(settings))
    try:
        yield settings
    finally:
        _IN_EFFECT.reset(token)


S = TypeVar("S", bound=BaseSettings)


@lru_cache
def _read_environment(kind: type[S]) -> S:
    return kind()


def _in_effect_or_environment(name: str, kind: type[S], *, cached: bool = True) -> S:
    """The ``name`` settings of :func:`use_settings`' block, else ``kind`` read from the environment."""
    active = _IN_EFFECT.get()
    if active is not None:
        found: S = getattr(active.settings, name)
        return found
    return _read_environment(kind) if cached else kind()


def forget_environment_settings() -> None:
    """Read the environment again on the next call (tests that change it)."""
    _read_environment.cache_clear()


def current_settings() -> PipelineSettings:
    """The settings in effect (:func:`use_settings`), else every class read from the environment now."""
    active = _IN_EFFECT.get()
    return active.settings if active is not None else PipelineSettings.from_environment()


def store_in_effect() -> ObjectStore | None:
    """The store of the settings in effect (opened on first use), or None outside :func:`use_settings`."""
    active = _IN_EFFECT.get()
    return active.store() if active is not None else None
