"""Running a shard of questions per worker: in this process, in local processes, or as Ray
tasks (``--executor ray``, a local Ray without a cluster unless ``--ray-address`` names one).
Each worker holds one ``QuestionWorker`` and yields its rows as they are done."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fathom.core.errors import ConfigError, FathomError
from fathom.evaluation.worker import QuestionWorker
from fathom.index.ray_ingest import ray_session  # one Ray start-up for eval and ingest
from fathom.learn.questions import Question

# A worker reads the configuration it is sent: the generator registry's names check its backend.
from fathom.stages.generate import registry  # noqa: F401

_WORKER: QuestionWorker | None = None

# How long `--executor ray` waits for its first worker to start before it gives up.
RAY_START_TIMEOUT_S = 600.0


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

    def ready(self) -> bool:
        """Answered once the actor has started (its engine loaded)."""
        return True

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
        # An actor gets a shard only once it has started: Ray can leave an actor pending for
        # good (its CPU never freed), and a shard sent to it would be waited for forever. The
        # run finishes on the actors that did start.
        starting = {actor.ready.remote(): actor for actor in actors}
        running: dict[Any, Any] = {}
        give_up = time.monotonic() + RAY_START_TIMEOUT_S
        while shards or running:
            wait_s = None if running else max(0.0, give_up - time.monotonic())
            done, _ = ray.wait([*running, *starting], num_returns=1, timeout=wait_s)
            if not done:
                raise FathomError(
                    f"no Ray worker started within {RAY_START_TIMEOUT_S:g} s "
                    f"({len(actors)} asked for, 1 CPU each): check `ray status`, or run "
                    "with --executor local"
                )
            ref = done[0]
            if ref in starting:
                actor = starting.pop(ref)
                ray.get(ref)  # an actor whose engine failed to load raises here
                rows = None
            else:
                actor = running.pop(ref)
                rows = ray.get(ref)
            if shards:
                running[actor.rows.remote(shards.pop())] = actor
            if rows is not None:
                yield rows
