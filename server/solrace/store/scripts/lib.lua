-- Helpers prepended to every solrace store script (see solrace/store/_lua.py).
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

-- Append one event to the room stream with the next gap-free version, linked to the
-- event before it. `id` is the event's own random id (drawn by the caller); the
-- entry stores `c` = id and `p` = the id of the event before it, and the chain key
-- holds the last event's id. A node that folds an entry whose `p` is not the `c` of
-- the last event it folded knows that Redis lost events it had delivered, even if
-- new ones have since taken their versions (docs/store.md, "Lost writes").
-- XADD goes first: it is the only write here that can fail (an id not above the
-- stream top), and Redis does not roll back a script's earlier writes on error.
-- INCR (not SET) keeps the counter's TTL if the room is expiring; the chain key's
-- TTL is restored by the caller's inherit_ttl.
-- Returns the new version and the ids of the previous and of this event.
local function append_event(ver_key, events_key, chain_key, event, id)
  local v = tonumber(redis.call('GET', ver_key) or '0') + 1
  local prev = redis.call('GET', chain_key) or ''
  redis.call('XADD', events_key, '0-' .. v, 'e', event, 'p', prev, 'c', id)
  redis.call('INCR', ver_key)
  redis.call('SET', chain_key, id)
  return v, prev, id
end
