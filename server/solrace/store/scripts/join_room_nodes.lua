-- join_room_nodes: record that a node serves a room; return every node that does.
-- KEYS[1] meta (TTL anchor)  KEYS[2] the room's set of serving nodes
-- ARGV[1] node id
-- One atomic step, so of two nodes joining at the same time the second always sees
-- the first (and wakes it, Store.wake): no node can miss another's appends. A script
-- so that a set created after expire_room inherits the room's TTL. A join does
-- nothing to a room whose meta key is gone (Redis restarted without it, evicted it):
-- the set would have no TTL to inherit, and would stay for ever. (Only a join again,
-- by a node whose lease lapsed, was refused: a first join, before a decision on a
-- room Redis had lost, wrote the set all the same.)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('SMEMBERS', KEYS[2])
end
redis.call('SADD', KEYS[2], ARGV[1])
inherit_ttl(KEYS[1], {KEYS[2]})
return redis.call('SMEMBERS', KEYS[2])
