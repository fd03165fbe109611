-- append_move: append one racer's move and its room event(s), atomically.
-- KEYS[1] meta (TTL anchor)  KEYS[2] ver  KEYS[3] events  KEYS[4] keyset
-- KEYS[5] log  KEYS[6] chain  KEYS[7] over (the last round whose race is over)
-- KEYS[8] closed (the logs closed to moves: append_event.lua writes them; a finish here)
-- [KEYS[9] places counter, KEYS[10] last finish time: only when this move finishes]
-- ARGV[1] expected log length (the move's sequence number)
-- ARGV[2] log entry bytes  ARGV[3] progress event bytes (all opaque)
-- ARGV[4], ARGV[5] the ids of the progress and of the finished event (lib.lua)
-- ARGV[6] the round the move belongs to
-- ARGV[7] with KEYS[9]: this finish's time (race clock, ms)
-- ARGV[8..] with KEYS[9]: the `finished` event for place 1, 2, ... (ARGV[7 + place]).
-- A move of a round whose race_over is stored is refused: a move still in flight
--   when another node (or this one) ended the race can never be stored after the
--   result, acknowledged to its racer and missing from the result (docs/store.md).
--   The caller cannot know its place before the script runs, so it passes one
--   finished event per possible place; the script picks the one for the place it
--   hands out. Place, progress and finished event are then ONE atomic write: no
--   crash or Redis failure can leave a finisher without its place (docs/store.md).
-- A move of a closed log is refused the same way: its racer's race is over (finished:
--   a finish closes its own log here; resigned, timed out, gone past the grace),
--   however stale the copy of the room on which the appending node checked it — a node paused or cut off from Redis stored the
--   finishing move of a racer who had left, and that racer won (docs/store.md).
-- A move of a room whose meta key is gone is refused (3) before anything is written:
--   Redis lost the room whole, and keys written now would have no TTL to inherit.
-- Places follow finish times: a finish whose time is earlier than the finish stored
--   before it (another node's clock ran ahead, or its commit was slower) is refused
--   with that time as a floor, and the caller retries at the floor. So a later place
--   never shows a faster time, whatever the nodes' clocks (docs/store.md).
-- Returns {accepted (1/0), log length, version of the progress event (0 if refused),
--          place (0 if none), the id of the event before the progress event, the
--          progress event's id, the finished event's id ('' where none),
--          the finish-time floor (0 unless refused for it), 1 if refused because
--          the race is over, 2 if because the log is closed, 3 if because the
--          room's meta key is gone: the room no longer exists (else 0),
--          what Redis had lost of the room's version and chain keys, restored from
--          the stream before the append ('' if nothing: lib.lua, restore_head)}.
-- A finished event, when written, is version + 1.
local len = redis.call('LLEN', KEYS[5])
if tonumber(redis.call('GET', KEYS[7]) or '0') >= tonumber(ARGV[6]) then
  return {0, len, 0, 0, '', '', '', 0, 1}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- the room is gone (its meta key: a restart without it, an eviction, a DEL):
  -- written, its keys had no TTL to inherit and stayed in Redis for ever
  return {0, len, 0, 0, '', '', '', 0, 3}
end
if len ~= tonumber(ARGV[1]) then
  -- stale or duplicate sequence number: write nothing, report where the log is (a
  -- retry of a move stored before its log was closed learns it is stored)
  return {0, len, 0, 0, '', '', '', 0, 0}
end
if redis.call('HEXISTS', KEYS[8], KEYS[5]) == 1 then
  return {0, len, 0, 0, '', '', '', 0, 2}
end
local place = 0
local finished = nil
if #KEYS >= 10 then
  -- Check everything that could fail before the first write: Redis does not roll
  -- back a script's earlier writes when a later command errors.
  place = tonumber(redis.call('GET', KEYS[9]) or '0') + 1
  local floor = tonumber(redis.call('GET', KEYS[10]) or '0')
  if tonumber(ARGV[7]) < floor then
    return {0, len, 0, 0, '', '', '', floor, 0}
  end
  finished = ARGV[7 + place]
  if finished == nil then
    return redis.error_reply('append_move: no finished event for place ' .. place)
  end
end
local v, prev, chain, lost = append_event(KEYS[2], KEYS[3], KEYS[6], ARGV[3], ARGV[4])
local after_finished = ''
len = redis.call('RPUSH', KEYS[5], ARGV[2])
local written = {KEYS[2], KEYS[3], KEYS[5], KEYS[6]}
if len == 1 then
  -- first entry: the log key was just created; record it so expire_room finds it
  redis.call('SADD', KEYS[4], KEYS[5])
  written[#written + 1] = KEYS[4]
end
if finished ~= nil then
  -- A finish is its racer's last entry: the log is closed with it, so nothing (an
  -- undo from a node whose copy of the room has not folded the finish yet) can take
  -- back a won game whose place stands (docs/store.md, "Closed logs").
  redis.call('HSET', KEYS[8], KEYS[5], '1')
  written[#written + 1] = KEYS[8]
  redis.call('INCR', KEYS[9])
  redis.call('SET', KEYS[10], ARGV[7])
  written[#written + 1] = KEYS[9]
  -- every finish (not only the first) names both in the key set: a counter written
  -- by an older server had no time key beside it, and expire_room must find both
  redis.call('SADD', KEYS[4], KEYS[9], KEYS[10])
  written[#written + 1] = KEYS[10]
  written[#written + 1] = KEYS[4]
  local _v, _p
  _v, _p, after_finished = append_event(KEYS[2], KEYS[3], KEYS[6], finished, ARGV[5])
end
inherit_ttl(KEYS[1], written)
return {1, len, v, place, prev, chain, after_finished, 0, 0, lost}
