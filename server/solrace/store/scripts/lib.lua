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

-- The stream's last entry: its version and its own id (field `c`); 0, '' when empty.
local function stream_head(events_key)
  local top = redis.call('XREVRANGE', events_key, '+', '-', 'COUNT', 1)[1]
  if not top then
    return 0, ''
  end
  local version = tonumber(string.match(top[1], '%-(%d+)$'))
  local fields = top[2]
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'c' then
      return version, fields[i + 1]
    end
  end
  return version, ''
end

-- The version and chain keys only cache the stream's last entry, so that an append
-- reads two strings rather than the stream. Redis can lose either alone, the stream
-- whole (a maxmemory-policy that evicts keys, an operator's DEL): without its version
-- an append tried id 0-1 on a stream at 12, and every move of the room failed for
-- ever; without its chain the next event was stored with no link to the one before,
-- and every node folding it took the stream for rewound (an audit). Restores each
-- from the stream where it is missing or behind it (a chain: not the last entry's id)
-- and returns what was wrong, '' if nothing: a lost write the caller must announce
-- (docs/store.md, "Lost writes"). The restored keys have no TTL: callers inherit it.
local function restore_head(ver_key, events_key, chain_key)
  local version, id = stream_head(events_key)
  if version == 0 then
    return ''
  end
  local lost = {}
  local ver = redis.call('GET', ver_key)
  if not ver or tonumber(ver) < version then
    redis.call('SET', ver_key, version)
    lost[#lost + 1] = 'its version key (' .. (ver and ('at ' .. ver) or 'gone')
      .. ', the stream at ' .. version .. ')'
  end
  if id ~= '' and redis.call('GET', chain_key) ~= id then
    redis.call('SET', chain_key, id)
    lost[#lost + 1] = 'its chain key'
  end
  if #lost == 0 then
    return ''
  end
  return 'Redis lost ' .. table.concat(lost, ' and ') .. '; restored from the stream'
end

-- Append one event to the room stream with the next gap-free version, linked to the
-- event before it. `id` is the event's own random id (drawn by the caller); the
-- entry stores `c` = id and `p` = the id of the event before it, and the chain key
-- holds the last event's id. A node that folds an entry whose `p` is not the `c` of
-- the last event it folded knows that Redis lost events it had delivered, even if
-- new ones have since taken their versions (docs/store.md, "Lost writes").
-- A version or chain key missing (a room's first event, or a key lost) or a version
-- behind the stream (its XADD refused) is restored from the stream first
-- (restore_head): the fourth value returned says what was lost, '' if nothing.
-- XADD goes first: it is the only write here that can fail (an id not above the
-- stream top), and Redis does not roll back a script's earlier writes on error; the
-- only writes before it restore what the stream already says.
-- INCR (not SET) keeps the counter's TTL if the room is expiring; the chain key's
-- TTL is restored by the caller's inherit_ttl.
-- Returns the new version, the ids of the previous and of this event, and the loss.
local function append_event(ver_key, events_key, chain_key, event, id)
  local lost = ''
  local ver, prev = redis.call('GET', ver_key), redis.call('GET', chain_key)
  if not ver or not prev then
    lost = restore_head(ver_key, events_key, chain_key)
    ver, prev = redis.call('GET', ver_key), redis.call('GET', chain_key)
  end
  local v = tonumber(ver or '0') + 1
  local added = redis.pcall('XADD', events_key, '0-' .. v, 'e', event, 'p', prev or '', 'c', id)
  if type(added) == 'table' and added.err then
    -- An id not above the stream's top: the version key is behind the stream. If it
    -- was not that, the same XADD fails again, as it would have without the pcall.
    lost = restore_head(ver_key, events_key, chain_key)
    v = tonumber(redis.call('GET', ver_key) or '0') + 1
    prev = redis.call('GET', chain_key)
    redis.call('XADD', events_key, '0-' .. v, 'e', event, 'p', prev or '', 'c', id)
  end
  redis.call('INCR', ver_key)
  redis.call('SET', chain_key, id)
  return v, prev or '', id, lost
end
