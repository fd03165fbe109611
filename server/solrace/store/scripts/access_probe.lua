-- The start-up access probe (solrace/store/probe.py, access_refused): whether this
-- Redis user may run the store's scripts on keys under the node's prefix. KEYS[1] is
-- the probe's own key; the script deletes it, a write as every store script makes.
return redis.call('DEL', KEYS[1])
