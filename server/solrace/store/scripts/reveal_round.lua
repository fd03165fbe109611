-- reveal_round: note that a round's seed went out (a client proved it: a store rewind
-- lost the race_over that revealed it), so that no move of that round, nor of any
-- before it, is ever stored again, whichever node checks it.
-- KEYS[1] meta (TTL anchor)  KEYS[2] over (the last round whose race is over;
--   append_move.lua refuses the moves of every round up to it)
-- KEYS[3] closed: its field `revealed` (never a log's key name) takes the round too,
--   so that `over` raised by a proof is told from `over` raised by a race_over
--   (round_ended.lua): the round the store holds under way (a later round's proof
--   raises `over` past it) is not over until its own race_over is stored. Its field
--   `ended` keeps the last round a race_over raised `over` to, as `over` was before
--   the first proof past it: a round before that one still ended (round_ended.lua).
-- ARGV[1] the round proved revealed
-- Never lowers `over`: one atomic step, so a proof of an earlier round read and
-- written around another node's race_over cannot undo it. Returns `over` before: at
-- or past the round, the store knew already (another node was given the proof).
-- A room whose keys expired meanwhile is left gone: SET on it would leave an `over`
-- with no TTL to inherit, never expiring (a review).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
local over = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) > over then
  if tonumber(redis.call('HGET', KEYS[3], 'revealed') or '0') < over then
    redis.call('HSET', KEYS[3], 'ended', over)  -- `over` is a race_over's
  end
  redis.call('SET', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], 'revealed', ARGV[1])
  inherit_ttl(KEYS[1], {KEYS[2], KEYS[3]})
end
return over
