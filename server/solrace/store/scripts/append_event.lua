-- append_event: optimistic append of one room-level event.
-- KEYS[1] meta (TTL anchor)  KEYS[2] ver  KEYS[3] events  KEYS[4] chain
-- KEYS[5] over (the last round whose race is over; append_move.lua reads it)
-- ARGV[1] expected version, or '' for "append whatever the version"
-- ARGV[2] event bytes (opaque)  ARGV[3] the event's id (lib.lua, append_event)
-- ARGV[4] the round this event ends (a race_over), or '' for none: from the same
--   atomic step on, append_move refuses that round's moves.
-- KEYS[6] tokens hash; ARGV[5] racer id, ARGV[6] token digest, or '' '' for none: a
--   joining racer's token, written only if its racer_joined is (a token written
--   before the compare could land on the racer id another node's join just took).
-- ARGV[7] a TTL in milliseconds, or '' for none: the event sets the room's expiry (a
--   race_over, a rematch, the last racer leaving a lobby) in the same atomic step, on
--   every fixed key (KEYS[7] the room's code copy, KEYS[8] nodes, KEYS[9] the key
--   set, KEYS[10] closed), so no fault between the event and its expiry can leave the room on the
--   expiry of a state it has left; the key set's members follow (settle_expiry.lua).
-- KEYS[10] closed (the logs closed to moves); ARGV[8] a move log's key name, or '':
--   the event ends that racer's race (resigned, timed out, gone past the grace), and
--   from the same atomic step on append_move refuses that log's moves — whatever the
--   appending node's copy of the room says (docs/store.md, "Closed logs").
-- ARGV[9] a version, or '': the event begins a round (a rematch), and from the same
--   atomic step the stream holds nothing before that version (the reset that began
--   the round before), and KEYS[11..] — the key set's members of the rounds before
--   that one (move logs, place counters, finish times), listed by the caller — are
--   deleted with their closed marks (the caller lists the closed marks of logs never
--   written too: they are in no key set). Their rounds are over (`over`), so
--   append_move can never write them again (docs/store.md, "A room's history").
--   ARGV[10..] the racer ids whose tokens stay (the room's racers as the rematch is
--   decided, those it drops too): every other racer's token is deleted in the same
--   step — a racer gone from the room before it, whose digest each join and resume
--   would read for ever.
-- Returns {1, new_version} or {0, current_version} (conflict: nothing written), or
-- {0, current_version, what was lost} when the room's version or chain key was lost
-- (restore_head, lib.lua): they are restored from the stream, the event is not
-- appended, and the caller announces the loss and decides again. Checked on every
-- room-level event (they are rare), before the compare: a lost version key read as
-- version 0 conflicted with every decision, which the node took for its writes lost,
-- and rebuilt the room, and tried again, as often as it was allowed.
-- The appending node folds the event from the stream afterwards, links and all.
-- A room whose meta key is gone (Redis restarted without it, evicted it, an
-- operator's DEL) is refused before anything is read or written: {0, 0}, a conflict
-- at version 0, which the node takes for the room gone (Node.decide_locked). Written,
-- its keys had no TTL to inherit (inherit_ttl) and stayed in Redis for ever.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0}
end
local lost = restore_head(KEYS[2], KEYS[3], KEYS[4])
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if lost ~= '' then
  inherit_ttl(KEYS[1], {KEYS[2], KEYS[4]})
  return {0, current, lost}
end
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= current then
  return {0, current}
end
local v = append_event(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3])
local written = {KEYS[2], KEYS[3], KEYS[4]}
if ARGV[4] ~= '' and tonumber(ARGV[4]) > tonumber(redis.call('GET', KEYS[5]) or '0') then
  redis.call('SET', KEYS[5], ARGV[4])
  written[#written + 1] = KEYS[5]
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[6], ARGV[5], ARGV[6])
  written[#written + 1] = KEYS[6]
end
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[10], ARGV[8], '1')
  written[#written + 1] = KEYS[10]
end
if ARGV[9] ~= '' then
  redis.call('XTRIM', KEYS[3], 'MINID', '0-' .. ARGV[9])
  for i = 11, #KEYS do
    redis.call('DEL', KEYS[i])
    redis.call('SREM', KEYS[9], KEYS[i])
    redis.call('HDEL', KEYS[10], KEYS[i])
  end
  local stays = {}
  for i = 10, #ARGV do
    stays[ARGV[i]] = true
  end
  for _, racer in ipairs(redis.call('HKEYS', KEYS[6])) do
    if not stays[racer] then
      redis.call('HDEL', KEYS[6], racer)
    end
  end
end
if ARGV[7] ~= '' then
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ARGV[7])
  end
else
  inherit_ttl(KEYS[1], written)
end
return {1, v}
