"""Running a shard of questions per worker: in this process, in local processes, or as Ray
tasks (``--executor ray``, a local Ray without a cluster unless ``--ray-address`` names one).
Each worker holds one ``QuestionWorker`` and yields its rows as they are done."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fathom.core.errors import ConfigError, FathomError
from fathom.evaluation.worker import QuestionWorker
from fathom.ingestion.questions import Question

_WORKER: QuestionWorker | None = None


def _config_from(cfg_dict: dict[str, Any]) -> Any:
    from fathom.core.config import Config, apply_mapping

    cfg = Config()
    apply_mapping(cfg, cfg_dict, "eval worker")
    return cfg


def _init_worker(cfg_dict: dict[str, Any], run: dict[str, Any]) -> None:
    global _WORKER
    _WORKER = QuestionWorker(_config_from(cfg_dict), run)


def _work(item: tuple[dict[str, Any], list[str]]) -> list[dict[str, Any]]:
    assert _WORKER is not None
    q, todo = item
    return _WORKER.rows(Question.from_dict(q), todo)


class _ShardActor:
    """A Ray actor holding one worker (engine and generator loaded once) for many shards."""

    def __init__(self, cfg_dict: dict[str, Any], run: dict[str, Any]) -> None:
        self.worker = QuestionWorker(_config_from(cfg_dict), run)

    def rows(self, items: list[tuple[dict[str, Any], list[str]]]) -> list[dict[str, Any]]:
        return [row for q, todo in items for row in self.worker.rows(Question.from_dict(q), todo)]


def execute(
    cfg: Any,
    run: dict[str, Any],
    items: list[tuple[Question, list[str]]],
    workers: int = 1,
    executor: str = "local",
    ray_address: str | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Rows per question (or per shard with Ray), as they finish."""
    if not items:
        return
    if executor == "ray":
        yield from _execute_ray(cfg, run, items, workers, ray_address)
        return
    if executor != "local":
        raise ConfigError(f"--executor {executor!r}: must be local or ray")
    if workers <= 1:
        worker = QuestionWorker(cfg, run)
        try:
            for q, todo in items:
                yield worker.rows(q, todo)
        finally:
            worker.close()
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # fresh interpreters: no forked model or thread state
    cfg_dict = cfg.to_dict(mask_secrets=False)
    payload = [(q.to_dict(), todo) for q, todo in items]
    with ctx.Pool(workers, initializer=_init_worker, initargs=(cfg_dict, run)) as pool:
        yield from pool.imap_unordered(_work, payload, chunksize=1)


@contextlib.contextmanager
def ray_session(workers: int, address: str | None) -> Iterator[Any]:
    """``ray`` initialised (a local Ray with ``workers`` CPUs without ``address``); shut down
    at the end if this call started it."""
    try:
        import ray
    except ImportError:
        raise FathomError("--executor ray needs Ray: pip install 'fathom[ray]'") from None
    started = False
    if not ray.is_initialized():
        # Workers import the installed Fathom (`pip install -e .` for a checkout).
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, workers)
        ray.init(**kwargs)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _execute_ray(
    cfg: Any,
    run: dict[str, Any],
    items: list[tuple[Question, list[str]]],
    workers: int,
    address: str | None,
) -> Iterator[list[dict[str, Any]]]:
    with ray_session(workers, address) as ray:
        cfg_dict = cfg.to_dict(mask_secrets=False)
        actor_cls = ray.remote(num_cpus=1)(_ShardActor)
        actors = [actor_cls.remote(cfg_dict, run) for _ in range(max(1, min(workers, len(items))))]
        # Small shards, handed out as actors free up, keep every worker busy to the end.
        n_shards = max(1, min(len(items), len(actors) * 4))
        shards = [[(q.to_dict(), todo) for q, todo in items[i::n_shards]] for i in range(n_shards)]
        shards = [sh for sh in shards if sh]
        owner: dict[Any, Any] = {}
        pending = []
        for actor in actors:
            if shards:
                ref = actor.rows.remote(shards.pop())
                owner[ref] = actor
                pending.append(ref)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            actor = owner.pop(done[0])
            if shards:
                ref = actor.rows.remote(shards.pop())
                owner[ref] = actor
                pending.append(ref)
            yield ray.get(done[0])
