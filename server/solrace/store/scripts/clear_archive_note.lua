-- clear_archive_note: forget a room's archive note (Store.clear_unarchived) if it
-- notes no race after round ARGV[2]. The note's score is the last round noted
-- (Store.mark_unarchived: ZADD GT, before a countdown and before a race_over), so a
-- countdown of a later round that noted the room before this runs keeps its note,
-- whatever the room's stream says yet: the countdown is stored after its note. One
-- key, global (no room tag): a script of its own slot on a Cluster.
-- The lobby notes (Store.forget_unlisted) are forgotten the same way: a rematch
-- notes the round its reset begins before storing the reset.
-- KEYS[1] the notes (a sorted set)  ARGV[1] room id  ARGV[2] the round archived (or
-- read as no lobby)
local noted = redis.call('ZSCORE', KEYS[1], ARGV[1])
if noted and tonumber(noted) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
