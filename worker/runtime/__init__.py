"""How a worker process runs under gevent: greenlets, the pool's poll."""
