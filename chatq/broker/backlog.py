"""What chatq asks of the Celery broker, whichever it is: how many jobs wait in each lane, how
long the oldest has waited, and which queued jobs have no message in it (to be sent again).

`RedisBroker` reads kombu's Redis lists; `RabbitBroker` asks RabbitMQ and the job records.
"""

from __future__ import annotations

import json
from typing import NamedTuple, Protocol

import redis
import requests
from celery import Celery
from redis.client import Pipeline

from chatq import admission, keys, topology
from chatq.broker import rabbitmq as rabbit
from chatq.broker.celery_app import QUEUES, broker_url
from chatq.config import Settings
from chatq.jobs import Swept
from chatq.scripting import LuaScript, is_cluster


def queue_keys(queue: str) -> list[str]:
    """The Redis lists that hold messages of `queue`: the one named after it. (kombu keeps a
    message sent with a priority p > 0 in a list of its own, the queue's name, a separator and
    p; chatq sends none with a priority on Redis, where each lane is a queue of its own.)"""
    return [queue]


class Broker(Protocol):
    """The broker as the sweeper, the admission check and the queue figures see it."""

    def missing(self, waiting: list[Swept]) -> list[str]:
        """The ids of the jobs among `waiting` (queued jobs whose lease ran out) whose message
        the broker does not hold for a worker to take."""

    def depths(self) -> dict[str, int]:
        """Messages waiting in each lane, not those a worker has reserved."""

    def total_depth(self) -> int:
        """Messages waiting in both lanes, read as cheaply and as freshly as the broker can."""

    def oldest_ages_s(self, now: float) -> dict[str, float | None]:
        """Age of the oldest waiting job of each lane (0 if none; None if the broker cannot
        tell without taking it)."""


def parked_depths(state: redis.Redis) -> dict[str, int]:
    """The jobs of each lane parked over their tenant's running cap (chatq/jobs/claim.lua):
    queued, their message taken, to be sent again by the sweeper."""
    pipe = state.pipeline(transaction=False)
    _count_parked(pipe)
    return _parked(pipe.execute())


def _count_parked(pipe: Pipeline) -> None:
    for lane in QUEUES:
        pipe.zcard(keys.parked(lane))


def _parked(counts: list[int]) -> dict[str, int]:
    """parked_depths' answer from the counts _count_parked asked for."""
    return dict(zip(QUEUES, (int(n) for n in counts), strict=True))


class MissingArgs(NamedTuple):
    """missing.lua: which of the jobs have no message in the broker's lists."""

    lists: tuple[str, ...]  # keys: the broker's lists
    expected: tuple[str | int, ...]  # (job id, index in `lists` from 1) per job


MISSING = LuaScript(
    "missing.lua", MissingArgs, lambda found: [str(i) for i in found], keys=("lists",)
)


class RedisBroker:
    """Celery's Redis transport: the lanes are lists (a queue per tenant,
    chatq/admission/fairness.py) that can be read in place."""

    def __init__(
        self,
        client: redis.Redis,
        state: redis.Redis | None = None,
        plan: admission.Plan | None = None,
    ) -> None:
        self.redis = client
        self.state = state or client
        self.plan = plan or admission.Plan()
        self.lanes = {lane: self.plan.lane_queues(lane) for lane in QUEUES}
        self._missing = MISSING.on(client)

    def _lists(self, lane: str) -> list[str]:
        return [key for queue in self.lanes[lane] for key in queue_keys(queue)]

    def missing(self, waiting: list[Swept]) -> list[str]:
        """In none of a lane's lists (lua/missing.lua), looked for first in the list its
        owner's messages are sent to."""
        if not waiting:
            return []
        lists = [key for lane in QUEUES for key in self._lists(lane)]
        expected: list[str | int] = []
        for job in waiting:
            lane = job.priority if job.priority in self.lanes else QUEUES[0]
            sent_to = queue_keys(self.plan.queue_for(lane, job.owner))[0]
            expected += [job.job_id, lists.index(sent_to) + 1]  # Lua counts from 1
        return self._missing(lists=tuple(lists), expected=tuple(expected))

    def depths(self) -> dict[str, int]:
        """LLEN of every list of each lane and the lane's parked jobs (in the job store): one
        round trip when the job store is the broker's Redis."""
        pipe = self.redis.pipeline(transaction=False)
        for lane in QUEUES:
            for key in self._lists(lane):
                pipe.llen(key)
        together = self.state is self.redis
        if together:
            _count_parked(pipe)
        answers = pipe.execute()
        lengths = iter(answers)
        parked = _parked(answers[-len(QUEUES) :]) if together else parked_depths(self.state)
        return {q: sum(next(lengths) for _ in self._lists(q)) + parked[q] for q in QUEUES}

    def total_depth(self) -> int:
        """Both lanes' lists."""
        return sum(self.depths().values())

    def oldest_ages_s(self, now: float) -> dict[str, float | None]:
        """From the message at the tail of each lane's lists and its job's created_at."""
        return {queue: self.oldest_age_s(self._lists(queue), now) for queue in QUEUES}

    def tenant_lists(self, lane: str, owner: str) -> list[str] | None:
        """The lists of `owner`'s own queue in `lane`; None when its jobs wait in a queue
        shared with other tenants (fair dispatch off, or a name not configured)."""
        if owner not in self.plan.tenants:
            return None
        return queue_keys(admission.queue_name(lane, owner))

    def oldest_age_s(self, lists: list[str], now: float) -> float:
        """Age of the oldest message at the tail of `lists`, from its job's created_at."""
        oldest = 0.0
        for key in lists:
            raw = self.redis.lindex(key, -1)
            if raw is None:
                continue
            try:
                job_id = json.loads(raw)["headers"]["id"]
            except (ValueError, KeyError, TypeError):
                continue
            created = self.state.hget(keys.job(job_id), "created_at")
            if created:
                oldest = max(oldest, now - float(created))
        return oldest


class RabbitBroker:
    """RabbitMQ: one priority queue for both lanes (chatq/broker/rabbitmq.py). Its messages cannot
    be read in place, so a job's record says whether its message was confirmed."""

    def __init__(self, settings: Settings, state: redis.Redis, celery: Celery) -> None:
        self.celery = celery
        self.state = state
        self.marks = rabbit.SentMarks(state)
        self.api = rabbit.management_api(broker_url(settings), settings.broker_api_url)
        self.session = requests.Session()

    def missing(self, waiting: list[Swept]) -> list[str]:
        """The queued jobs whose current message RabbitMQ never confirmed (it gives back a
        lost worker's messages by itself)."""
        return self.marks.missing([job.job_id for job in waiting]) if waiting else []

    def depths(self) -> dict[str, int]:
        """Each priority's ready messages, from the management API, and its parked jobs."""
        parked = parked_depths(self.state)
        return {q: n + parked[q] for q, n in rabbit.lane_depths(self.api, self.session).items()}

    def total_depth(self) -> int:
        """The queue's ready messages, live, over AMQP, and the parked jobs."""
        return rabbit.ready_messages(self.celery) + sum(parked_depths(self.state).values())

    def oldest_ages_s(self, now: float) -> dict[str, float | None]:
        """Unknown: RabbitMQ shows no message without delivering it."""
        return dict.fromkeys(QUEUES)


def make(settings: Settings, state: redis.Redis, celery: Celery) -> Broker:
    """The broker of `settings`; `state` is the job store's client, `celery` the app sending."""
    url = broker_url(settings)
    if rabbit.is_amqp(url):
        return RabbitBroker(settings, state, celery)
    plan = admission.plan(settings)
    if url == topology.state_url(settings) and not is_cluster(state):
        return RedisBroker(state, plan=plan)
    if not settings.broker_url:  # the Redis of CHATQ_REDIS_URL, maybe behind Sentinels
        return RedisBroker(topology.connect_main(settings), state, plan)
    return RedisBroker(topology.connect(url, ca_file=settings.redis_ca_file), state, plan)
