"""The language writer: one per language, the only process that decides which story an article is in.

A run goes load → assign → commit, on a :class:`~tasks.writer.session.WriterSession`:

- ``session.load`` opens the checkpoint (``checkpoint.open_writer``: a run that died after its change
  segment is rolled forward first) and its state: taken from the owner's ``kept.KeptStates`` while
  the checkpoint is still the one its own last commit left, else the base and deltas the checkpoint
  names, folded and built once (``state.load_chain``).
- ``run.read_pending`` reads the article segments not yet consumed, as ``ArticleRow`` records in
  stream order; ``session.assign`` decides each (a new story, a join, a copy, a new version) into
  ``StoryChange`` records. The repair pass (``tasks.repair``) decides merges and splits on the same session.
- ``session.commit`` stores a delta of the state (``state.store_state``), then the change segment,
  then the checkpoint with If-Match on the ETag the session opened: a second writer loses (412).

``run.cluster_language`` is that path for one language at one stream time (the per-minute flow's
task); ``service.serve_language_writers`` runs it as one long-lived process that owns the kept states
and folds each chain in the background (``state.compact_writer_state``). ``checkpoint`` also holds
what ``newsroom doctor`` needs: rebuilding a damaged checkpoint, rewinding a writer whose state is lost.
"""
