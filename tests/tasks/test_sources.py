"""Other sources: a news sitemap is polled like a feed; an opted-out publisher is never fetched."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pipeline_harness import START, replay_site

from tasks.ingest.commit import commit_ingest
from tasks.ingest.plan import plan_due_feeds
from tasks.ingest.poll import poll_shard
from tasks.registry import import_publishers
from tasks.settings import IngestSettings
from warehouse.duck import connect
from warehouse.store import LocalStore

COLUMNS = "publisher_id,name,domain,region,language,tier,authority,paywalled,opted_out,feed_url,section"


def test_sitemap_is_polled_as_a_feed_and_opted_out_is_never_fetched(tmp_path: Path) -> None:
    with replay_site(limit=60) as site:
        now = START + timedelta(hours=2)
        site.set_clock(now)
        by_count = sorted(site.publishers, key=lambda p: -len(site.released(p.publisher_id)))
        mapped, opted = by_count[0], by_count[1]
        csv = tmp_path / "p.csv"
        csv.write_text(
            f"{COLUMNS}\n"
            f"{mapped.publisher_id},{mapped.name},{mapped.domain},{mapped.region},{mapped.language},2,0.5,false,false,"
            f"{mapped.base_url}/sitemap.xml,{mapped.section}\n"
            f"{opted.publisher_id},{opted.name},{opted.domain},{opted.region},{opted.language},2,0.5,false,true,"
            f"{opted.rss_url},{opted.section}\n")
        store = LocalStore(tmp_path / "store")
        import_publishers(store, csv)
        settings = IngestSettings(allow_private_addresses=True)
        shards = plan_due_feeds(store, now, 2)
        # A news sitemap is a source of the feed kind: parse_feed tells it apart by its content.
        assert [job.kind for jobs in shards for job in jobs] == ["feed"]
        summary = commit_ingest(store, [poll_shard(jobs, settings, now) for jobs in shards], now)

        released = {a.url for a in site.released(mapped.publisher_id)}
        con = connect(store)
        stored = {row[0] for row in con.sql("select canonical_url from articles").fetchall()}
        con.close()
        assert summary["feeds_polled"] == 1
        assert released and stored == released  # every page listed in the news sitemap
        hosts = site.stats()["hosts"]
        assert hosts[mapped.publisher_id]["sitemap"] == 1
        assert all(hosts[opted.publisher_id][kind] == 0 for kind in ("feed", "page", "robots", "sitemap"))
