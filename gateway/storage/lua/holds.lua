-- Shared prologue of the scripts that release holds (admit, settle, reclaim, retire).
-- A hold is a hash PREFIX..'hold:'..id {amount, neg, counters, owner}; its id sits in the
-- sorted set `holds` (KEYS[1]) scored by deadline and in the set PREFIX..'owned:'..owner.
-- An owner is a gateway replica: PREFIX..'owners' scores each by the end of its lease, which it
-- renews every few seconds while it lives. Releasing never recreates a counter that is gone.
local function release_hold(holds, prefix, id)
  local hkey = prefix .. 'hold:' .. id
  local h = redis.call('HMGET', hkey, 'neg', 'counters', 'owner')
  if h[1] then
    for c in string.gmatch(h[2], '[^\n]+') do
      if redis.call('EXISTS', c) == 1 then redis.call('HINCRBY', c, 'reserved', h[1]) end
    end
    if h[3] then redis.call('SREM', prefix .. 'owned:' .. h[3], id) end
    redis.call('DEL', hkey)
  end
  redis.call('ZREM', holds, id)
end

-- A hold whose replica died: the stream progress its owner checkpointed on it (field
-- 'checkpoint', gateway/inflight.py) is queued on PREFIX..'stopped' for a live replica to
-- charge, instead of vanishing with the hold. (A hold past its deadline belongs to a live
-- replica, whose stream settles its true cost when it ends; one retired cleanly, likewise.)
local function drop_hold(holds, prefix, id)
  local checkpoint = redis.call('HGET', prefix .. 'hold:' .. id, 'checkpoint')
  if checkpoint then redis.call('RPUSH', prefix .. 'stopped', checkpoint) end
  release_hold(holds, prefix, id)
end

-- Holds past their deadline (a backstop: a live replica's hold that was never settled).
local function reclaim(holds, prefix, now, limit)
  local expired = redis.call('ZRANGEBYSCORE', holds, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do release_hold(holds, prefix, id) end
  return #expired
end

-- Every hold of `owner` (up to limit); the owner is forgotten once it holds nothing. `dead`:
-- its checkpoints are queued (drop_hold).
local function release_owner(holds, prefix, owner, limit, dead)
  local owned = prefix .. 'owned:' .. owner
  local ids = redis.call('SRANDMEMBER', owned, limit)
  for _, id in ipairs(ids) do
    if dead then drop_hold(holds, prefix, id) else release_hold(holds, prefix, id) end
    redis.call('SREM', owned, id)  -- also when the hold's hash had expired already
  end
  if redis.call('SCARD', owned) == 0 then redis.call('ZREM', prefix .. 'owners', owner) end
  return #ids
end

-- The holds of every owner whose lease has ended: a replica that died.
local function reclaim_dead(holds, prefix, now, limit)
  local dead = redis.call('ZRANGEBYSCORE', prefix .. 'owners', '-inf', now, 'LIMIT', 0, 16)
  local released = 0
  for _, owner in ipairs(dead) do released = released + release_owner(holds, prefix, owner, limit, true) end
  return released
end
