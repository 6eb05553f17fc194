"""Two DingTalk instances of one bot sharing one MemoryStore, one fake clock and one fake
DingTalk (the card API both instances write to), for the cross-instance tests."""

from __future__ import annotations

import threading

from channelkit.errors import StateStoreUnavailable
from channelkit.platforms.common.cluster import ClusterOptions
from channelkit.runtime import FakeClock, Scheduler, WorkerPool
from channelkit.state import MemoryStore
from dingtalk_helpers import AdapterHarness, FakeDingtalkApi

OPTIONS = {"leaseRenewS": 1.0, "leaseExpiryS": 3.0}


class FlakyStore:
    """A store whose backend can be taken away (``down = True``) and given back."""

    def __init__(self, inner):
        self.inner = inner
        self.namespace = inner.namespace
        self.instance_id = inner.instance_id
        self.down = False

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self.down:
                if name == "pop":
                    threading.Event().wait(0.01)
                raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
            return attr(*args, **kwargs)

        return call


class Instance(AdapterHarness):
    """An AdapterHarness whose channel is one instance of the shared bot."""

    def __init__(self, shared, script=None, *, name=None, options=None, bridge=None, max_runs=None):
        from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

        self.clock = shared.clock
        self.pool = WorkerPool(8)
        self.run_pool = WorkerPool(8)
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.api = shared.api
        self.bridge = bridge or shared.bridge_factory(script)
        self.config = DingtalkConfig(
            client_id="ding-robot",
            client_secret="app-secret",
            model="qwen3.7-max",
            interactive_cards={},
            ingress="http",
            card_callback_route_key="channelkit",
        )
        raw = dict(OPTIONS, **(options or {}))
        if name:
            raw["instanceName"] = name
        opts = ClusterOptions.from_mapping(raw)
        opts = ClusterOptions(**{**opts.__dict__, "poll_s": 0.05})
        from channelkit.core import ChannelConfig

        self.channel = DingtalkChannel(
            self.config,
            self.bridge,
            channel_config=ChannelConfig(name="dingtalk", max_concurrent_runs=max_runs),
            api=self.api,
            executor=self.pool,
            run_executor=self.run_pool,
            scheduler=self.scheduler,
            clock=self.clock,
            store=shared.store,
            cluster_options=opts,
        )
        self._msg = shared.next_msg_base()
        self.shared = shared

    @property
    def instance_id(self):
        return self.channel.cluster.cluster.instance_id

    def settle(self, timeout=5.0):
        """Wait until this instance's pool is idle (runs may still be working)."""
        from tests.platforms._shared import settle_pools

        settle_pools(self.pool, timeout=timeout)

    def crash(self):
        """Stop renewing the lease and consuming the inbox, as a killed process would."""
        self.channel.cluster.cluster.stop(timeout=2)

    def advance(self, seconds):
        self.shared.advance(seconds)


class Bot:
    """The shared parts: clock, store, DingTalk; ``instance()`` adds a channel."""

    def __init__(self, bridge_factory, *, flaky=False):
        self.clock = FakeClock()
        self.memory = MemoryStore(namespace="bot", clock=self.clock)
        self.store = FlakyStore(self.memory) if flaky else self.memory
        self.api = FakeDingtalkApi()
        self.bridge_factory = bridge_factory
        self.instances: list[Instance] = []
        self._base = 0

    def next_msg_base(self):
        self._base += 1000
        return self._base

    def instance(self, script=None, **kw):
        made = Instance(self, script, **kw)
        self.instances.append(made)
        return made

    def advance(self, seconds, step=0.5):
        left = seconds
        while left > 0:
            self.clock.advance(min(step, left))
            left -= step
            for h in self.instances:
                h.settle()

    def close(self):
        for h in self.instances:
            try:
                h.close()
            except Exception:
                pass
        self.memory.close()
