-- Helpers prepended to every solrace store script (see solrace/store/scripts.py).
-- Keep them free of side effects except through the keys passed in by the caller:
-- every key touched must be one of the script's KEYS (Redis Cluster rule).

-- A room that is already expiring (its meta key has a TTL) must not grow keys that
-- live forever: any key written after expire_room gets the same remaining TTL.
-- PTTL is -1 for "exists, no TTL" and -2 for "missing"; only -1 needs fixing.
local function inherit_ttl(anchor, keys)
  local ttl = redis.call('PTTL', anchor)
  if ttl > 0 then
    for _, k in ipairs(keys) do
      if redis.call('PTTL', k) == -1 then
        redis.call('PEXPIRE', k, ttl)
      end
    end
  end
end

-- Append one event to the room stream with the next gap-free version.
-- XADD goes first: it is the only write here that can fail (an id not above the
-- stream top), and Redis does not roll back a script's earlier writes on error.
-- INCR (not SET) keeps the counter's TTL if the room is expiring.
local function append_event(ver_key, events_key, event)
  local v = tonumber(redis.call('GET', ver_key) or '0') + 1
  redis.call('XADD', events_key, '0-' .. v, 'e', event)
  redis.call('INCR', ver_key)
  return v
end
