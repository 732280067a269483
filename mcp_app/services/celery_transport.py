"""kombu's Redis transport, with a channel that can be closed after Redis died (Celery's broker).

kombu 5.7 (the newest release) kills the Celery worker when Redis is SIGKILLed while the
consumer waits in BRPOP and holds unacknowledged jobs (a call running with ``acks_late``):

1. the consumer sees the lost connection and collects it; closing the default channel first
   reads the pending BRPOP reply, which raises a connection error *before* the channel marks
   itself closed; kombu swallows it and then detaches the transport from its connection
   (``transport.client = None``);
2. Celery then closes the connection once more; the default channel, still open, now gets as
   far as restoring its unacknowledged jobs, which needs a Redis pool, whose parameters come
   from ``transport.client``: ``AttributeError: 'NoneType' object has no attribute
   'hostname'`` in ``_connparams``. No one expects an AttributeError there, so the worker
   stops ("Unrecoverable error").

Here the BRPOP reply lost with the connection is let go, so the first close runs to its end
while the transport still has its client: the restore is tried then (and fails quietly if
Redis is still down), and the second close finds the channel closed. A job whose restore did
not happen stays in Redis's unacknowledged set, from which kombu restores it after the
visibility timeout if Redis kept its data; a call already running goes on to its end (and a
redelivered job never runs a call twice: ``background.calls.aclaim_call``).
"""

from __future__ import annotations

import logging

from kombu.transport import redis

logger = logging.getLogger(__name__)


def _close(channel: redis.Channel) -> None:
    if channel._in_poll and not channel.closed:
        try:
            channel._brpop_read()  # type: ignore[no-untyped-call]  # unannotated in kombu
        except redis.Empty:
            pass
        except channel.connection_errors:
            # The reply went with the connection: nothing to deliver, go on closing.
            logger.info("Broker connection lost under a pending BRPOP; closing the channel")


class Channel(redis.Channel):
    def close(self) -> None:
        _close(self)
        super().close()  # type: ignore[no-untyped-call]  # unannotated in kombu


class Transport(redis.Transport):
    Channel = Channel


class SentinelChannel(redis.SentinelChannel):
    """The same for a broker behind Redis Sentinel: a failover closes every connection to the
    old master (Sentinel kills its clients), which is this very case."""

    def close(self) -> None:
        _close(self)
        super().close()  # type: ignore[no-untyped-call]  # unannotated in kombu


class SentinelTransport(redis.SentinelTransport):
    Channel = SentinelChannel
