-- The store's clock (solrace/store/store.py, time_ms): Redis's TIME, seconds and
-- microseconds. A script rather than the bare command so that KEYS[1] (never
-- written) routes it: on a cluster every node of a deployment asks the same master,
-- so all of them steer their race clocks toward one clock (solrace/rooms/clock.py).
return redis.call('TIME')
